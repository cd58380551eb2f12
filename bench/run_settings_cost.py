"""Cost of recording the run settings (`callback/run_settings.py`) once per fit, next to the
time of one training epoch: an MNIST-sized array fit (60,000 x 784 float32, a 3-layer MLP)
and a small CNN on 28x28x1 images.

`run_settings` is timed where HealthCallback calls it, in `on_train_begin` of a real `fit`
(it reads fit's data from fit's frame), `--repeats` times, median kept; the epoch is the second
one (the first also traces the step). Random data of MNIST's shape: the cost does not depend
on the values. Usage: python bench/run_settings_cost.py [--repeats 5] [--cnn-samples 20000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras
import numpy as np
from overhead import small_cnn

from tb_trainhealth.callback.fit_context import fit_callbacks
from tb_trainhealth.callback.frameworks.keras_private import fit_data_adapter
from tb_trainhealth.callback.frameworks.which_keras import steps_per_execution
from tb_trainhealth.callback.run_settings import run_settings

MNIST_SAMPLES, MNIST_FEATURES, CLASSES = 60_000, 784, 10
MLP_BATCH, CNN_BATCH = 128, 64
EPOCHS = 2  # the second one is timed


class SettingsTimer(keras.callbacks.Callback):
    """Times `run_settings` as HealthCallback calls it, and each epoch."""

    def __init__(self, repeats: int):
        super().__init__()
        self.repeats = repeats
        self.settings_seconds: list[float] = []
        self.epoch_seconds: list[float] = []
        self.settings_count = 0
        self._epoch_start = 0.0

    def on_train_begin(self, logs=None):
        adapter, callbacks = fit_data_adapter(), [c for c in fit_callbacks() if c is not self]
        for _ in range(self.repeats):
            start = time.perf_counter()
            settings = run_settings(self.model, self.params, callbacks, adapter, steps_per_execution(self.model))
            self.settings_seconds.append(time.perf_counter() - start)
        self.settings_count = len(settings.settings)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_seconds.append(time.perf_counter() - self._epoch_start)


def mlp() -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((MNIST_FEATURES,)),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(CLASSES),
        ]
    )


def measure(name: str, model: keras.Model, x: np.ndarray, batch: int, repeats: int) -> None:
    y = np.random.default_rng(1).integers(0, CLASSES, len(x)).astype("int32")
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    timer = SettingsTimer(repeats)
    model.fit(x, y, batch_size=batch, epochs=EPOCHS, verbose=0, callbacks=[timer])
    settings_ms, epoch_ms = np.median(timer.settings_seconds) * 1000, timer.epoch_seconds[-1] * 1000
    print(
        f"{name}: run settings: {settings_ms:.0f} ms per fit = {settings_ms / epoch_ms:.1%} of one epoch "
        f"({epoch_ms / 1000:.1f} s; {timer.settings_count} settings; {x.shape[0]:,} x {x.shape[1:]} {x.dtype})"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cnn-samples", type=int, default=20_000)
    args = parser.parse_args()
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x_mnist = rng.random((MNIST_SAMPLES, MNIST_FEATURES), dtype=np.float32)
    measure("MNIST-sized MLP", mlp(), x_mnist, MLP_BATCH, args.repeats)
    x_images = rng.random((args.cnn_samples, 28, 28, 1), dtype=np.float32)
    measure("small CNN", small_cnn(), x_images, CNN_BATCH, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
