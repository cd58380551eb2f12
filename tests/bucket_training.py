"""A short real training run into a bucket: `python bucket_training.py LOG_DIR [nan]`.

The emulator's address comes from the environment (tests/bucket_emulators.py). `nan`: the
inputs of one batch are NaN, so the run has a critical finding to read back from the bucket.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

from tb_trainhealth import HealthCallback


def main(log_dir: str, mode: str = "clean") -> None:
    keras.utils.set_random_seed(0)
    x = np.random.rand(256, 8).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    if mode == "nan":
        x[200:208] = np.nan
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    model.fit(x, y, batch_size=32, epochs=4, verbose=0, callbacks=[HealthCallback(log_dir=log_dir, verbose=False)])


if __name__ == "__main__":
    main(*sys.argv[1:3])
