"""A slow training run for live-reading tests: `python live_training.py LOG_DIR GO_FILE`.

Trains a tiny model for minutes, half a second per epoch; once GO_FILE exists, the first
layer's kernel turns NaN (as after a bad update), so a new finding appears mid-run.
"""

import os
import sys
import time

import keras
import numpy as np

from tb_trainhealth import HealthCallback


class NanOnSignal(keras.callbacks.Callback):
    def __init__(self, go: str):
        super().__init__()
        self.go = go

    def on_epoch_end(self, epoch, logs=None):
        time.sleep(0.5)
        kernel = self.model.layers[0].kernel
        if os.path.exists(self.go) and np.isfinite(kernel.numpy()).all():
            kernel.assign(np.full(kernel.shape, np.nan, "float32"))


def main(log_dir: str, go: str) -> None:
    keras.utils.set_random_seed(0)
    x = np.random.rand(256, 8).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    model.fit(x, y, batch_size=32, epochs=400, verbose=0, callbacks=[HealthCallback(log_dir=log_dir), NanOnSignal(go)])


if __name__ == "__main__":
    main(*sys.argv[1:3])
