#!/bin/bash
# The Sterna agent: runs as the VM's startup script (or a GKE Job's entrypoint).
#
# It reads everything it needs from instance metadata attributes, never from its own
# text, so nothing from a run spec ever reaches a shell unquoted. A list arrives as a
# count line, then one base64 line per item (activities/agent/script.ts), and is read
# into a bash array; a list that does not decode to exactly its count of NUL-free
# items is refused (exit 65), never guessed at.
#
#   stage datasets -> resume checkpoint -> [image: pull, create container] -> setup
#     -> run trainer -> upload checkpoints -> exit
#
# A node of a gang (sterna-num-nodes > 1) knows its rank; only rank 0 publishes checkpoints.
# Progress goes out as guest attributes (sterna/phase, sterna/step, sterna/total-steps,
# sterna/gpu, sterna/checkpoint, sterna/checkpoint-ms, sterna/exit, sterna/staged-bytes,
# sterna/reused-bytes, sterna/total-bytes, sterna/checkpoint-interval, sterna/last-line), GCE's own way for
# a VM to report without SSH. A checkpoint is published only after it is fully uploaded.
# SIGTERM (the preemption notice) is forwarded to the trainer, which writes a final
# checkpoint; the agent uploads it before the notice period ends. The run's ask to move
# (instance attribute sterna-move=TRUE) stops the trainer the same way, with no deadline.
set -u -o pipefail

# On GKE each secret arrives as STERNA_SECRET_<NAME> (a secretKeyRef in the pod spec).
# Out of the environment at once, so that no process the agent starts sees it; the
# trainer alone gets it, under its own name (see "secrets" below).
declare -A SECRETS=()
for var in ${!STERNA_SECRET_@}; do
  SECRETS["${var#STERNA_SECRET_}"]="${!var}"
  unset "$var"
done

MD="http://${GCE_METADATA_HOST:-metadata.google.internal}/computeMetadata/v1"
WORK="${STERNA_WORK_DIR:-$PWD/sterna-work}"
STATE="$WORK/.sterna"
CKPT_DIR="$WORK/checkpoints"
mkdir -p "$STATE" "$CKPT_DIR" || exit 70
LOG_SPOOL=""   # set once the log is shipped (below): log() appends to it

log() { # log MESSAGE -> the agent's stderr (the serial console), and the run's log once it is shipped
  printf '%s sterna-agent: %s\n' "$(date -u +%FT%TZ)" "$*" >&2
  if [ -n "${LOG_SPOOL:-}" ]; then printf '%s agent %s\n' "${EPOCHREALTIME:-$(date +%s.%N)}" "$*" >> "$LOG_SPOOL" 2>/dev/null; fi
  return 0
}

attr() { # attr NAME -> the run input NAME, empty when absent
  if [ "${STERNA_PUBLISH_MODE:-gce}" = k8s ]; then
    # In a pod the inputs are environment variables: sterna-run-id -> STERNA_ATTR_sterna_run_id.
    local var="STERNA_ATTR_${1//-/_}"
    printf '%s' "${!var:-}"
    return
  fi
  curl -sf -H 'Metadata-Flavor: Google' "$MD/instance/attributes/$1" 2>/dev/null || true
}

json_string() { # json_string VALUE -> VALUE as a JSON string literal
  local v="${1//\\/\\\\}"
  v="${v//\"/\\\"}"
  printf '"%s"' "$v"
}

publish() { # publish KEY VALUE
  local try
  if [ "${STERNA_PUBLISH_MODE:-gce}" = k8s ]; then
    # In a pod, progress goes to the pod's own annotations (sterna/<key>) through the
    # API server, with the pod's service-account token (RBAC: patch on its pod).
    local api="https://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}"
    local token_file="${STERNA_K8S_TOKEN_FILE:-/var/run/secrets/kubernetes.io/serviceaccount/token}"
    local ca="${STERNA_K8S_CA_FILE:-/var/run/secrets/kubernetes.io/serviceaccount/ca.crt}"
    local tls=(--cacert "$ca")
    [ -f "$ca" ] || tls=(-k)
    local body
    body="{\"metadata\":{\"annotations\":{\"sterna/$1\":$(json_string "$2")}}}"
    for try in 1 2 3 4 5; do
      curl -sf "${tls[@]}" -X PATCH -H "Authorization: Bearer $(cat "$token_file")" \
        -H 'Content-Type: application/merge-patch+json' --data-binary "$body" \
        "$api/api/v1/namespaces/${POD_NAMESPACE}/pods/${POD_NAME}" >/dev/null && return 0
      sleep "$try"
    done
    log "could not publish $1"
    return
  fi
  for try in 1 2 3 4 5; do
    # The value goes on stdin: a value starting with @ (a printed line can) is never read as a file name.
    printf '%s' "$2" | curl -sf -X PUT -H 'Metadata-Flavor: Google' --data-binary @- \
      "$MD/instance/guest-attributes/sterna/$1" >/dev/null && return 0
    sleep "$try"
  done
  log "could not publish $1"
}

