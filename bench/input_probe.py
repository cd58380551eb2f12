"""Cost of the input-wait probe alone: Keras' own train function fed the tf.data iterator
(in-graph fetch) vs the same iterator through TimedBatches (host fetch, timed).

Blocks of 50 steps alternate between the two on one model and one pipeline, so machine
noise hits both alike; prints the median per-step time of each and the median of the
per-round ratios. Usage: python bench/input_probe.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import tensorflow as tf
from overhead import BATCH, small_cnn

from tb_trainhealth.callback.step.input_probe import TimedBatches

STEPS_PER_BLOCK = 50


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH * 100, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 10, BATCH * 100).astype("int32")
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH).prefetch(tf.data.AUTOTUNE)
    iterator = iter(dataset)
    model = small_cnn()
    model.make_train_function()
    train_function = model.train_function
    waits: list[float] = []
    feeds = {"in-graph fetch": lambda: iterator, "TimedBatches": lambda: TimedBatches(iterator, waits)}
    for feed in feeds.values():  # trace both paths before timing
        train_function(feed())
    per_step: dict[str, list[float]] = {name: [] for name in feeds}
    for _ in range(args.rounds):
        for name, feed in feeds.items():
            start = time.perf_counter()
            for _ in range(STEPS_PER_BLOCK):
                logs = train_function(feed())
            float(logs["loss"])  # wait for the last step
            per_step[name].append((time.perf_counter() - start) / STEPS_PER_BLOCK * 1000)
    ratios = np.array(per_step["TimedBatches"]) / np.array(per_step["in-graph fetch"])
    q25, q50, q75 = np.percentile(ratios, [25, 50, 75])
    print(f"small CNN, batch {BATCH}, {args.rounds} rounds x {STEPS_PER_BLOCK} steps per feed")
    for name, values in per_step.items():
        print(f"{name:16} {np.median(values):7.3f} ms/step")
    print(
        f"TimedBatches / in-graph: ratio {q50:.3f}x (IQR {q25:.3f}-{q75:.3f}); measured wait median "
        f"{np.median(waits):.3f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
