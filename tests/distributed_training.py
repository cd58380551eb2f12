"""A real MirroredStrategy run over 2 logical CPUs with HealthCallback, and its single-device
reference on the same data and initial weights (for tests: logical devices must be set
before TensorFlow starts, so this runs in its own process).

Usage: python tests/distributed_training.py LOG_DIR [clean|nan_on_replica_1]
(with TF_USE_LEGACY_KERAS=1 in the environment: on tf_keras)
Prints, as its last line, JSON: the reference's per-step global gradient norm and loss.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(_cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":  # the same run on tf_keras (tests/test_tf_keras.py)
    import tf_keras as keras
else:
    import keras
import numpy as np
from reference_steps import reference_steps

from tb_trainhealth import HealthCallback

BATCH, STEPS = 16, 6


def model() -> keras.Model:
    return keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(8), keras.layers.Dense(3)]
    )


def data(nan_on_replica_1: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(BATCH * STEPS, 4)).astype("float32")
    y = rng.integers(0, 3, BATCH * STEPS).astype("int32")
    if nan_on_replica_1:
        x[BATCH * 2 + BATCH // 2 + 1, 0] = np.nan  # step 3; each replica gets half of a batch, in order
    return x, y


def reference(weights: list, x: np.ndarray, y: np.ndarray) -> dict[str, list[float]]:
    """The same steps on one device, computed by hand."""
    net = model()
    net.set_weights(weights)
    optimizer = keras.optimizers.SGD(0.1)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    batches = ((x[step * BATCH : (step + 1) * BATCH], y[step * BATCH : (step + 1) * BATCH]) for step in range(STEPS))
    return reference_steps(net, optimizer, loss_fn, batches)


def main(log_dir: str, mode: str = "clean") -> None:
    keras.utils.set_random_seed(0)
    x, y = data(mode == "nan_on_replica_1")
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        net = model()
        net.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    weights = net.get_weights()
    net.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[HealthCallback(log_dir)])
    print(json.dumps(reference(weights, x, y)))


if __name__ == "__main__":
    main(*sys.argv[1:])
