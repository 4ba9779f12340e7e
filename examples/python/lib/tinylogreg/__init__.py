"""tinylogreg: logistic regression in plain Python, the example's one requirement.

It stands for whatever your script imports from PyPI or a private index: the example's
setup builds its wheel (lib/build_wheel.py) and pip installs it from that wheel, with no
network (requirements.txt). Every function is a pure function of its arguments, so a
training loop that checkpoints its weights and resumes from them ends with exactly the
weights of one that was never interrupted.
"""
import math
import random

__version__ = "0.1.0"


def dataset(seed=7, rows=512, features=4):
    """Two Gaussian clouds, one per label, as (xs, ys): the same seed gives the same rows."""
    rng = random.Random(seed)
    xs, ys = [], []
    for i in range(rows):
        label = i % 2
        shift = 1.0 if label else -1.0
        xs.append([rng.gauss(0.0, 1.0) + shift * (0.3 + 0.1 * j) for j in range(features)])
        ys.append(label)
    return xs, ys


def step(weights, bias, xs, ys, lr):
    """One full-batch gradient-descent step on the mean logistic loss: (weights, bias, loss)."""
    grad_w = [0.0] * len(weights)
    grad_b = 0.0
    loss = 0.0
    for x, y in zip(xs, ys):
        z = bias + sum(w * v for w, v in zip(weights, x))
        p = 1.0 / (1.0 + math.exp(-z))
        err = p - y
        for j, v in enumerate(x):
            grad_w[j] += err * v
        grad_b += err
        loss -= y * math.log(p + 1e-12) + (1 - y) * math.log(1 - p + 1e-12)
    n = len(xs)
    return [w - lr * g / n for w, g in zip(weights, grad_w)], bias - lr * grad_b / n, loss / n
