"""A small tf_keras (legacy Keras 2) training run with HealthCallback, for tests: the Keras is
chosen by `TF_USE_LEGACY_KERAS=1` before TensorFlow starts, so this runs in its own process.

Usage: python tests/tf_keras_training.py LOG_DIR [clean|nan|unbuilt|unbuilt_dict]
  clean: `model.fit(..., callbacks=[HealthCallback(..., preflight=True)])` on a tf.data
         pipeline, then `tb_trainhealth.preflight` (Keras 3 only: its error is printed);
  nan:   `tb_trainhealth.fit` on arrays holding one NaN input (row NAN_ROW, step NAN_STEP);
  unbuilt: clean, on a Sequential given no input shape (no variables before the first step);
  unbuilt_dict: the same on a subclassed model of a dict of two inputs.
Prints, as its last line, JSON: the single-device reference's per-step gradient norm and loss
(clean; empty for nan).
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np
import tensorflow as tf
from reference_steps import reference_steps

import tb_trainhealth
from tb_trainhealth import HealthCallback

keras = tf.keras
BATCH, STEPS, NAN_STEP = 16, 8, 3
NAN_ROW = BATCH * (NAN_STEP - 1) + 5


def model(input_shape: bool = True) -> keras.Model:
    """Without `input_shape` tf_keras builds the model only inside its first step."""
    layers = [keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3, activation="softmax")]
    return keras.Sequential([keras.Input((6,)), *layers] if input_shape else layers)


class TwoInputs(keras.Model):
    """A subclassed model of a dict of two inputs: tf_keras builds it only inside its first step."""

    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.out = keras.layers.Dense(3, activation="softmax")

    def call(self, inputs):
        return self.out(self.hidden(tf.concat([inputs["a"], inputs["b"]], axis=-1)))


def data(nan: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH * STEPS, 6)).astype("float32")
    y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 1).astype("int32")
    if nan:
        x[NAN_ROW, 2] = np.nan
    return x, y


def reference(weights: list, x: np.ndarray, y: np.ndarray) -> dict[str, list[float]]:
    """The same steps, computed by hand."""
    net = model()
    net.set_weights(weights)
    optimizer = keras.optimizers.SGD(0.1)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    batches = ((x[step * BATCH : (step + 1) * BATCH], y[step * BATCH : (step + 1) * BATCH]) for step in range(STEPS))
    return reference_steps(net, optimizer, loss_fn, batches)


def main(log_dir: str, mode: str = "clean") -> None:
    keras.utils.set_random_seed(0)
    x, y = data(mode == "nan")
    net = model(input_shape=mode != "unbuilt")
    net.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy())
    if mode == "unbuilt_dict":
        two = TwoInputs()
        two.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy())
        inputs = {"a": x[:, :3], "b": x[:, 3:]}
        two.fit(inputs, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[HealthCallback(log_dir)])
        print(json.dumps({"steps": STEPS}))
        return
    if mode == "unbuilt":
        net.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[HealthCallback(log_dir)])
        print(json.dumps({"steps": STEPS}))
        return
    weights = net.get_weights()
    if mode == "nan":
        tb_trainhealth.fit(net, x, y, log_dir=log_dir, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
        result: dict = {}
    else:
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).prefetch(tf.data.AUTOTUNE)
        # preflight=True: not available on tf_keras, said once, the rest goes on
        net.fit(dataset, epochs=1, verbose=0, callbacks=[HealthCallback(log_dir, verbose=False, preflight=True)])
        result = reference(weights, x, y)
        try:
            tb_trainhealth.preflight(net, x, y)
        except TypeError as err:
            result["preflight_error"] = str(err)
    print(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:])