decode_list() { # decode_list NAME -> fills array LIST; fails unless the attribute is well formed
  LIST=()
  local lines=() line count out="$STATE/list.$$"
  mapfile -t lines < <(attr "$1")
  [ ${#lines[@]} -gt 0 ] || return 0   # absent: an empty list
  count="${lines[0]}"
  case "$count" in '' | *[!0-9]* | ?????????*) return 1 ;; esac
  [ $((10#$count)) -eq $((${#lines[@]} - 1)) ] || return 1
  # Each item is written out NUL-terminated: an item holding a NUL (which a bash string
  # cannot carry) would come back as two, and the count would not match.
  for line in "${lines[@]:1}"; do
    case "$line" in *[!A-Za-z0-9+/=]*) rm -f "$out"; return 1 ;; esac
    printf '%s' "$line" | base64 -d || { rm -f "$out"; return 1; }
    printf '\0'
  done > "$out"
  mapfile -d '' -t LIST < "$out"
  rm -f "$out"
  [ ${#LIST[@]} -eq $((10#$count)) ]
}

refuse_input() { # refuse_input WHAT -> the run's inputs are malformed: fail without running anything
  log "malformed input: $1"; publish phase failed; publish exit 65; exit 65
}

copy() { # copy SRC DEST, where either may be file:// or gs://
  local src="$1" dest="$2"
  case "$src$dest" in
    *gs://*) gcloud storage cp --recursive "$src" "$dest" ;;
    *) mkdir -p -- "$(dirname -- "${dest#file://}")" && cp -R -- "${src#file://}" "${dest#file://}" ;;
  esac
}

size_of() { # size_of URI -> bytes
  case "$1" in
    gs://*) gcloud storage du --summarize "$1" | awk '{s+=$1} END {print s+0}' ;;
    *) du -sb -- "${1#file://}" 2>/dev/null | awk '{print $1+0}' ;;
  esac
}

RUN_ID="$(attr sterna-run-id)"
ATTEMPT="$(attr sterna-attempt)"
CKPT_URI="$(attr sterna-checkpoint-uri)"
CKPT_URI="${CKPT_URI%/}"
POLL="$(attr sterna-poll-seconds)"
[[ "$POLL" =~ ^[0-9]+(\.[0-9]+)?$ ]] || POLL=1
publish phase starting

# --- a gang's node: its rank, and where rank 0 listens ------------------------------
# A node of a gang (sterna-num-nodes) gives its trainer STERNA_NODE_RANK,
# STERNA_NUM_NODES, STERNA_MASTER_ADDR and STERNA_MASTER_PORT, as torchrun expects.
# Rank 0 is the master: its address is its own internal one (the metadata server's).
# Only rank 0 publishes checkpoints: every rank holds the same weights.
# On GKE the pod's environment has them already (STERNA_NODE_RANK from its completion index).
NODE_RANK="${STERNA_NODE_RANK:-0}"
GANG_ENV=()
NUM_NODES="$(attr sterna-num-nodes)"
if [ -n "$NUM_NODES" ]; then
  NODE_RANK="$(attr sterna-node-rank)"
  [[ "$NUM_NODES" =~ ^[1-9][0-9]?$ && "$NODE_RANK" =~ ^(0|[1-9][0-9]?)$ ]] && [ "$NODE_RANK" -lt "$NUM_NODES" ] || refuse_input "sterna-node-rank / sterna-num-nodes"
  MASTER_ADDR="$(attr sterna-master-addr)"
  MASTER_PORT="$(attr sterna-master-port)"
  for try in 1 2 3 4 5; do
    if [ -n "$MASTER_ADDR" ] || [ "$NODE_RANK" != 0 ]; then break; fi
    MASTER_ADDR="$(curl -sf -H 'Metadata-Flavor: Google' "$MD/instance/network-interfaces/0/ip" 2>/dev/null || true)"
    [ -n "$MASTER_ADDR" ] || sleep "$try"
  done
  [[ "$MASTER_ADDR" =~ ^[0-9A-Za-z.:-]{1,253}$ ]] || refuse_input "sterna-master-addr (rank 0's internal address)"
  [[ "$MASTER_PORT" =~ ^[1-9][0-9]{0,4}$ ]] || refuse_input "sterna-master-port"
  GANG_ENV=(STERNA_NODE_RANK="$NODE_RANK" STERNA_NUM_NODES="$NUM_NODES" STERNA_MASTER_ADDR="$MASTER_ADDR" STERNA_MASTER_PORT="$MASTER_PORT")
fi

# --- logs: what the trainer prints, shipped to the bucket as it is printed -----------
# Every line the trainer prints on stdout or stderr (and every line of this agent's own
# log) is appended to a spool on the VM's disk as "<unix time, s.µs> <stream> <text>":
# stream out / err for the command's stdout / stderr, agent for this agent's log; setup
# (issue 38) gets its own stream name through `annotate`. The trainer's own output still
# reaches the console unchanged. A shipper copies the spool's new bytes to the run's
# bucket, beside its checkpoints, every sterna-log-flush-seconds (2), at once on SIGTERM
# (a preemption notice, a stop or a deletion) and on the notice read from the metadata
# server, then every half second while the VM winds down, and a last time when the
# agent exits:
#
#   <checkpoint URI>/logs/attempt-<N, 6 digits>/node-<rank>/<spool offset, 16 digits>.log
#
# A chunk's name is the spool offset of its first byte: names sort in order, chunks
# follow one another byte for byte, and a reader that has read up to offset X needs only
# the chunks that end after it. A chunk whose copy failed is sent again, longer, under
# the same name; chunks may split a line, which the reader joins (activities/logs/).
LOG_FLUSH="$(attr sterna-log-flush-seconds)"
[[ "$LOG_FLUSH" =~ ^[0-9]{1,4}(\.[0-9]{1,3})?$ ]] || LOG_FLUSH=2
LOG_CHUNK_BYTES=8388608
LOG_SHIPPED="$STATE/log-shipped"
LOG_URI="" LOG_SHIPPER=""
if [[ "$ATTEMPT" =~ ^[0-9]{1,9}$ ]] && [ -n "$CKPT_URI" ] && touch "$STATE/log-spool"; then
  LOG_URI="$CKPT_URI/logs/attempt-$(printf '%06d' "$((10#$ATTEMPT))")/node-$NODE_RANK"
  LOG_SPOOL="$STATE/log-spool"
else
  log "no attempt number or checkpoint URI: the trainer's output is not shipped"
fi

put_object() { # put_object FILE DEST -> DEST appears whole or not at all
  case "$2" in
    gs://*) copy "$1" "$2" ;;   # an object is visible only once its upload is complete
    *) local dest="${2#file://}"
       mkdir -p -- "$(dirname -- "$dest")" && cp -- "$1" "$dest.part" && mv -f -- "$dest.part" "$dest" ;;
  esac
}

ship_logs() { # ship_logs -> the spool's new bytes, in chunks; fails when a copy failed
  # The VM's SIGTERM reaches every process, this function's commands too: a command it
  # cut short fails the ship (the shipper tries again), and nothing is guessed from what
  # it did not finish. Before, a pipeline ended before it opened the chunk left the last
  # chunk's bytes in the file, sent again under the next offset: two lines of a
  # preempted attempt's log read twice, the two after them lost (CI, session 25).
  local size shipped len chunk="$STATE/log-chunk"
  while :; do
    size="$(stat -c %s -- "$LOG_SPOOL" 2>/dev/null)" || return 0
    if [ -e "$LOG_SHIPPED" ]; then shipped="$(cat -- "$LOG_SHIPPED" 2>/dev/null)" || return 1; else shipped=0; fi
    [[ "$shipped" =~ ^[0-9]{1,18}$ ]] || shipped=0   # unreadable as a number: all of it again, under 0
    [ "$size" -gt "$shipped" ] || return 0
    len=$((size - shipped))
    [ "$len" -le "$LOG_CHUNK_BYTES" ] || len="$LOG_CHUNK_BYTES"
    rm -f -- "$chunk" || return 1
    tail -c +"$((shipped + 1))" -- "$LOG_SPOOL" | head -c "$len" > "$chunk" || return 1
    len="$(stat -c %s -- "$chunk" 2>/dev/null)" || return 1
    [ "$len" -gt 0 ] || return 0
    put_object "$chunk" "$LOG_URI/$(printf '%016d' "$shipped").log" || return 1
    { printf '%s\n' "$((shipped + len))" > "$LOG_SHIPPED.tmp" && mv -f -- "$LOG_SHIPPED.tmp" "$LOG_SHIPPED"; } || return 1
    # What is in the bucket need not stay on the VM's disk: every 64 MiB shipped, the
    # spool's shipped bytes become a hole (offsets stay as they are), where the file
    # system can punch one; a chatty trainer cannot fill the disk with its own log.
    if [ $(((shipped + len) / 67108864)) -gt $((shipped / 67108864)) ]; then
      fallocate --punch-hole --offset 0 --length "$((shipped + len))" -- "$LOG_SPOOL" 2>/dev/null || true
    fi
  done
}

log_shipper() { # the background shipper: SIGTERM / SIGUSR1 = ship now, then often; SIGUSR2 = ship the rest and end
  local interval="$LOG_FLUSH" now=0 last=0 final failing=0 sleeper
  trap 'now=1 interval=0.5' TERM USR1
  trap 'last=1' USR2
  while :; do
    final="$last" now=0
    if ship_logs; then
      failing=0
    elif [ "$failing" = 0 ]; then
      failing=1
      log "could not ship the log to $LOG_URI; will retry"
    fi
    [ "$final" = 1 ] && return 0
    if [ "$now" = 0 ] && [ "$last" = 0 ]; then
      sleep "$interval" &
      sleeper=$!
      wait "$sleeper" 2>/dev/null
      kill "$sleeper" 2>/dev/null
    fi
  done
}

stop_log_shipper() { # the last lines out; bounded, so a bucket that does not answer cannot hold the VM
  local t
  [ -n "$LOG_SHIPPER" ] || return 0
  kill -USR2 "$LOG_SHIPPER" 2>/dev/null
  for ((t = 0; t < 300; t++)); do kill -0 "$LOG_SHIPPER" 2>/dev/null || break; sleep 0.1; done
  pkill -KILL -P "$LOG_SHIPPER" 2>/dev/null
  kill -KILL "$LOG_SHIPPER" 2>/dev/null
  wait "$LOG_SHIPPER" 2>/dev/null
  LOG_SHIPPER=""
}

annotate() { # annotate STREAM: lines on stdin -> stdout as they are, and to the spool tagged "<time> STREAM"
  trap '' TERM   # the notice reaches every process: read on until the trainer's last line
  local line spool
  exec {spool}>>"$LOG_SPOOL" || { cat; return; }
  while IFS= read -r line || [ -n "$line" ]; do
    printf '%s\n' "$line"
    printf '%s %s %s\n' "${EPOCHREALTIME:-$(date +%s.%N)}" "$1" "$line" >&"$spool"
  done
}

if [ -n "$LOG_URI" ]; then
  log_shipper &
  LOG_SHIPPER=$!
  trap stop_log_shipper EXIT
fi

# --- the last line: what the command (or setup) printed last, for the run's details ---
# sterna/last-line is the last non-blank line the command or setup printed, read from the
# part of the spool already shipped (so the line shown is also in the run's log): looked
# at with the status updates (never more often) and published only when a chunk was
# shipped since and the line changed. It leaves the VM (the run keeps it in its history,
# encrypted, and the web UI shows it), so it is made safe first: every secret value the
# agent injected (and each line of a value that spans lines, of 4 bytes or more) becomes
# ***; of a line redrawn with carriage returns (a progress bar) only what was drawn last
# stays; terminal escapes, control characters and bytes that are not UTF-8 go; and it is
# cut to 160 characters.
LAST_LINE_CHARS=160
LAST_LINE_WINDOW=16384
last_line_at="" last_line=""

redact() { # redact TEXT -> stdout: TEXT with every secret value the agent holds replaced by ***
  local s="$1" name value part
  for name in "${!SECRETS[@]}"; do
    value="${SECRETS[$name]}"
    [ -z "$value" ] || s="${s//"$value"/***}"
    case "$value" in *$'\n'* | *$'\r'*) ;; *) continue ;; esac
    while IFS= read -r part; do
      part="${part%$'\r'}"
      [ "${#part}" -lt 4 ] || s="${s//"$part"/***}"
    done <<< "${value//$'\r'/$'\n'}"
  done
  printf '%s' "$s"
}

safe_line() { # safe_line TEXT -> stdout: TEXT fit to leave the VM (above); run with LC_ALL=C, so lengths are bytes
  local s="$1" n=0 i b
  while [[ "$s" == *$'\r' ]]; do s="${s%$'\r'}"; done
  s="${s##*$'\r'}"
  s="$(redact "$s")"
  s="$(printf '%s' "$s" | sed -E $'s#\e\\[[0-9;?]*[ -/]*[@-~]##g' | tr -d '\000-\037\177')"
  if command -v iconv >/dev/null 2>&1; then
    s="$(printf '%s' "$s" | iconv -f UTF-8 -t UTF-8 -c 2>/dev/null)"
  else
    s="$(printf '%s' "$s" | tr -d '\200-\377')"   # no iconv (a small image): ASCII only
  fi
  # Once more: a secret could have been split by what was taken out.
  s="$(redact "$s")"
  s="${s#"${s%%[! ]*}"}" s="${s%"${s##*[! ]}"}"
  # At most 160 characters: in UTF-8 a character starts at every byte that is not 10xxxxxx.
  for ((i = 0; i < ${#s}; i++)); do
    b="${s:i:1}"
    case "$b" in [$'\x80'-$'\xbf']) ;; *) n=$((n + 1)); [ "$n" -lt "$LAST_LINE_CHARS" ] || break ;; esac
  done
  if [ "$i" -lt "${#s}" ]; then s="${s:0:i}…"; fi
  printf '%s' "$s"
}

last_printed_line() { # last_printed_line END -> stdout: the last line the command or setup printed before spool offset END, made safe
  local end="$1" start w lines i rest stream text
  start=$((end > LAST_LINE_WINDOW ? end - LAST_LINE_WINDOW : 0))
  w="$(tail -c +"$((start + 1))" -- "$LOG_SPOOL" 2>/dev/null | head -c "$((end - start))" | tr -d '\000'; printf x)"
  w="${w%x}"
  # Whole lines only; the window's first may have begun before it.
  case "$w" in *$'\n') ;; *$'\n'*) w="${w%$'\n'*}"$'\n' ;; *) return 1 ;; esac
  [ "$start" = 0 ] || w="${w#*$'\n'}"
  mapfile -t lines < <(printf '%s' "$w")
  for ((i = ${#lines[@]} - 1; i >= 0; i--)); do
    rest="${lines[i]#* }"          # "<time> <stream> <text>"
    stream="${rest%% *}"
    case "$stream" in out | err | setup-out | setup-err) ;; *) continue ;; esac
    case "$rest" in *' '*) text="${rest#* }" ;; *) continue ;; esac
    text="$(safe_line "$text")"
    [ -z "$text" ] || { printf '%s' "$text"; return 0; }
  done
  return 1
}

publish_last_line() { # -> sterna/last-line, when a chunk was shipped since the last look and the line changed
  local end line
  [ -n "$LOG_SPOOL" ] || return 0
  end="$(cat -- "$LOG_SHIPPED" 2>/dev/null)"
  [[ "$end" =~ ^[0-9]{1,18}$ ]] && [ "$end" != "$last_line_at" ] || return 0
  last_line_at="$end"
  line="$(export LC_ALL=C; last_printed_line "$end")" || return 0
  [ "$line" != "$last_line" ] || return 0
  last_line="$line"
  publish last-line "$line"
}

# --- the working directory (spec.workdir) --------------------------------------------
# "<sha256> <uri>" of a .tar.gz that `sterna start` or the client packed and uploaded
# (client/workdir/): fetched, checked against its sha256 and unpacked into the work
# directory on every attempt (each attempt is a new VM or pod), before the datasets,
# which land in it at their paths, and before setup and the command, which run there.
# Its files get the time they are unpacked (-m), not the pack's fixed one. A workdir that
# cannot be fetched, does not match its sha256 or does not unpack ends the agent with 69.
fetch_workdir() {
  local input want uri got try pack="$STATE/workdir.tar.gz"
  input="$(attr sterna-workdir)"
  [ -n "$input" ] || return 0
  want="${input%% *}" uri="${input#* }"
  [[ "$want" =~ ^[0-9a-f]{64}$ ]] && [ -n "$uri" ] && [ "$uri" != "$input" ] || refuse_input "sterna-workdir (not \"<sha256> <uri>\")"
  case "$uri/" in */../* | */./*) refuse_input "the workdir URI has . or .. segments" ;; esac
  publish phase staging
  for try in 1 2 3; do
    rm -f -- "$pack"
    copy "$uri" "$pack" && break
    [ "$try" = 3 ] && workdir_failed "$uri could not be fetched"
    sleep "$try"
  done
  got="$(sha256sum -- "$pack" | cut -d' ' -f1)"
  [ "$got" = "$want" ] || workdir_failed "$uri has sha256 $got, not the $want the run was started with"
  tar -xzmf "$pack" -C "$WORK" --no-same-owner || workdir_failed "$uri could not be unpacked into $WORK"
  rm -f -- "$pack"
  log "workdir $uri unpacked into $WORK"
  publish workdir "$want"
}
workdir_failed() { # workdir_failed WHY
  log "workdir: $1"; publish phase failed; publish exit 69; exit 69
}
fetch_workdir

# --- stage the datasets -------------------------------------------------------------
decode_list sterna-datasets || refuse_input sterna-datasets   # uri, path, uri, path, ...
DATASETS=("${LIST[@]}")
[ $((${#DATASETS[@]} % 2)) -eq 0 ] || refuse_input "sterna-datasets (not uri/path pairs)"
for ((i = 0; i < ${#DATASETS[@]}; i += 2)); do
  # The spec refuses these already; a VM never copies from or to outside where it should.
  case "${DATASETS[i]}/" in */../* | */./*) refuse_input "a dataset URI has . or .. segments" ;; esac
  case "/${DATASETS[i + 1]}/" in //* | */../* | */./*) refuse_input "a dataset path is not relative, or has . or .. segments" ;; esac
done
publish phase staging
total=0
for ((i = 0; i < ${#DATASETS[@]}; i += 2)); do
  total=$((total + $(size_of "${DATASETS[i]}")))
done
publish total-bytes "$total"
# A data cache in this VM's region (sterna-data-cache) keeps each staged dataset, so a
# later attempt of the run in the same region copies it from there, not from its source
# (no inter-region transfer). A cache that cannot be read or filled only costs a copy.
CACHE="$(attr sterna-data-cache)"
CACHE="${CACHE%/}"
staged=0 reused=0
for ((i = 0; i < ${#DATASETS[@]}; i += 2)); do
  uri="${DATASETS[i]}" dest="$WORK/${DATASETS[i + 1]}" cached="$CACHE/$((i / 2))"
  if [ -n "$CACHE" ]; then
    # Only a complete entry counts: its .done marker is written after the copy.
    have="$(size_of "$cached" 2>/dev/null)"
    if [ "$(size_of "$cached.done" 2>/dev/null)" -gt 0 ] 2>/dev/null && [ "${have:-0}" -gt 0 ] && copy "$cached" "$dest"; then
      reused=$((reused + have))
      publish reused-bytes "$reused"
      continue
    fi
  fi
  if ! copy "$uri" "$dest"; then
    log "staging $uri failed"; publish phase failed; publish exit 66; exit 66
  fi
  staged=$((staged + $(size_of "$uri")))
  publish staged-bytes "$staged"
  if [ -n "$CACHE" ]; then
    if copy "$dest" "$cached" && printf 'complete\n' > "$STATE/cache-done" && copy "$STATE/cache-done" "$cached.done"; then :; else log "could not keep $uri in the data cache"; fi
  fi
done

# --- resume from the last verified checkpoint ---------------------------------------
RESUME_FROM=""
resume="$(attr sterna-resume-from)"   # "<sha256> <uri>"
if [ -n "$resume" ]; then
  want="${resume%% *}" uri="${resume#* }"
  RESUME_FROM="$STATE/resume-$(basename -- "$uri")"
  if ! copy "$uri" "$RESUME_FROM" || [ "$(sha256sum "$RESUME_FROM" | cut -d' ' -f1)" != "$want" ]; then
    log "checkpoint $uri is missing or does not match its sha256"; publish phase failed; publish exit 67; exit 67
  fi
fi

# --- checkpoints: upload each complete one, then publish it --------------------------
# The trainer writes checkpoints atomically (write, then rename) as step-<N>[.<ext>]
# in STERNA_CHECKPOINT_DIR, so a file that exists under that name is complete.
last_uploaded=-1
upload_new_checkpoints() {
  local newest="" step=-1 f n sum dest started_ns
  [ "$NODE_RANK" = 0 ] || return 0   # a gang's checkpoints are rank 0's
  for f in "$CKPT_DIR"/step-*; do
    [ -f "$f" ] || continue
    n="$(basename "$f")"; n="${n#step-}"; n="${n%%.*}"
    case "$n" in '' | *[!0-9]*) continue ;; esac
    if [ "$n" -gt "$step" ]; then step="$n" newest="$f"; fi
  done
  [ -n "$newest" ] && [ "$step" -gt "$last_uploaded" ] || return 0
  dest="$CKPT_URI/$(basename "$newest")"
  sum="$(sha256sum "$newest" | cut -d' ' -f1)"
  started_ns="$(date +%s%N)"
  if copy "$newest" "$dest"; then
    last_uploaded="$step"
    # What a checkpoint costs, as far as the agent can time it: its upload. Published
    # before the checkpoint it belongs to, so the run reads both together.
    publish checkpoint-ms "$((($(date +%s%N) - started_ns) / 1000000))"
    publish checkpoint "$step $sum $dest"
  else
    log "upload of $newest failed; will retry"
  fi
}

# The trainer writes "<step>" or "<step>/<total steps>" to STERNA_PROGRESS_FILE.
last_total=""
publish_progress() {
  local step total=""
  step="$(cat "$STATE/progress" 2>/dev/null || true)"
  case "$step" in */*) total="${step#*/}" step="${step%%/*}" ;; esac
  case "$step" in '' | *[!0-9]*) return 0 ;; esac
  publish step "$step"
  case "$total" in '' | *[!0-9]*) ;; *) [ "$total" = "$last_total" ] || { last_total="$total"; publish total-steps "$total"; } ;; esac
}

