"""Training runs that stop moving, for tests: `python tests/stall_training.py LOG_DIR MODE`.

MODE "hang": the dataset's generator blocks forever after HANG_AFTER batches (as a read from
a dead server would); the process hangs until the test kills it.
MODE "steady": a long, healthy run (many short epochs) that the test kills with SIGKILL.
Prints "STARTED" once training has begun.
"""

from __future__ import annotations

import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

from tb_trainhealth import HealthCallback

HANG_AFTER = 12
# Seconds: short for the hang (the test waits for it); long for the run that gets killed (a
# slow moment of a loaded machine must not read as a stall there).
STALL_AFTER = {"hang": 2.0, "steady": 30.0}
_NEVER = threading.Event()


def endless_batches():
    """Yields a few batches, then waits forever for the next (a read that never returns)."""
    rng = np.random.default_rng(0)
    for index in range(10**6):
        if index == HANG_AFTER:
            print("HANGING", flush=True)
            _NEVER.wait()
        x = rng.normal(size=(16, 4)).astype("float32")
        yield x, x.sum(axis=1, keepdims=True)


class SayStarted(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 1:
            print("STARTED", flush=True)


def main(log_dir: str, mode: str) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    health = HealthCallback(log_dir, stall_after=STALL_AFTER[mode], verbose=False)
    if mode == "hang":
        spec = (tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None, 1), tf.float32))
        data = tf.data.Dataset.from_generator(endless_batches, output_signature=spec)
        model.fit(data, epochs=1, verbose=0, callbacks=[health, SayStarted()])
    else:
        x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
        model.fit(
            x, x.sum(axis=1, keepdims=True), batch_size=32, epochs=10**5, verbose=0, callbacks=[health, SayStarted()]
        )
    print("FINISHED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
