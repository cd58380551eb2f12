"""Healthy runs of kinds the demo does not cover must stay quiet: a false alarm costs as much
as a miss. Each is a common, correct way to build and train a small model."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import alarms, diagnose_logdir

from tb_trainhealth import HealthCallback

rng = np.random.default_rng(3)
N = 768


def sequences():
    """Token sequences whose class is whether token 7 occurs: Embedding + LSTM / Conv1D."""
    tokens = rng.integers(1, 50, size=(N, 20)).astype("int32")
    labels = (tokens == 7).any(axis=1).astype("int32")
    return tokens, labels


def images():
    """uint8 images, bright quadrant = class: scaled inside the model."""
    labels = rng.integers(0, 4, N).astype("int32")
    pixels = rng.integers(0, 80, size=(N, 16, 16, 3))
    for index, label in enumerate(labels):
        row, col = divmod(int(label), 2)
        pixels[index, row * 8 : row * 8 + 8, col * 8 : col * 8 + 8] += 150
    return pixels.astype("float32"), labels


def tabular():
    x = rng.normal(size=(N, 12)).astype("float32") * np.array([1, 10, 100, 1000] * 3, "float32")
    y = (x[:, 0] + x[:, 1] / 10 - x[:, 2] / 100 + 0.1 * rng.normal(size=N)).astype("float32")
    return x, y


def lstm():
    return keras.Sequential(
        [
            keras.Input((20,), dtype="int32"),
            keras.layers.Embedding(50, 16),
            keras.layers.LSTM(16),
            keras.layers.Dense(2),
        ]
    )


def conv1d():
    return keras.Sequential(
        [
            keras.Input((20,), dtype="int32"),
            keras.layers.Embedding(50, 16),
            keras.layers.Conv1D(32, 3, activation="relu"),
            keras.layers.GlobalMaxPooling1D(),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(2),
        ]
    )


def cnn_scaled_inside():
    inputs = keras.Input((16, 16, 3))
    x = inputs / 255.0
    x = keras.layers.Conv2D(16, 3, activation="relu")(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    return keras.Model(inputs, keras.layers.Dense(4)(x))


def transfer():
    """A small 'backbone' sub-model, then a head: the usual fine-tuning shape."""
    backbone = keras.Sequential(
        [
            keras.Input((16, 16, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
        ],
        name="backbone",
    )
    return keras.Sequential([keras.Input((16, 16, 3)), backbone, keras.layers.Dense(4)])


def normalized_regression(x):
    norm = keras.layers.Normalization()
    norm.adapt(x)
    return keras.Sequential(
        [keras.Input((12,)), norm, keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)]
    )


SPARSE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
CASES = {
    "embedding + LSTM": (lstm, SPARSE, sequences, dict(epochs=30)),
    "embedding + Conv1D + dropout 0.5": (conv1d, SPARSE, sequences, dict(epochs=25)),
    "CNN with x / 255 and BatchNorm inside": (cnn_scaled_inside, SPARSE, images, dict(epochs=4)),
    "pretrained-style backbone sub-model": (transfer, SPARSE, images, dict(epochs=6)),
    "features of mixed scales through Normalization": (None, "mse", tabular, dict(epochs=30)),
    "tf.data pipeline, AdamW, cosine decay": (cnn_scaled_inside, SPARSE, images, dict(epochs=4, pipeline=True)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_healthy_run_gets_no_warning(tmp_path, case):
    build, loss, make_data, options = CASES[case]
    keras.utils.set_random_seed(0)
    x, y = make_data()
    model = build() if build is not None else normalized_regression(x)
    optimizer = keras.optimizers.Adam(2e-3)
    if options.get("pipeline"):
        schedule = keras.optimizers.schedules.CosineDecay(2e-3, decay_steps=100)
        optimizer = keras.optimizers.AdamW(schedule, weight_decay=1e-4)
    model.compile(optimizer, loss)
    callback = HealthCallback(str(tmp_path / "run"), verbose=False)
    if options.get("pipeline"):
        data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N).batch(32).prefetch(tf.data.AUTOTUNE)
        model.fit(data, epochs=options["epochs"], verbose=0, callbacks=[callback])
    else:
        model.fit(x, y, batch_size=32, epochs=options["epochs"], validation_split=0.2, verbose=0, callbacks=[callback])
    assert alarms(diagnose_logdir(str(tmp_path))["run"]) == []