# GPU utilisation, when the VM has NVIDIA's nvidia-smi: one CSV line per GPU,
# "<utilisation %>, <memory used MiB>, <memory total MiB>". Published as
# "<mean utilisation %> <memory used MiB> <memory total MiB> <GPUs>" (summed over the
# GPUs), and only when it changed: the run keeps the last reading until a new one.
last_gpu=""
publish_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  local out util used total n=0 sum=0 used_sum=0 total_sum=0 value
  out="$(timeout 10 nvidia-smi --query-gpu=utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits 2>/dev/null)" || return 0
  while IFS=, read -r util used total; do
    util="${util//[[:space:]]/}" used="${used//[[:space:]]/}" total="${total//[[:space:]]/}"
    # A GPU that cannot report ("[N/A]", "[Not Supported]") is left out, not read as idle.
    case "$util" in '' | *[!0-9]* | ????*) continue ;; esac
    case "$used" in '' | *[!0-9]* | ?????????*) used=0 ;; esac
    case "$total" in '' | *[!0-9]* | ?????????*) total=0 ;; esac
    n=$((n + 1)) sum=$((sum + 10#$util)) used_sum=$((used_sum + 10#$used)) total_sum=$((total_sum + 10#$total))
  done <<< "$out"
  [ "$n" -gt 0 ] || return 0
  value="$(((sum + n / 2) / n)) $used_sum $total_sum $n"
  [ "$value" = "$last_gpu" ] && return 0
  last_gpu="$value"
  publish gpu "$value"
}

# --- run the trainer ---------------------------------------------------------------
decode_list sterna-argv || refuse_input sterna-argv
ARGV=("${LIST[@]}")
decode_list sterna-env || refuse_input sterna-env
ENVS=("${LIST[@]}")
if [ ${#ARGV[@]} -eq 0 ]; then log "no command"; publish phase failed; publish exit 64; exit 64; fi
NAME_CHARS=ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789   # no ranges: they depend on the locale
for kv in "${ENVS[@]}"; do
  name="${kv%%=*}"
  case "$kv" in *=*) ;; *) refuse_input "an env entry is not NAME=value" ;; esac
  case "$name" in '' | [0123456789]* | *[!$NAME_CHARS]*) refuse_input "an env name is not letters, digits and _" ;; esac
