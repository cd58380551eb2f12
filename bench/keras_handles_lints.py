"""Does the installed Keras already handle a last-layer/loss mismatch the lint reports? (issue 44)

Trains each mismatch case and its twin (the same model with logits and from_logits=True) with
the same seed and data, and prints the largest difference between their per-epoch losses. A
difference of 0 means Keras computes the loss the right way despite the mismatch (it reads the
logits behind a softmax or sigmoid), so the lint must not call it a problem on this Keras.

Usage: python bench/keras_handles_lints.py [--eager] [--tf-keras]
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import warnings

import numpy as np

if "--tf-keras" in sys.argv:
    import tf_keras as keras
else:
    import keras


def train(activation: str | None, loss, y, units: int, eager: bool) -> np.ndarray:
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 8)).astype("float32")
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(units, activation=activation)]
    )
    model.compile(keras.optimizers.Adam(1e-2), loss, run_eagerly=eager)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = model.fit(x, y, epochs=5, batch_size=32, verbose=0, shuffle=False)
    return np.array(history.history["loss"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--eager", action="store_true", help="run_eagerly=True (no graph to read the logits from)")
    parser.add_argument("--tf-keras", action="store_true", help="legacy Keras 2 (tf_keras) instead of Keras 3")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(1)
    classes = rng.integers(0, 4, 512)
    binary = (rng.random(512) < 0.4).astype("float32")
    cases = {
        "softmax output, SparseCategoricalCrossentropy(from_logits=True)": (
            ("softmax", keras.losses.SparseCategoricalCrossentropy(from_logits=True), classes, 4),
            (None, keras.losses.SparseCategoricalCrossentropy(from_logits=True), classes, 4),
        ),
        "sigmoid output, BinaryCrossentropy(from_logits=True)": (
            ("sigmoid", keras.losses.BinaryCrossentropy(from_logits=True), binary, 1),
            (None, keras.losses.BinaryCrossentropy(from_logits=True), binary, 1),
        ),
        "softmax output, SparseCategoricalCrossentropy() (probabilities: the right way)": (
            ("softmax", keras.losses.SparseCategoricalCrossentropy(), classes, 4),
            (None, keras.losses.SparseCategoricalCrossentropy(from_logits=True), classes, 4),
        ),
    }
    print(f"Keras {keras.__version__}, run_eagerly={args.eager}")
    for name, (case, twin) in cases.items():
        a, b = train(*case, args.eager), train(*twin, args.eager)
        print(
            f"{name:80} max |loss - twin's loss| = {float(np.max(np.abs(a - b))):.3g}  (final {a[-1]:.4f} vs {b[-1]:.4f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
