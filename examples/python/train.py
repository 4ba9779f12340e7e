"""Trains a logistic regression on a generated dataset, and survives preemption.

    python3 train.py [--steps 300] [--lr 0.5] [--step-seconds 0.05]

It follows Sterna's contract with a training command (docs/features/workdir.md):

- checkpoints to $STERNA_CHECKPOINT_DIR as step-<N>.json, written whole then renamed, so
  a file under that name is complete; the agent uploads each new one to the run's bucket;
- checkpoints every $STERNA_CHECKPOINT_INTERVAL seconds, re-reading the interval in force
  from the file $STERNA_CHECKPOINT_INTERVAL_FILE names (the run may change it while it
  trains) at most once a second;
- on SIGTERM (a preemption notice, or the run asking for a final checkpoint) finishes its
  step, checkpoints and exits 143;
- resumes from the checkpoint file $STERNA_RESUME_FROM names, when set;
- writes "<step>/<total steps>" to $STERNA_PROGRESS_FILE (percent and ETA in sterna status).

Outside Sterna (none of these set) it checkpoints to outputs/checkpoints every 60 s.
Each step is a pure function of the weights and a checkpoint keeps them exactly (JSON
round-trips floats), so however often it is preempted it ends with the same weights.
"""
import argparse
import json
import os
import signal
import sys
import time

import tinylogreg  # installed by setup, from requirements.txt


def interval_reader():
    """The checkpoint interval in force, in seconds."""
    seconds = float(os.environ.get("STERNA_CHECKPOINT_INTERVAL", "60"))
    path = os.environ.get("STERNA_CHECKPOINT_INTERVAL_FILE")
    read_at = 0.0

    def current():
        nonlocal seconds, read_at
        if path and time.monotonic() - read_at >= 1:
            read_at = time.monotonic()
            try:
                with open(path) as f:
                    value = float(f.read().strip())
                if value > 0 and value != seconds:
                    seconds = value
                    print(f"checkpoint interval now {seconds:g} s")
            except (OSError, ValueError):
                pass  # not written yet: the interval stays
        return seconds

    return current


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="pause after each step (to watch it)")
    args = parser.parse_args()

    checkpoint_dir = os.environ.get("STERNA_CHECKPOINT_DIR", os.path.join("outputs", "checkpoints"))
    progress_file = os.environ.get("STERNA_PROGRESS_FILE")
    interval = interval_reader()
    xs, ys = tinylogreg.dataset()

    state = {"step": 0, "weights": [0.0] * len(xs[0]), "bias": 0.0, "loss": None}
    resume = os.environ.get("STERNA_RESUME_FROM")
    if resume:
        with open(resume) as f:
            state = json.load(f)
        print(f"resumed from step {state['step']}")
    else:
        print("starting at step 0")
    print(f"tinylogreg {tinylogreg.__version__} from {os.path.relpath(tinylogreg.__file__)}")

    def checkpoint():
        os.makedirs(checkpoint_dir, exist_ok=True)
        final = os.path.join(checkpoint_dir, f"step-{state['step']}.json")
        with open(final + ".tmp", "w") as f:
            json.dump(state, f)
        os.replace(final + ".tmp", final)
        # The agent has uploaded the older ones: keep the newest two on the VM's disk.
        steps = sorted(int(n[5:-5]) for n in os.listdir(checkpoint_dir) if n.startswith("step-") and n.endswith(".json"))
        for old in steps[:-2]:
            os.remove(os.path.join(checkpoint_dir, f"step-{old}.json"))

    stopping = False

    def on_sigterm(_signum, _frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_sigterm)
    last_checkpoint = time.monotonic()
    while state["step"] < args.steps:
        state["weights"], state["bias"], state["loss"] = tinylogreg.step(state["weights"], state["bias"], xs, ys, args.lr)
        state["step"] += 1
        print(f"step {state['step']} loss {state['loss']!r}")
        if progress_file:
            with open(progress_file, "w") as f:
                f.write(f"{state['step']}/{args.steps}")
        if stopping:
            checkpoint()
            print(f"SIGTERM: checkpointed step {state['step']}, exiting")
            sys.exit(143)
        if time.monotonic() - last_checkpoint >= interval():
            checkpoint()
            last_checkpoint = time.monotonic()
        if args.step_seconds > 0:
            time.sleep(args.step_seconds)
    checkpoint()
    print(f"done: step {state['step']} loss {state['loss']!r}")


if __name__ == "__main__":
    main()