done

# --- the checkpoint interval ---------------------------------------------------------
# The trainer re-reads the interval in force from STERNA_CHECKPOINT_INTERVAL_FILE: it
# starts as STERNA_CHECKPOINT_INTERVAL, and on GCE the run may change it while the
# attempt trains, through the metadata attribute sterna-checkpoint-interval
# (workflows/run/live-interval.ts). Written whole, then renamed: never read half-written.
INTERVAL_FILE="$STATE/checkpoint-interval"
interval=""
set_interval() { # set_interval SECONDS -> in force, and published, if it is a new number
  [[ "$1" =~ ^[0-9]{1,9}(\.[0-9]{1,6})?$ ]] || return 0
  [ "$1" = "$interval" ] && return 0
  if ! { printf '%s\n' "$1" > "$INTERVAL_FILE.tmp" && mv -f "$INTERVAL_FILE.tmp" "$INTERVAL_FILE"; }; then
    log "could not write the checkpoint interval"; return 0
  fi
  interval="$1"
  publish checkpoint-interval "$1"
}
for kv in "${ENVS[@]}"; do
  case "$kv" in STERNA_CHECKPOINT_INTERVAL=*) set_interval "${kv#*=}" ;; esac
done

# --- secrets: into the trainer's environment only ------------------------------------
# Held in this shell's unexported variables, so no process of the agent (curl...) sees
# them; exported only in the subshell that becomes the trainer. Never logged.
# (GKE's arrive in the pod's environment: taken out of it first thing, above.)
# GCE: the agent reads each from Secret Manager with the VM's service account.
SECRET_MANAGER="${CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER:-https://secretmanager.googleapis.com/}"
secret_unavailable() { # secret_unavailable NAME WHY
  log "secret $1 could not be read: $2"; publish phase failed; publish exit 68; exit 68
}
json_field() { # json_field NAME JSON -> the string value of the first "NAME": "..."
  [[ "$2" =~ \"$1\"[[:space:]]*:[[:space:]]*\"([^\"]*)\" ]] && printf '%s' "${BASH_REMATCH[1]}"
}
read_secret() { # read_secret NAME PATH TOKEN -> SECRETS[NAME], the exact bytes (a NUL is refused)
  local response status body data value
  # The token goes to curl on stdin (-H @-), never on its command line, which others can read.
  response="$(printf 'Authorization: Bearer %s\n' "$3" | curl -sS -H @- -w '\n%{http_code}' "${SECRET_MANAGER%/}/v1/$2:access" 2>/dev/null)" \
    || secret_unavailable "$1" "Secret Manager at ${SECRET_MANAGER} did not answer"
  status="${response##*$'\n'}" body="${response%$'\n'*}"
  [ "$status" = 200 ] || secret_unavailable "$1" "HTTP $status from Secret Manager for $2: $(json_field message "$body")"
  data="$(json_field data "$body")" || secret_unavailable "$1" "no payload in Secret Manager's answer for $2"
  case "$data" in *[!A-Za-z0-9+/=]*) secret_unavailable "$1" "a payload that is not base64 for $2" ;; esac
  if printf '%s' "$data" | base64 -d | od -An -v -tx1 | grep -qw 00; then secret_unavailable "$1" "$2 holds a NUL byte, which no environment variable can carry"; fi
  value="$(printf '%s' "$data" | base64 -d && printf x)" || secret_unavailable "$1" "a payload that is not base64 for $2"
  SECRETS["$1"]="${value%x}"
}
decode_list sterna-secrets || refuse_input sterna-secrets   # name, projects/P/secrets/S/versions/V, ...
SECRET_REFS=("${LIST[@]}")
[ $((${#SECRET_REFS[@]} % 2)) -eq 0 ] || refuse_input "sterna-secrets (not name/path pairs)"
if [ ${#SECRET_REFS[@]} -gt 0 ]; then
  token_json="$(curl -sf -H 'Metadata-Flavor: Google' "$MD/instance/service-accounts/default/token")" \
    || secret_unavailable "${SECRET_REFS[0]}" "the VM has no service-account token (does it have a service account?)"
  token="$(json_field access_token "$token_json")" || secret_unavailable "${SECRET_REFS[0]}" "the metadata server's token answer has no access_token"
  unset token_json
  for ((i = 0; i < ${#SECRET_REFS[@]}; i += 2)); do
    name="${SECRET_REFS[i]}" path="${SECRET_REFS[i + 1]}"
    case "$name" in '' | [0123456789]* | *[!$NAME_CHARS]*) refuse_input "a secret name is not letters, digits and _" ;; esac
    [[ "$path" =~ ^projects/[a-z0-9-]+/secrets/[A-Za-z0-9_-]+/versions/[a-z0-9]+$ ]] || refuse_input "a secret reference is malformed"
    read_secret "$name" "$path" "$token"
  done
  unset token
fi

# GCE announces a preemption on the metadata server before the VM stops: publish it at
# once, so the run hears of it within one look instead of when the VM is already down.
watch_preemption() {
  # The notice comes with the soft-off SIGTERM to every process: outlive it to publish.
  trap '' TERM
  local seen="$STATE/preempted" wait=''
  while :; do
    # curl is this shell's own child (no command substitution), so the agent can end it.
    if curl -sf -o "$seen" -H 'Metadata-Flavor: Google' "$MD/instance/preempted$wait" 2>/dev/null; then
      [ "$(cat "$seen")" = TRUE ] && break
      # From now on, hang until the value changes (or 5 minutes pass).
      wait='?wait_for_change=true&timeout_sec=300'
    else
      sleep 5
    fi
  done
  log "preemption notice on the metadata server"
  [ -z "$LOG_SHIPPER" ] || kill -USR1 "$LOG_SHIPPER" 2>/dev/null
  publish preempted TRUE
}
if [ "${STERNA_PUBLISH_MODE:-gce}" = gce ]; then
  watch_preemption &
  WATCHER=$!
fi

# --- setup and the container image (issue 38) ---------------------------------------
# Setup (sterna-setup, a list of one-line shell commands) runs once, before the command,
# in the command's working directory, with its environment and secrets, as the phase
# `setup`: sterna/setup-step says which command runs ("<i>/<n>"). Its stdout and stderr
# go to the run's log as the streams setup-out and setup-err. The first command that
# fails ends the agent with exit 71 (SetupFailed) and sterna/setup-exit, the command's
# own code, once the whole log is in the bucket: the same commands fail the same way on
# any VM, so the run does not try again.
#
# With an image (sterna-image, GCE only: on GKE the pod already runs in it), setup and the
# command run inside one container of that image, made once: setup is its first start,
# the command its second, so whatever setup installs in the image's file system is there
# for the command. The container runtime is the VM's: docker when its daemon answers
# (GCE's Deep Learning VM images, with the NVIDIA runtime), else podman. The work
# directory (datasets, checkpoints, the agent's state) is mounted at the same path, so
# every STERNA_* path means the same inside; the network is the host's (a gang's nodes
# meet as on the VM). Exits: 72 the image cannot be pulled, 73 no container runtime,
# 74 the runtime could not create or start the container.
#
# ENTRY is the container's (and setup's) program, POSIX sh, run as
#   sh -c "$ENTRY" sterna-entry MODE_FILE STEP_FILE N SETUP_1 .. SETUP_N ARGV...
# MODE_FILE says what this start does (setup or train), STEP_FILE is where it says
# how far it got. Nothing is evaluated but each setup command (by bash -c, or sh -c
# where the image has no bash); argv runs as given. As a container's PID 1 it would
# ignore a SIGTERM it has no handler for, so it forwards SIGTERM and SIGINT to the
# command it runs (the preemption notice reaches the trainer) and exits with its status.
ENTRY='mode_file=$1 step_file=$2 n=$3
shift 3
child="" term=""
forward() { term=1; [ -z "$child" ] || kill -TERM "$child" 2>/dev/null; }
trap forward TERM INT
run() {
  "$@" &
  child=$!
  [ -z "$term" ] || kill -TERM "$child" 2>/dev/null
  while :; do
    wait "$child"; rc=$?
    kill -0 "$child" 2>/dev/null || break
  done
  child=""
  return "$rc"
}
read -r mode < "$mode_file" || { echo "sterna-entry: cannot read $mode_file" >&2; exit 125; }
if [ "$mode" = setup ]; then
  i=0
  while [ "$i" -lt "$n" ]; do
    i=$((i + 1))
    [ -z "$term" ] || exit 143
    printf "%s/%s\n" "$i" "$n" > "$step_file"
    if command -v bash >/dev/null 2>&1; then run bash -c "$1"; else run sh -c "$1"; fi
    rc=$?
    [ "$rc" -eq 0 ] || exit "$rc"
    shift
  done
  exit 0
fi
shift "$n"
printf "train\n" > "$step_file"
run "$@"
exit "$?"'
CTR=() CONTAINER=""
ENTRY_MODE="$STATE/entry-mode" ENTRY_STEP="$STATE/entry-step"

container_failed() { # container_failed CODE MESSAGE
  log "$2"
  setup_failed "$1"
}

setup_failed() { # setup_failed CODE -> the container gone, the watcher ended, the whole log shipped, then the run told
  remove_container
  if [ -n "${WATCHER:-}" ]; then
    pkill -KILL -P "$WATCHER" 2>/dev/null
    kill -KILL "$WATCHER" 2>/dev/null
    wait "$WATCHER" 2>/dev/null
    WATCHER=""
  fi
  stop_log_shipper
  publish_last_line
  publish phase failed; publish exit "$1"; exit "$1"
}

stop_command() { # stop_command PID -> SIGTERM to what runs setup or the command
  # In a container, the runtime signals it: PID is `start --attach`, which forwards the
  # signals it gets, and it gets the VM's own SIGTERM too (every process on a VM does). A
  # second forward after the container exited makes the OCI runtime print "container not
  # running" on the command's stderr, in the middle of the trainer's log; errors of this
  # call stay out of it.
  if [ -n "$CONTAINER" ]; then "${CTR[@]}" kill --signal TERM "$CONTAINER" >/dev/null 2>&1 || true
  else kill -TERM "$1" 2>/dev/null; fi
}

remove_container() {
  [ -n "$CONTAINER" ] || return 0
  "${CTR[@]}" rm -f "$CONTAINER" >/dev/null 2>&1 || log "could not remove container $CONTAINER"
  CONTAINER=""
}

container_runtime() { # -> CTR: docker when its daemon answers, else podman; fails when neither
  local t
  command -v docker >/dev/null 2>&1 || { command -v podman >/dev/null 2>&1 && CTR=(podman); return; }
  # A VM with docker alone (a Deep Learning VM image) may run this script while its daemon
  # is still starting: wait for it (2 minutes at most). Beside podman, docker without a
  # daemon is only a client: use podman at once.
  for ((t = 0; t < 120; t++)); do
    if timeout 30 docker info >/dev/null 2>&1; then CTR=(docker); return 0; fi
    if command -v podman >/dev/null 2>&1; then CTR=(podman); return 0; fi
    [ "$t" != 0 ] || log "waiting for the docker daemon"
    sleep 1
  done
  return 1
}

log_tail_of() { # log_tail_of FILE -> its last lines into the log
  local line
  while IFS= read -r line; do log "  $line"; done < <(tail -n 8 -- "$1" 2>/dev/null)
}

# An image may run as a user other than root (USER in its Dockerfile), who could not write
# the work directory the agent (root) made: the workdir unpacked there, .deps a setup
# installs into, checkpoints/, STERNA_PROGRESS_FILE. So the work directory is shared with
# the container through a group, as Kubernetes shares a volume with a pod's fsGroup: the
# tree gets group SHARE_GID with group write, its directories setgid (what is made in them
# later stays in the group), and the container's user gets the group (--group-add). The
# agent's own state (.sterna: the log spool, the env file) stays root's; of it, the
# command writes only the progress file and the entry's step file, made beforehand and
# shared alone, and reads the resume checkpoint. Nothing changes for an image run as root.
SHARE_GID=2000
CTR_SHARE=()
share_work_dir() { # share_work_dir IMAGE -> CTR_SHARE: the container's extra group, when IMAGE's user is not root
  local user
  user="$("${CTR[@]}" image inspect --format '{{.Config.User}}' "$1" 2>/dev/null)" || user=""
  case "$user" in '' | root | 0 | root:* | 0:*) return 0 ;; esac
  : > "$STATE/progress" && : > "$ENTRY_STEP" \
    && find "$WORK" -path "$STATE" -prune -o -exec chgrp -h -- "$SHARE_GID" {} + \
    && find "$WORK" -path "$STATE" -prune -o -type d -exec chmod -- g+rwxs {} + -o -type f -exec chmod -- g+rw {} + \
    && chgrp -- "$SHARE_GID" "$STATE/progress" "$ENTRY_STEP" ${RESUME_FROM:+"$RESUME_FROM"} \
    && chmod -- g+rw "$STATE/progress" "$ENTRY_STEP" \
    && { [ -z "$RESUME_FROM" ] || chmod -- g+r "$RESUME_FROM"; } \
    || container_failed 74 "the image $1 runs as user $user, and the work directory $WORK could not be shared with it (group $SHARE_GID)"
  CTR_SHARE=(--group-add "$SHARE_GID")
  log "the image runs as user $user: the work directory is shared with it through group $SHARE_GID"
}

prepare_container() { # prepare_container IMAGE DIR -> CONTAINER, created from IMAGE (pulled if missing), DIR its cwd
  local image="$1" dir="$2" out="$STATE/container.out" envfile="$STATE/container.env" kv name args
  # Malformed inputs, as refuse_input says (65), but with the preemption watcher already running.
  case "$image" in -* | *[[:space:]]*) container_failed 65 "malformed input: sterna-image is not an image reference" ;; esac
  case "$WORK$dir" in *:* | *,*) container_failed 74 "the work directory $WORK (or $dir) has a ':' or ',', which a container mount cannot name; set STERNA_WORK_DIR to a plain path" ;; esac
  container_runtime || container_failed 73 "the run gives the image $image, and this VM has no container runtime: neither docker (with its daemon running) nor podman; use a VM image with one (GCE's Deep Learning VM images have docker) or leave image out"
  publish phase pulling
  if ! "${CTR[@]}" image inspect "$image" >/dev/null 2>&1; then
    log "pulling $image with ${CTR[0]}"
    if ! "${CTR[@]}" pull "$image" > "$out" 2>&1; then
      log_tail_of "$out"
      container_failed 72 "the image $image could not be pulled (${CTR[0]} pull, above): it does not exist, or this VM may not read it; check the reference and that the VM's service account can read the registry"
    fi
  fi
  share_work_dir "$image"
  # Ordinary variables go in a file only root can read (no value on a command line),
  # deleted once the container holds them; a value on two lines would forge a variable.
  for kv in "${TRAINER_ENV[@]}"; do
    case "$kv" in *$'\n'* | *$'\r'*) container_failed 65 "malformed input: an env value spans lines, which no env file can carry" ;; esac
  done
  (umask 077 && printf '%s\n' "${TRAINER_ENV[@]}" > "$envfile") || container_failed 74 "could not write $envfile"
  args=(create --env-file "$envfile" --label "sterna.run-id=$RUN_ID" --label "sterna.attempt=$ATTEMPT"
    --network host --ipc host --pids-limit -1 --stop-timeout 30
    --volume "$WORK:$WORK" --workdir "$dir" --entrypoint /bin/sh ${CTR_SHARE[@]+"${CTR_SHARE[@]}"})
  case "$dir/" in "$WORK"/*) ;; *) args+=(--volume "$dir:$dir") ;; esac
  # The VM's GPUs: docker's NVIDIA runtime (--gpus), podman's CDI devices (nvidia-ctk cdi generate).
  if compgen -G '/dev/nvidia[0-9]*' >/dev/null; then
    case "${CTR[0]}" in docker) args+=(--gpus all) ;; *) args+=(--device nvidia.com/gpu=all) ;; esac
  fi
  # Secrets reach the container by name only: the runtime reads each value from its own
  # environment (exported in this subshell alone), never from a file or a command line.
  for name in "${!SECRETS[@]}"; do args+=(--env "$name"); done
  CONTAINER="$(
    for name in "${!SECRETS[@]}"; do export "$name=${SECRETS[$name]}"; done
    exec "${CTR[@]}" "${args[@]}" "$image" -c "$ENTRY" sterna-entry "$ENTRY_MODE" "$ENTRY_STEP" "${#SETUP[@]}" ${SETUP[@]+"${SETUP[@]}"} "${ARGV[@]}" 2> "$out"
  )"
  local status=$?
  rm -f -- "$envfile"
  CONTAINER="${CONTAINER##*$'\n'}"
  if [ "$status" != 0 ] || [[ ! "$CONTAINER" =~ ^[0-9a-f]{12,64}$ ]]; then
    CONTAINER=""
    log_tail_of "$out"
    container_failed 74 "${CTR[0]} could not create a container of $image (above)"
  fi
  log "container ${CONTAINER:0:12} of $image (${CTR[0]}): setup and the command run in it"
}

start_in_entry() { # start_in_entry MODE -> exec: the container's next start, or setup on the VM (mode setup)
  printf '%s\n' "$1" > "$ENTRY_MODE" || exit 125
  if [ -n "$CONTAINER" ]; then exec "${CTR[@]}" start --attach "$CONTAINER"; fi
  for name in "${!SECRETS[@]}"; do export "$name=${SECRETS[$name]}"; done
  cd "${CODE_DIR:-$WORK}" || exit 125
  exec env -- "${TRAINER_ENV[@]}" sh -c "$ENTRY" sterna-entry "$ENTRY_MODE" "$ENTRY_STEP" "${#SETUP[@]}" "${SETUP[@]}"
}

run_setup() { # the setup commands, once; ends the agent (71) when one fails
  local out=1 err=2 pid code step="" shown="" stopped=0 annotators=() a t
  publish phase setup
  log "setup: ${#SETUP[@]} command(s)${CONTAINER:+ in the container}"
  # Emptied, not removed: a container run as another user may write the file, not make it.
  : > "$ENTRY_STEP"
  if [ -n "$LOG_SPOOL" ]; then
    rm -f -- "$STATE/setup-out.fifo" "$STATE/setup-err.fifo"
    if mkfifo -- "$STATE/setup-out.fifo" "$STATE/setup-err.fifo"; then
      annotate setup-out < "$STATE/setup-out.fifo" &
      annotators+=($!)
      annotate setup-err < "$STATE/setup-err.fifo" >&2 &
      annotators+=($!)
      exec {out}>"$STATE/setup-out.fifo" {err}>"$STATE/setup-err.fifo"
    fi
  fi
  (if [ "$out" != 1 ]; then exec 1>&"$out" 2>&"$err" {out}>&- {err}>&-; fi; start_in_entry setup) &
  pid=$!
  [ "$out" = 1 ] || exec {out}>&- {err}>&-
  trap 'stopped=1; log "SIGTERM (a preemption notice, a stop or a deletion) during setup: stopping it"; stop_command "$pid"' TERM INT
  while kill -0 "$pid" 2>/dev/null; do
    step="$(cat -- "$ENTRY_STEP" 2>/dev/null)"
    if [[ "$step" =~ ^[0-9]+/[0-9]+$ ]] && [ "$step" != "$shown" ]; then shown="$step"; publish setup-step "$step"; fi
    [ "$stopped" = 1 ] || publish_last_line
    sleep "$POLL" &
    wait $! 2>/dev/null
  done
  wait "$pid"
  code=$?
  while kill -0 "$pid" 2>/dev/null; do wait "$pid"; code=$?; done
  trap - TERM INT
  for a in ${annotators[@]+"${annotators[@]}"}; do
    for ((t = 0; t < 50; t++)); do kill -0 "$a" 2>/dev/null || break; sleep 0.1; done
  done
  step="$(cat -- "$ENTRY_STEP" 2>/dev/null)"
  [ "$step" = "$shown" ] || ! [[ "$step" =~ ^[0-9]+/[0-9]+$ ]] || publish setup-step "$step"
  if [ "$stopped" = 1 ]; then
    # As a stop during staging: no exit is published; the run hears of the VM's end.
    log "stopped by SIGTERM during setup (command $step, exit $code)"
    remove_container
    exit 143
  fi
  [ "$code" = 0 ] && { log "setup done"; return 0; }
  if [ -n "$CONTAINER" ] && ! [[ "$step" =~ ^[0-9]+/[0-9]+$ ]]; then
    container_failed 74 "${CTR[0]} could not start the container for setup (exit $code)"
  fi
  log "setup command ${step:-?} failed with exit code $code: ${SETUP[$((${step%%/*} - 1))]:-?}"
  publish setup-exit "$code"
  setup_failed 71
}

container_ended() { # container_ended CODE -> the container removed; one that never started fails the attempt (74)
  if [ "$1" != 0 ] && [ "$stopping" = 0 ] && [ "$(cat -- "$ENTRY_STEP" 2>/dev/null)" != train ]; then
    container_failed 74 "${CTR[0]} could not start the container for the command (exit $1)"
  fi
  remove_container
}

decode_list sterna-setup || refuse_input sterna-setup
SETUP=(${LIST[@]+"${LIST[@]}"})
# What the trainer (and setup) is given, on the VM or in the container: env sets exactly
# these, after the spec's env, so a STERNA_* name is always Sterna's.
TRAINER_ENV=(PYTHONUNBUFFERED=1 ${ENVS[@]+"${ENVS[@]}"}
  STERNA_RUN_ID="$RUN_ID" STERNA_ATTEMPT="$ATTEMPT" STERNA_CHECKPOINT_DIR="$CKPT_DIR"
  STERNA_RESUME_FROM="$RESUME_FROM" STERNA_PROGRESS_FILE="$STATE/progress"
  ${GANG_ENV[@]+"${GANG_ENV[@]}"}
  STERNA_CHECKPOINT_INTERVAL_FILE="$INTERVAL_FILE")
IMAGE="$(attr sterna-image)"
[ -z "$IMAGE" ] || prepare_container "$IMAGE" "${CODE_DIR:-$WORK}"
[ ${#SETUP[@]} -eq 0 ] || run_setup

publish phase training
cd "$WORK" || exit 70
# env sets exactly these variables (every entry is NAME=value, checked above), and would
# read every leading NAME=VALUE word as one more assignment, so argv never reaches it:
# env runs `nice -n 0 --` (which changes nothing), and nice execs argv verbatim, after
# `--`, so no item is read as an option or an assignment (command ["X=1"] is a program
# named X=1, not found: exit 127). No shell sees argv or env, so no value is evaluated.
# Secrets are exported in the subshell that execs env, never put on any command line.
# The trainer's stdout and stderr go through `annotate` (the log above) when it is
# shipped; PYTHONUNBUFFERED=1 (unless the spec sets it) so that a Python trainer's lines
# reach it as they are printed, not when a buffer fills or never (a SIGKILL at the end of
# a notice drops what Python still buffers).
exec {TRAINER_OUT}>&1 {TRAINER_ERR}>&2
ANNOTATORS=()
if [ -n "$LOG_SPOOL" ]; then
  rm -f -- "$STATE/stdout.fifo" "$STATE/stderr.fifo"
  if mkfifo -- "$STATE/stdout.fifo" "$STATE/stderr.fifo"; then
    annotate out < "$STATE/stdout.fifo" &
    ANNOTATORS+=($!)
    annotate err < "$STATE/stderr.fifo" >&2 &
    ANNOTATORS+=($!)
    exec {TRAINER_OUT}>&- {TRAINER_ERR}>&-
    exec {TRAINER_OUT}>"$STATE/stdout.fifo" {TRAINER_ERR}>"$STATE/stderr.fifo"
  else
    log "could not make the log's pipes: the trainer's output is not in the log"
  fi
fi
(
  exec 1>&"$TRAINER_OUT" 2>&"$TRAINER_ERR" {TRAINER_OUT}>&- {TRAINER_ERR}>&-
  # In the container (its second start: setup was the first), which holds the environment.
  [ -z "$CONTAINER" ] || start_in_entry train
  for name in "${!SECRETS[@]}"; do export "$name=${SECRETS[$name]}"; done
  exec env -- "${TRAINER_ENV[@]}" nice -n 0 -- "${ARGV[@]}"
) &
TRAINER=$!
# Only the trainer holds the pipes now: the annotators read until it (and whatever it
# started) has closed them.
exec {TRAINER_OUT}>&- {TRAINER_ERR}>&-
stopping=0
trap 'stopping=1; log "SIGTERM (a preemption notice, a stop or a deletion): stopping the trainer"; stop_command "$TRAINER"' TERM INT

# Before a flex-start VM's cut the run asks for a final checkpoint through the sterna-move
# attribute (workflows/run/flex-cut.ts): the trainer is stopped as a preemption notice
# stops it, and `moving` tells the run that this exit is the move, not the trainer's end.
moving=0
move_asked() {
  [ "${STERNA_PUBLISH_MODE:-gce}" = gce ] || return 1
  [ "$(curl -sf -m 2 -H 'Metadata-Flavor: Google' "$MD/instance/attributes/sterna-move" 2>/dev/null)" = TRUE ]
}

while kill -0 "$TRAINER" 2>/dev/null; do
  [ "${STERNA_PUBLISH_MODE:-gce}" = gce ] && set_interval "$(attr sterna-checkpoint-interval)"
  publish_progress
  publish_gpu
  # Once stopping, the notice period is the final checkpoint's and the log's: the last line waits for the final ship below.
  [ "$stopping" = 1 ] || publish_last_line
  upload_new_checkpoints
  if [ "$moving" = 0 ] && [ "$stopping" = 0 ] && move_asked; then
    moving=1
    log "the run asked for a final checkpoint before the flex-start cut: stopping the trainer"
    publish moving TRUE
    stop_command "$TRAINER"
  fi
  sleep "$POLL" &
  wait $! 2>/dev/null
done
wait "$TRAINER"
code=$?
# A trap can interrupt the first wait; the trainer's status is final only once it is gone.
while kill -0 "$TRAINER" 2>/dev/null; do wait "$TRAINER"; code=$?; done
# Its last lines: the annotators end when its pipes close (a process it left behind that
# still holds them gets 5 s more).
for pid in ${ANNOTATORS[@]+"${ANNOTATORS[@]}"}; do
  for ((t = 0; t < 50; t++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
done
[ -z "$CONTAINER" ] || container_ended "$code"

if [ -n "${WATCHER:-}" ]; then
  # It ignores SIGTERM (above), and its curl may hang for minutes: end both for good.
  pkill -KILL -P "$WATCHER" 2>/dev/null
  kill -KILL "$WATCHER" 2>/dev/null
  wait "$WATCHER" 2>/dev/null
  # A trainer that exits at once on the notice's SIGTERM can end the loop before the
  # watcher published the notice: ask once more, so a preemption never reads as an exit.
  [ "$(curl -sf -m 2 -H 'Metadata-Flavor: Google' "$MD/instance/preempted" 2>/dev/null)" = TRUE ] && publish preempted TRUE
fi
publish phase uploading
publish_progress
upload_new_checkpoints
[ "$stopping" = 1 ] && log "stopped by SIGTERM; trainer exited $code"
[ "$stopping" = 1 ] || log "the trainer exited $code"
# The whole log is in the bucket before the run hears of the exit (and releases the VM).
stop_log_shipper
publish_last_line
publish exit "$code"
publish phase exited

# On a VM, the run's release deletes it. If no release comes (the run's workflow is
# gone), power off after a grace period so the VM stops paying; a release or stop
# meanwhile (SIGTERM) simply ends the agent. In a pod, the agent's exit ends the pod.
grace="$(attr sterna-poweroff-after-seconds)"
if [ "${STERNA_PUBLISH_MODE:-gce}" = gce ] && [ "$stopping" = 0 ] && [[ "$grace" =~ ^[0-9]+$ ]]; then
  trap 'exit 0' TERM INT
  sleep "$grace" &
  wait $!
  log "no release came within $grace s of the trainer's exit: powering the VM off"
  poweroff || shutdown -h now
fi
exit 0
