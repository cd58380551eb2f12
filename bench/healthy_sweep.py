"""False-alarm benchmark: trains many HEALTHY runs with HealthCallback and counts warnings.

Every run here is one an experienced practitioner would leave alone: a sensible model for
the task, normalised inputs, a loss that fits the output layer, a reasonable learning rate,
and a budget long enough to converge (or EarlyStopping with restore_best_weights). The
tasks and models are this file's own (not demo/scenarios.py's), spread over model kinds
(MLP, CNN, GRU/LSTM/SimpleRNN, Embedding + pooling), losses (MSE, MAE, Huber, binary,
sparse and one-hot categorical cross-entropy, with and without from_logits), optimizers
(Adam, AdamW, Nadam, Adamax, Lion, SGD+momentum, RMSprop, Adagrad), learning-rate
schedules (cosine with warm-up, exponential and inverse-time decay, piecewise, a custom
warm-up, ReduceLROnPlateau), batch sizes 8-256, numpy arrays and tf.data pipelines, with
and without validation data. The target is 0 runs with a warning or critical.

For each run it prints the seconds taken, the start and final loss (the loss of the
untrained model, evaluated before fit, and the last epoch's), accuracy where there is
one, validation loss/accuracy, and a LEARNED / NOT LEARNED verdict (a run that does not
learn is a bug in this file's config, not a false alarm), then every warning or critical
finding with its detail. A run that fails to train is reported and the sweep goes on.

Usage:
    python bench/healthy_sweep.py                  # the whole sweep (default seeds per config)
    python bench/healthy_sweep.py --list           # the runs, without training
    python bench/healthy_sweep.py --only cnn,gru   # runs whose name contains "cnn" or "gru"
    python bench/healthy_sweep.py --seeds 3        # seeds 0..2 for every config
    python bench/healthy_sweep.py --json out.json --keep /tmp/sweep_logs
    tensorboard --logdir /tmp/sweep_logs           # look at kept runs in the Health tab

Exit status: 0 when no run has a warning/critical finding and every run trained, else 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import keras
import numpy as np
import tensorflow as tf

from tb_trainhealth import HealthCallback, engine
from tb_trainhealth.findings import Severity
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader

AUTOTUNE = tf.data.AUTOTUNE
LEARNED_RATIO = 0.6  # final training loss must be below this share of the untrained model's loss


# -- synthetic tasks (numpy, seeded) -------------------------------------------------------
def _standardize(train: np.ndarray, *others: np.ndarray) -> tuple[np.ndarray, ...]:
    mean, std = train.mean(axis=0), train.std(axis=0) + 1e-8
    return tuple(((a - mean) / std).astype("float32") for a in (train, *others))


def moons(rng: np.random.Generator, n: int, noise: float = 0.15):
    """Two interleaved half circles (binary), standardised."""
    t = rng.uniform(0, np.pi, n)
    y = rng.integers(0, 2, n)
    x0 = np.where(y == 0, np.cos(t), 1 - np.cos(t))
    x1 = np.where(y == 0, np.sin(t), 0.5 - np.sin(t))
    x = np.stack([x0, x1], axis=1) + noise * rng.normal(size=(n, 2))
    (x,) = _standardize(x)
    return x, y.astype("float32")


def rings(rng: np.random.Generator, n: int, classes: int = 3, noise: float = 0.2):
    """Concentric rings, class = ring index."""
    y = rng.integers(0, classes, n)
    angle = rng.uniform(0, 2 * np.pi, n)
    radius = 1.0 + y + noise * rng.normal(size=n)
    x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    (x,) = _standardize(x)
    return x, y.astype("int32")


def tabular(rng: np.random.Generator, n: int, classes: int = 5):
    """Raw-scale 'customer' features (ages, incomes in the tens of thousands, credit scores)
    whose class is a quantile bin of a nonlinear score. NOT normalised here: the models that
    use it start with an adapted keras.layers.Normalization, as the Keras guides do."""
    age = rng.uniform(18, 80, n)
    income = rng.lognormal(10.5, 0.5, n)
    hours = rng.normal(40, 10, n)
    credit = rng.uniform(300, 850, n)
    other = rng.normal(size=(n, 4))
    score = (
        -(((age - 45) / 15) ** 2)
        + 1.5 * (np.log(income) - 10.5) / 0.5
        + 0.5 * np.tanh((hours - 40) / 10)
        + (credit - 575) / 160
        + np.sin(2 * other[:, 0])
        + 0.3 * rng.normal(size=n)
    )
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    x = np.column_stack([age, income, hours, credit, other]).astype("float32")
    return x, y.astype("int32")


def friedman(rng: np.random.Generator, n: int, noise: float = 1.0):
    """Friedman #1 regression (10 uniform features, 5 used), inputs and target standardised."""
    x = rng.uniform(size=(n, 10))
    y = 10 * np.sin(np.pi * x[:, 0] * x[:, 1]) + 20 * (x[:, 2] - 0.5) ** 2 + 10 * x[:, 3] + 5 * x[:, 4]
    y = y + noise * rng.normal(size=n)
    (x,) = _standardize(x)
    (y,) = _standardize(y)
    return x, y


def heavy_tailed(rng: np.random.Generator, n: int):
    """y = smooth function + Student-t noise (outliers): a job for MAE or Huber."""
    x = rng.normal(size=(n, 6))
    y = np.tanh(x[:, 0] + 0.5 * x[:, 1]) + 0.5 * x[:, 2] * x[:, 3] + 0.3 * rng.standard_t(2.0, size=n)
    return x.astype("float32"), np.clip(y, -10, 10).astype("float32")


def linear_exact(rng: np.random.Generator, n: int, features: int = 8, outputs: int = 2):
    """Noise-free linear targets: a linear model drives the loss to ~0."""
    x = rng.normal(size=(n, features))
    w = rng.normal(size=(features, outputs)) / np.sqrt(features)
    return x.astype("float32"), (x @ w).astype("float32")


def separable(rng: np.random.Generator, n: int, features: int = 4, gap: float = 3.0):
    """Two well-separated Gaussian clusters: 100% accuracy, log-loss heading to ~0."""
    y = rng.integers(0, 2, n)
    x = rng.normal(size=(n, features)) + gap * (2 * y[:, None] - 1) / np.sqrt(features)
    return x.astype("float32"), y.astype("float32")


def multi_target(rng: np.random.Generator, n: int):
    """Three smooth targets of 8 standardised inputs."""
    x = rng.normal(size=(n, 8))
    y = np.column_stack([np.sin(x[:, 0]) + x[:, 1], x[:, 2] * x[:, 3] / 2, np.cos(x[:, 4] + x[:, 5])])
    y = y + 0.1 * rng.normal(size=y.shape)
    return x.astype("float32"), y.astype("float32")


def bars(rng: np.random.Generator, n: int, size: int = 12, classes: int = 4):
    """Images in [0, 1]: 0 horizontal bar, 1 vertical bar, 2 cross, 3 box outline (mirror-invariant)."""
    y = rng.integers(0, classes, n)
    x = np.clip(0.1 + 0.08 * rng.normal(size=(n, size, size)), 0, 1)
    for i, label in enumerate(y):
        r, c = rng.integers(2, size - 2, 2)
        if label in (0, 2):
            x[i, r, :] = 0.9
        if label in (1, 2):
            x[i, :, c] = 0.9
        if label == 3:
            lo, hi = sorted(rng.choice(np.arange(1, size - 1), 2, replace=False))
            hi = max(hi, lo + 3)
            x[i, lo, lo:hi] = x[i, hi - 1, lo:hi] = x[i, lo:hi, lo] = x[i, lo:hi, hi - 1] = 0.9
    return x[..., None].astype("float32"), y.astype("int32")


def stripes(rng: np.random.Generator, n: int, size: int = 16):
    """Sinusoidal gratings, class = spatial frequency (3 classes), random orientation and phase."""
    y = rng.integers(0, 3, n)
    freq = np.array([1.0, 2.5, 5.0])[y]
    grid = np.arange(size) / size
    rows, cols = np.meshgrid(grid, grid, indexing="ij")
    theta = rng.uniform(0, np.pi, n)
    phase = rng.uniform(0, 2 * np.pi, n)
    coord = np.cos(theta)[:, None, None] * rows + np.sin(theta)[:, None, None] * cols
    x = 0.5 + 0.4 * np.sin(2 * np.pi * freq[:, None, None] * coord + phase[:, None, None])
    x = x + 0.15 * rng.normal(size=x.shape)
    return x[..., None].astype("float32"), y.astype("int32")


def blob_centres(rng: np.random.Generator, n: int, size: int = 16):
    """A Gaussian blob at a random place; target = its centre (row, col) scaled to [-1, 1]."""
    centre = rng.uniform(2, size - 2, size=(n, 2))
    grid = np.arange(size)
    rows = np.exp(-((grid[None, :] - centre[:, :1]) ** 2) / 4.0)
    cols = np.exp(-((grid[None, :] - centre[:, 1:]) ** 2) / 4.0)
    x = rows[:, :, None] * cols[:, None, :] + 0.05 * rng.normal(size=(n, size, size))
    y = (centre - size / 2) / (size / 2)
    return x[..., None].astype("float32"), y.astype("float32")


def sequence_sign(rng: np.random.Generator, n: int, length: int = 20):
    """Binary: is the sum of the sequence positive?"""
    x = rng.normal(size=(n, length, 1))
    return x.astype("float32"), (x.sum(axis=(1, 2)) > 0).astype("float32")


def marker_position(rng: np.random.Generator, n: int, length: int = 24):
    """Channel 0 noise, channel 1 a single marker; class = which third of the sequence it is in."""
    x = np.zeros((n, length, 2))
    x[:, :, 0] = rng.normal(size=(n, length))
    position = rng.integers(0, length, n)
    x[np.arange(n), position, 1] = 1.0
    return x.astype("float32"), (position * 3 // length).astype("int32")


def sine_next(rng: np.random.Generator, n: int, length: int = 30):
    """Noisy sine waves with random frequency/phase/amplitude; target = the next value."""
    t = np.arange(length + 1)
    w = rng.uniform(0.2, 0.6, (n, 1))
    amplitude = rng.uniform(0.5, 1.5, (n, 1))
    wave = amplitude * np.sin(w * t + rng.uniform(0, 2 * np.pi, (n, 1)))
    x = wave[:, :length] + 0.05 * rng.normal(size=(n, length))
    return x[..., None].astype("float32"), wave[:, length].astype("float32")


def sine_frequency(rng: np.random.Generator, n: int, length: int = 40):
    """Class = which of 3 frequencies a noisy sine has."""
    y = rng.integers(0, 3, n)
    w = np.array([0.15, 0.35, 0.7])[y][:, None]
    x = np.sin(w * np.arange(length) + rng.uniform(0, 2 * np.pi, (n, 1))) + 0.3 * rng.normal(size=(n, length))
    return x[..., None].astype("float32"), y.astype("int32")


def motif(rng: np.random.Generator, n: int, length: int = 32):
    """Binary: does the pattern (+1, -1, +1, -1) appear somewhere in the noise?"""
    x = 0.5 * rng.normal(size=(n, length))
    y = rng.integers(0, 2, n)
    start = rng.integers(0, length - 4, n)
    for i in np.flatnonzero(y):
        x[i, start[i] : start[i] + 4] += np.array([1.5, -1.5, 1.5, -1.5])
    return x[..., None].astype("float32"), y.astype("float32")


def sentiment_tokens(rng: np.random.Generator, n: int, vocab: int = 300, length: int = 30):
    """Token ids 1..vocab-1; tokens 1-20 'positive', 21-40 'negative'; label = more positive."""
    x = rng.integers(41, vocab, size=(n, length))
    y = rng.integers(0, 2, n)
    for i in range(n):
        strong, weak = rng.integers(3, 7), rng.integers(0, 3)
        positive, negative = (strong, weak) if y[i] else (weak, strong)
        slots = rng.choice(length, positive + negative, replace=False)
        x[i, slots[:positive]] = rng.integers(1, 21, positive)
        x[i, slots[positive:]] = rng.integers(21, 41, negative)
    return x.astype("int32"), y.astype("float32")


def topic_tokens(rng: np.random.Generator, n: int, topics: int = 4, vocab: int = 400, length: int = 25):
    """Each topic prefers its own 25 tokens (35% of a document), the rest uniform noise."""
    y = rng.integers(0, topics, n)
    x = rng.integers(1, vocab, size=(n, length))
    topical = rng.uniform(size=(n, length)) < 0.35
    own = 1 + y[:, None] * 25 + rng.integers(0, 25, size=(n, length))
    x = np.where(topical, own, x)
    return x.astype("int32"), y.astype("int32")


def padded_contains(rng: np.random.Generator, n: int, vocab: int = 100, max_length: int = 30):
    """Variable-length token sequences padded with 0; label = token 7 occurs."""
    x = np.zeros((n, max_length), dtype="int32")
    y = rng.integers(0, 2, n)
    for i in range(n):
        length = rng.integers(5, max_length + 1)
        tokens = rng.choice(np.setdiff1d(np.arange(1, vocab), [7]), length)
        if y[i]:
            tokens[rng.integers(0, length)] = 7
        x[i, :length] = tokens
    return x, y.astype("float32")


def _split(x: Any, y: Any, fraction: float = 0.2):
    cut = int(len(y) * (1 - fraction))
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


# -- models ---------------------------------------------------------------------------------
def mlp(inputs: int, outputs: int, hidden=(32, 32), activation="relu", output_activation=None, extra=None):
    """Dense stack; `extra(i)` returns layers to put after hidden layer i (dropout, norms)."""
    layers: list[Any] = [keras.Input((inputs,))]
    for i, units in enumerate(hidden):
        layers.append(keras.layers.Dense(units, activation=activation))
        layers += extra(i) if extra else []
    layers.append(keras.layers.Dense(outputs, activation=output_activation))
    return keras.Sequential(layers)


def cnn(shape, outputs: int, output_activation=None, batch_norm=False, dropout=0.0, flatten=False):
    def block(filters):
        conv = [keras.layers.Conv2D(filters, 3, padding="same", use_bias=not batch_norm)]
        # momentum 0.9: the moving statistics settle within an epoch of a small data set
        norm = [keras.layers.BatchNormalization(momentum=0.9)] if batch_norm else []
        return [*conv, *norm, keras.layers.Activation("relu")]

    layers = [keras.Input(shape), *block(16), keras.layers.MaxPooling2D(), *block(32)]
    if flatten:
        layers += [keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(64, activation="relu")]
    else:
        layers.append(keras.layers.GlobalAveragePooling2D())
    if dropout:
        layers.append(keras.layers.Dropout(dropout))
    layers.append(keras.layers.Dense(outputs, activation=output_activation))
    return keras.Sequential(layers)


@keras.saving.register_keras_serializable(package="healthy_sweep")
class WarmupExponential(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak` over `warmup` steps, then exponential decay."""

    def __init__(self, peak: float, warmup: int, decay_steps: int, decay_rate: float):
        self.peak, self.warmup, self.decay_steps, self.decay_rate = peak, warmup, decay_steps, decay_rate

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        warm = self.peak * (step + 1) / self.warmup
        decayed = self.peak * keras.ops.power(self.decay_rate, (step - self.warmup) / self.decay_steps)
        return keras.ops.where(step < self.warmup, warm, decayed)

    def get_config(self):
        return {
            "peak": self.peak,
            "warmup": self.warmup,
            "decay_steps": self.decay_steps,
            "decay_rate": self.decay_rate,
        }


def early_stopping(patience: int, monitor: str = "val_loss", min_delta: float = 0.0):
    return keras.callbacks.EarlyStopping(
        monitor=monitor, patience=patience, min_delta=min_delta, restore_best_weights=True
    )


def pipeline(x, y, batch: int, shuffle: bool = True, seed: int = 0, augment=None):
    """tf.data as the tf.data guide says: cache, shuffle, (parallel map), batch, prefetch."""
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).cache()
    if shuffle:
        dataset = dataset.shuffle(len(y), seed=seed, reshuffle_each_iteration=True)
    if augment is not None:
        dataset = dataset.map(augment, num_parallel_calls=AUTOTUNE)
    return dataset.batch(batch).prefetch(AUTOTUNE)


def flip_images(images, labels):
    return tf.image.random_flip_left_right(tf.image.random_flip_up_down(images)), labels


# -- runs -----------------------------------------------------------------------------------
@dataclasses.dataclass
class Setup:
    """What one run trains: a compiled model and the arguments of its fit."""

    model: keras.Model
    train: Any  # (x, y) arrays, a tf.data.Dataset or a keras.utils.PyDataset
    epochs: int
    batch_size: int | None = None  # arrays only
    validation: Any = None  # None, a split fraction, (x, y) or a Dataset
    callbacks: list = dataclasses.field(default_factory=list)
    accuracy: str | None = None  # name of the accuracy metric in the logs, if any
    fit_kwargs: dict = dataclasses.field(default_factory=dict)  # steps_per_epoch, class_weight, ...


@dataclasses.dataclass
class Config:
    name: str
    kind: str
    make: Callable[[int], Setup]
    seeds: int = 1
    note: str = ""


CONFIGS: list[Config] = []


def config(name: str, kind: str, seeds: int = 1, note: str = ""):
    def register(make: Callable[[int], Setup]) -> Callable[[int], Setup]:
        CONFIGS.append(Config(name, kind, make, seeds, note or " ".join((make.__doc__ or "").split())))
        return make

    return register


def _compile(model, optimizer, loss, metrics=(), **kwargs):
    model.compile(optimizer=optimizer, loss=loss, metrics=list(metrics), **kwargs)
    return model


# MLP, binary / multi-class ---------------------------------------------------------------
@config("mlp_moons_adam_bs32_fixed", "mlp/binary", seeds=3)
def _(seed):
    """Two moons, sigmoid + binary CE, Adam 3e-3, batch 32, fixed 40 epochs, validation_split."""
    x, y = moons(np.random.default_rng(seed), 1500)
    model = _compile(
        mlp(2, 1, (32, 32), output_activation="sigmoid"),
        keras.optimizers.Adam(3e-3),
        "binary_crossentropy",
        ["accuracy"],
    )
    return Setup(model, (x, y), epochs=40, batch_size=32, validation=0.2, accuracy="accuracy")


@config("mlp_moons_sgd_nesterov_bs16_es", "mlp/binary", seeds=2)
def _(seed):
    """Two moons (noisier), logits + BinaryCrossentropy(from_logits), SGD 0.05 nesterov, EarlyStopping(4)."""
    x, y = moons(np.random.default_rng(100 + seed), 1200, noise=0.25)
    train, val = _split(x, y)
    loss = keras.losses.BinaryCrossentropy(from_logits=True)
    opt = keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True)
    model = _compile(mlp(2, 1, (64, 32), activation="tanh"), opt, loss, [keras.metrics.BinaryAccuracy(threshold=0.0)])
    return Setup(
        model,
        train,
        epochs=100,
        batch_size=16,
        validation=val,
        callbacks=[early_stopping(4)],
        accuracy="binary_accuracy",
    )


@config("mlp_rings_rmsprop_onehot_bs64", "mlp/multiclass")
def _(seed):
    """Three rings, softmax + categorical CE on one-hot labels, RMSprop 2e-3, batch 64, fixed 60 epochs."""
    x, y = rings(np.random.default_rng(200 + seed), 2000)
    onehot = keras.utils.to_categorical(y, 3)
    train, val = _split(x, onehot)
    model = _compile(
        mlp(2, 3, (32, 32), output_activation="softmax"),
        keras.optimizers.RMSprop(2e-3),
        "categorical_crossentropy",
        ["accuracy"],
    )
    return Setup(model, train, epochs=60, batch_size=64, validation=val, accuracy="accuracy")


def _tabular_model(x_train, classes, hidden, extra):
    norm = keras.layers.Normalization()
    norm.adapt(x_train)
    inputs = keras.Input((x_train.shape[1],))
    h = norm(inputs)
    for i, units in enumerate(hidden):
        h = keras.layers.Dense(units, activation="relu")(h)
        for layer in extra(i):
            h = layer(h)
    return keras.Model(inputs, keras.layers.Dense(classes, activation="softmax")(h))


@config("mlp_tabular_normlayer_dropout_adamw_cosine_warmup", "mlp/multiclass", seeds=2)
def _(seed):
    """Raw-scale features through an adapted Normalization layer, dropout 0.2, softmax + sparse CE,
    AdamW with linear warm-up then cosine decay, batch 128, fixed 40 epochs."""
    x, y = tabular(np.random.default_rng(300 + seed), 4000)
    train, val = _split(x, y)
    model = _tabular_model(train[0], 5, (64, 64), lambda i: [keras.layers.Dropout(0.2)])
    steps = 40 * math.ceil(len(train[1]) / 128)
    schedule = keras.optimizers.schedules.CosineDecay(
        1e-4, steps, alpha=0.05, warmup_target=3e-3, warmup_steps=steps // 10
    )
    opt = keras.optimizers.AdamW(schedule, weight_decay=1e-4)
    _compile(model, opt, "sparse_categorical_crossentropy", ["accuracy"])
    return Setup(model, train, epochs=40, batch_size=128, validation=val, accuracy="accuracy")


@config("mlp_tabular_batchnorm_nadam_bs64_es", "mlp/multiclass")
def _(seed):
    """Same raw-scale task, Normalization + BatchNorm after each hidden layer, Nadam 1e-3, EarlyStopping(3)."""
    x, y = tabular(np.random.default_rng(310 + seed), 5000)
    train, val = _split(x, y)
    model = _tabular_model(train[0], 5, (64, 32), lambda i: [keras.layers.BatchNormalization()])
    _compile(model, keras.optimizers.Nadam(1e-3), "sparse_categorical_crossentropy", ["accuracy"])
    return Setup(
        model, train, epochs=80, batch_size=64, validation=val, callbacks=[early_stopping(3)], accuracy="accuracy"
    )


@config("mlp_separable_logits_adam_converges", "mlp/binary")
def _(seed):
    """Well-separated clusters, logits + from_logits=True, Adam 1e-2, no validation, 30 epochs: loss to ~0."""
    x, y = separable(np.random.default_rng(400 + seed), 1000)
    loss = keras.losses.BinaryCrossentropy(from_logits=True)
    model = _compile(mlp(4, 1, (16,)), keras.optimizers.Adam(1e-2), loss, [keras.metrics.BinaryAccuracy(threshold=0.0)])
    return Setup(model, (x, y), epochs=30, batch_size=32, accuracy="binary_accuracy")


@config("mlp_rings_bs8_adamax_small_data", "mlp/multiclass")
def _(seed):
    """Only 500 samples, batch 8, Adamax 2e-3, logits + sparse CE(from_logits), fixed 20 epochs, validation_split."""
    x, y = rings(np.random.default_rng(500 + seed), 500, noise=0.15)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model = _compile(mlp(2, 3, (32, 32)), keras.optimizers.Adamax(2e-3), loss, ["accuracy"])
    return Setup(model, (x, y), epochs=20, batch_size=8, validation=0.2, accuracy="accuracy")


@config("mlp_moons_lion_bs256", "mlp/binary")
def _(seed):
    """Large batch 256, Lion 3e-4 (a tenth of Adam's rate, as its paper says), 8000 samples, 30 epochs."""
    x, y = moons(np.random.default_rng(600 + seed), 8000, noise=0.2)
    model = _compile(
        mlp(2, 1, (64, 64), output_activation="sigmoid"),
        keras.optimizers.Lion(3e-4),
        "binary_crossentropy",
        ["accuracy"],
    )
    return Setup(model, (x, y), epochs=30, batch_size=256, validation=0.1, accuracy="accuracy")


@config("mlp_residual_layernorm_sgd_piecewise", "mlp/multiclass")
def _(seed):
    """Functional residual MLP with LayerNormalization, SGD+momentum with piecewise-constant lr, 30 epochs."""
    x, y = rings(np.random.default_rng(700 + seed), 3000, classes=4, noise=0.15)
    train, val = _split(x, y)
    inputs = keras.Input((2,))
    h = keras.layers.Dense(64)(inputs)
    for _ in range(3):
        r = keras.layers.LayerNormalization()(h)
        r = keras.layers.Dense(64, activation="gelu")(r)
        h = keras.layers.Add()([h, keras.layers.Dense(64)(r)])
    outputs = keras.layers.Dense(4, activation="softmax")(keras.layers.LayerNormalization()(h))
    steps = math.ceil(len(train[1]) / 64)
    schedule = keras.optimizers.schedules.PiecewiseConstantDecay([15 * steps, 25 * steps], [0.05, 0.01, 0.002])
    model = _compile(
        keras.Model(inputs, outputs),
        keras.optimizers.SGD(schedule, momentum=0.9),
        "sparse_categorical_crossentropy",
        ["accuracy"],
    )
    return Setup(model, train, epochs=30, batch_size=64, validation=val, accuracy="accuracy")


@config("mlp_moons_reduce_lr_on_plateau_es", "mlp/binary")
def _(seed):
    """Adam 1e-2 with ReduceLROnPlateau(factor 0.3, patience 2) and EarlyStopping(5) on val_loss, batch 32."""
    x, y = moons(np.random.default_rng(800 + seed), 2000, noise=0.2)
    train, val = _split(x, y)
    model = _compile(
        mlp(2, 1, (32, 32), output_activation="sigmoid"),
        keras.optimizers.Adam(1e-2),
        "binary_crossentropy",
        ["accuracy"],
    )
    plateau = keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.3, patience=2, min_lr=1e-5)
    return Setup(
        model,
        train,
        epochs=80,
        batch_size=32,
        validation=val,
        callbacks=[plateau, early_stopping(5)],
        accuracy="accuracy",
    )


@config("mlp_separable_es_on_train_loss_no_val", "mlp/binary")
def _(seed):
    """Easy task, no validation data: EarlyStopping(monitor='loss', min_delta=1e-3, patience=3) ends it."""
    x, y = separable(np.random.default_rng(900 + seed), 1500, features=6, gap=4.0)
    stop = keras.callbacks.EarlyStopping(monitor="loss", min_delta=1e-3, patience=3, restore_best_weights=True)
    model = _compile(
        mlp(6, 1, (16,), output_activation="sigmoid"), keras.optimizers.Adam(3e-3), "binary_crossentropy", ["accuracy"]
    )
    return Setup(model, (x, y), epochs=200, batch_size=64, callbacks=[stop], accuracy="accuracy")


# Regression -------------------------------------------------------------------------------
@config("reg_friedman_mse_adam_expdecay", "regression", seeds=2)
def _(seed):
    """Friedman #1, MLP 64-64, MSE, Adam with exponential decay, batch 64, fixed 40 epochs, validation_split."""
    x, y = friedman(np.random.default_rng(1000 + seed), 2500)
    schedule = keras.optimizers.schedules.ExponentialDecay(3e-3, decay_steps=300, decay_rate=0.7)
    model = _compile(mlp(10, 1, (64, 64)), keras.optimizers.Adam(schedule), "mse", ["mae"])
    return Setup(model, (x, y), epochs=40, batch_size=64, validation=0.2)


@config("reg_friedman_huber_layernorm_adamw_tfdata_es", "regression")
def _(seed):
    """Friedman #1, Dense+LayerNormalization, Huber, AdamW 2e-3, tf.data (cache/shuffle/batch 64/prefetch), EarlyStopping(5)."""
    x, y = friedman(np.random.default_rng(1100 + seed), 3000)
    (xt, yt), (xv, yv) = _split(x, y)
    model = mlp(10, 1, (64, 64), extra=lambda i: [keras.layers.LayerNormalization()])
    _compile(model, keras.optimizers.AdamW(2e-3, weight_decay=1e-4), keras.losses.Huber(delta=1.0), ["mse"])
    return Setup(
        model,
        pipeline(xt, yt, 64, seed=seed),
        epochs=100,
        validation=pipeline(xv, yv, 256, shuffle=False),
        callbacks=[early_stopping(5)],
    )


@config("reg_heavy_tail_mae_adagrad_bs16", "regression")
def _(seed):
    """Outlier-heavy targets, MAE, Adagrad 0.05, batch 16, fixed 25 epochs, validation_split."""
    x, y = heavy_tailed(np.random.default_rng(1200 + seed), 2000)
    model = _compile(mlp(6, 1, (64, 32)), keras.optimizers.Adagrad(0.05), "mae")
    return Setup(model, (x, y), epochs=25, batch_size=16, validation=0.2)


@config("reg_heavy_tail_huber_rmsprop_es", "regression")
def _(seed):
    """Outlier-heavy targets, Huber(delta 1), RMSprop 1e-3, batch 32, EarlyStopping(4)."""
    x, y = heavy_tailed(np.random.default_rng(1300 + seed), 2500)
    train, val = _split(x, y)
    model = _compile(mlp(6, 1, (64, 64)), keras.optimizers.RMSprop(1e-3), keras.losses.Huber(), ["mae"])
    return Setup(model, train, epochs=100, batch_size=32, validation=val, callbacks=[early_stopping(4)])


@config("reg_multi_target_mse_rmsprop_dropout", "regression")
def _(seed):
    """Three targets, MLP with dropout 0.1, MSE, RMSprop 1e-3, batch 64, fixed 40 epochs."""
    x, y = multi_target(np.random.default_rng(1400 + seed), 3000)
    train, val = _split(x, y)
    model = _compile(
        mlp(8, 3, (128, 64), extra=lambda i: [keras.layers.Dropout(0.1)]), keras.optimizers.RMSprop(1e-3), "mse"
    )
    return Setup(model, train, epochs=40, batch_size=64, validation=val)


@config("reg_linear_exact_sgd_converges", "regression")
def _(seed):
    """Noise-free linear targets, a linear model, SGD 0.05 momentum 0.9, no validation, 30 epochs: MSE to ~0."""
    x, y = linear_exact(np.random.default_rng(1500 + seed), 1000)
    model = _compile(
        keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)]), keras.optimizers.SGD(0.05, momentum=0.9), "mse"
    )
    return Setup(model, (x, y), epochs=30, batch_size=32)


@config("reg_linear_exact_mlp_adam_converges", "regression")
def _(seed):
    """Noise-free linear targets, small MLP, Adam 3e-3, batch 16, validation, 40 epochs: MSE near 0."""
    x, y = linear_exact(np.random.default_rng(1600 + seed), 1200, features=5, outputs=1)
    train, val = _split(x, y)
    model = _compile(mlp(5, 1, (32,), activation="relu"), keras.optimizers.Adam(3e-3), "mse")
    return Setup(model, train, epochs=40, batch_size=16, validation=val)


# CNN ----------------------------------------------------------------------------------------
@config("cnn_bars_adam_bs32", "cnn/multiclass", seeds=2)
def _(seed):
    """Bars/cross/box 12x12 images, two conv blocks + GAP, logits + sparse CE(from_logits), Adam 2e-3, 15 epochs."""
    x, y = bars(np.random.default_rng(2000 + seed), 1500)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model = _compile(cnn((12, 12, 1), 4), keras.optimizers.Adam(2e-3), loss, ["accuracy"])
    return Setup(model, (x, y), epochs=15, batch_size=32, validation=0.2, accuracy="accuracy")


@config("cnn_bars_batchnorm_sgd_tfdata_augment_es", "cnn/multiclass")
def _(seed):
    """Same images, Conv+BatchNorm(momentum 0.9), tf.data with random flips (the classes are
    mirror-invariant), SGD 0.02 momentum 0.9, softmax + sparse CE, EarlyStopping(5)."""
    x, y = bars(np.random.default_rng(2100 + seed), 1500)
    (xt, yt), (xv, yv) = _split(x, y)
    model = cnn((12, 12, 1), 4, output_activation="softmax", batch_norm=True)
    _compile(model, keras.optimizers.SGD(0.02, momentum=0.9), "sparse_categorical_crossentropy", ["accuracy"])
    train = pipeline(xt, yt, 32, seed=seed, augment=flip_images)
    return Setup(
        model,
        train,
        epochs=40,
        validation=pipeline(xv, yv, 128, shuffle=False),
        callbacks=[early_stopping(5)],
        accuracy="accuracy",
    )


@config("cnn_stripes_onehot_rmsprop_dropout_bs64", "cnn/multiclass")
def _(seed):
    """Gratings classified by frequency, one-hot + categorical CE, softmax, dropout 0.3, RMSprop 1e-3, 25 epochs."""
    x, y = stripes(np.random.default_rng(2200 + seed), 1500)
    train, val = _split(x, keras.utils.to_categorical(y, 3))
    model = _compile(
        cnn((16, 16, 1), 3, output_activation="softmax", dropout=0.3),
        keras.optimizers.RMSprop(1e-3),
        "categorical_crossentropy",
        ["accuracy"],
    )
    return Setup(model, train, epochs=25, batch_size=64, validation=val, accuracy="accuracy")


@config("cnn_blob_centre_regression_mse_adam", "cnn/regression")
def _(seed):
    """Locate a blob: conv blocks + Flatten + Dense, 2 outputs, MSE, Adam 1e-3, batch 32, 20 epochs."""
    x, y = blob_centres(np.random.default_rng(2300 + seed), 1200)
    train, val = _split(x, y)
    model = _compile(cnn((16, 16, 1), 2, flatten=True), keras.optimizers.Adam(1e-3), "mse", ["mae"])
    return Setup(model, train, epochs=20, batch_size=32, validation=val)


@config("cnn_hv_bars_logits_adamw_cosine_warmup_bs128", "cnn/binary")
def _(seed):
    """Horizontal vs vertical bar, logits + from_logits=True, AdamW with warm-up + cosine, batch 128, 30 epochs."""
    rng = np.random.default_rng(2400 + seed)
    x, y = bars(rng, 4000, classes=2)
    train, val = _split(x, y.astype("float32"))
    steps = 30 * math.ceil(len(train[1]) / 128)
    schedule = keras.optimizers.schedules.CosineDecay(0.0, steps, warmup_target=3e-3, warmup_steps=steps // 8)
    loss = keras.losses.BinaryCrossentropy(from_logits=True)
    model = _compile(
        cnn((12, 12, 1), 1), keras.optimizers.AdamW(schedule), loss, [keras.metrics.BinaryAccuracy(threshold=0.0)]
    )
    return Setup(model, train, epochs=30, batch_size=128, validation=val, accuracy="binary_accuracy")


@config("cnn_stripes_custom_warmup_nadam_tfdata_no_val", "cnn/multiclass")
def _(seed):
    """Gratings, custom warm-up + exponential decay schedule, Nadam, tf.data batch 48, no validation, 20 epochs."""
    x, y = stripes(np.random.default_rng(2500 + seed), 1200)
    schedule = WarmupExponential(peak=2e-3, warmup=100, decay_steps=200, decay_rate=0.8)
    model = _compile(
        cnn((16, 16, 1), 3, output_activation="softmax"),
        keras.optimizers.Nadam(schedule),
        "sparse_categorical_crossentropy",
        ["accuracy"],
    )
    return Setup(model, pipeline(x, y, 48, seed=seed), epochs=20, accuracy="accuracy")


# RNN ----------------------------------------------------------------------------------------
@config("gru_sequence_sign_adam_bs32", "rnn/binary", seeds=2)
def _(seed):
    """Is the sum positive? GRU(16) + sigmoid, binary CE, Adam 3e-3, batch 32, 20 epochs, validation_split."""
    x, y = sequence_sign(np.random.default_rng(3000 + seed), 2000)
    model = keras.Sequential([keras.Input((20, 1)), keras.layers.GRU(16), keras.layers.Dense(1, activation="sigmoid")])
    _compile(model, keras.optimizers.Adam(3e-3), "binary_crossentropy", ["accuracy"])
    return Setup(model, (x, y), epochs=20, batch_size=32, validation=0.2, accuracy="accuracy")


@config("lstm_marker_position_rmsprop_es", "rnn/multiclass")
def _(seed):
    """Where is the marker? LSTM(24) + softmax, sparse CE, RMSprop 3e-3, batch 64, EarlyStopping(3)."""
    x, y = marker_position(np.random.default_rng(3100 + seed), 2400)
    train, val = _split(x, y)
    model = keras.Sequential([keras.Input((24, 2)), keras.layers.LSTM(24), keras.layers.Dense(3, activation="softmax")])
    _compile(model, keras.optimizers.RMSprop(3e-3), "sparse_categorical_crossentropy", ["accuracy"])
    return Setup(
        model, train, epochs=60, batch_size=64, validation=val, callbacks=[early_stopping(3)], accuracy="accuracy"
    )


@config("simplernn_sine_next_sgd_clipnorm_bs16", "rnn/regression")
def _(seed):
    """Next value of a noisy sine: SimpleRNN(32), MSE, SGD 0.01 momentum 0.9 clipnorm 1, batch 16, 15 epochs."""
    x, y = sine_next(np.random.default_rng(3200 + seed), 1600)
    model = keras.Sequential([keras.Input((30, 1)), keras.layers.SimpleRNN(32), keras.layers.Dense(1)])
    _compile(model, keras.optimizers.SGD(0.01, momentum=0.9, clipnorm=1.0), "mse")
    return Setup(model, (x, y), epochs=15, batch_size=16, validation=0.2)


@config("gru_stacked_layernorm_sine_freq_tfdata_expdecay", "rnn/multiclass")
def _(seed):
    """Which frequency? GRU(32, return_sequences) + LayerNorm + GRU(32), logits + sparse CE,
    Adam with exponential decay, tf.data batch 64 with prefetch, 15 epochs."""
    x, y = sine_frequency(np.random.default_rng(3300 + seed), 2000)
    (xt, yt), (xv, yv) = _split(x, y)
    model = keras.Sequential(
        [
            keras.Input((40, 1)),
            keras.layers.GRU(32, return_sequences=True),
            keras.layers.LayerNormalization(),
            keras.layers.GRU(32),
            keras.layers.Dense(3),
        ]
    )
    schedule = keras.optimizers.schedules.ExponentialDecay(3e-3, decay_steps=100, decay_rate=0.85)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    _compile(model, keras.optimizers.Adam(schedule), loss, ["accuracy"])
    return Setup(
        model,
        pipeline(xt, yt, 64, seed=seed),
        epochs=15,
        validation=pipeline(xv, yv, 256, shuffle=False),
        accuracy="accuracy",
    )


@config("conv1d_gru_motif_logits_adam_es", "rnn/binary")
def _(seed):
    """Find a motif: Conv1D + MaxPool1D + GRU(16), logits + from_logits=True, Adam 2e-3, EarlyStopping(4)."""
    x, y = motif(np.random.default_rng(3400 + seed), 2400)
    train, val = _split(x, y)
    model = keras.Sequential(
        [
            keras.Input((32, 1)),
            keras.layers.Conv1D(16, 4, activation="relu", padding="same"),
            keras.layers.MaxPooling1D(2),
            keras.layers.GRU(16),
            keras.layers.Dense(1),
        ]
    )
    loss = keras.losses.BinaryCrossentropy(from_logits=True)
    _compile(model, keras.optimizers.Adam(2e-3), loss, [keras.metrics.BinaryAccuracy(threshold=0.0)])
    return Setup(
        model,
        train,
        epochs=60,
        batch_size=32,
        validation=val,
        callbacks=[early_stopping(4)],
        accuracy="binary_accuracy",
    )


@config("lstm_sine_next_huber_adam_bs128_no_val", "rnn/regression")
def _(seed):
    """Next value of a noisy sine: LSTM(32), Huber, Adam 3e-3, batch 128, no validation, 40 epochs."""
    x, y = sine_next(np.random.default_rng(3500 + seed), 3000, length=20)
    model = keras.Sequential([keras.Input((20, 1)), keras.layers.LSTM(32), keras.layers.Dense(1)])
    _compile(model, keras.optimizers.Adam(3e-3), keras.losses.Huber(), ["mae"])
    return Setup(model, (x, y), epochs=40, batch_size=128)


# Embedding + pooling ------------------------------------------------------------------------
@config("emb_gap_sentiment_adam_bs64", "embedding/binary", seeds=2)
def _(seed):
    """Embedding(300, 16) + GlobalAveragePooling1D + Dense, sigmoid + binary CE, Adam 3e-3, 20 epochs, validation."""
    x, y = sentiment_tokens(np.random.default_rng(4000 + seed), 3000)
    train, val = _split(x, y)
    model = keras.Sequential(
        [
            keras.Input((30,), dtype="int32"),
            keras.layers.Embedding(300, 16),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    _compile(model, keras.optimizers.Adam(3e-3), "binary_crossentropy", ["accuracy"])
    return Setup(model, train, epochs=20, batch_size=64, validation=val, accuracy="accuracy")


@config("emb_maxpool_topics_adagrad_bs32", "embedding/multiclass")
def _(seed):
    """Embedding(400, 24) + GlobalMaxPooling1D, softmax + sparse CE, Adagrad 0.05, batch 32, 15 epochs."""
    x, y = topic_tokens(np.random.default_rng(4100 + seed), 2400)
    train, val = _split(x, y)
    model = keras.Sequential(
        [
            keras.Input((25,), dtype="int32"),
            keras.layers.Embedding(400, 24),
            keras.layers.GlobalMaxPooling1D(),
            keras.layers.Dense(4, activation="softmax"),
        ]
    )
    _compile(model, keras.optimizers.Adagrad(0.05), "sparse_categorical_crossentropy", ["accuracy"])
    return Setup(model, train, epochs=15, batch_size=32, validation=val, accuracy="accuracy")


@config("emb_masked_lstm_padded_logits_tfdata_es", "embedding/rnn/binary")
def _(seed):
    """Variable-length padded tokens, Embedding(mask_zero=True) + LSTM(16), logits + from_logits=True,
    Adam 5e-3, tf.data batch 32 with prefetch, EarlyStopping(3, min_delta 1e-3)."""
    x, y = padded_contains(np.random.default_rng(4200 + seed), 2400)
    (xt, yt), (xv, yv) = _split(x, y)
    model = keras.Sequential(
        [
            keras.Input((30,), dtype="int32"),
            keras.layers.Embedding(100, 16, mask_zero=True),
            keras.layers.LSTM(16),
            keras.layers.Dense(1),
        ]
    )
    loss = keras.losses.BinaryCrossentropy(from_logits=True)
    _compile(model, keras.optimizers.Adam(5e-3), loss, [keras.metrics.BinaryAccuracy(threshold=0.0)])
    return Setup(
        model,
        pipeline(xt, yt, 32, seed=seed),
        epochs=30,
        validation=pipeline(xv, yv, 256, shuffle=False),
        callbacks=[early_stopping(3, min_delta=1e-3)],
        accuracy="binary_accuracy",
    )


@config("emb_gap_sentiment_sgd_inverse_time_bs128_es", "embedding/binary")
def _(seed):
    """Sentiment tokens, Embedding + GAP + dropout, sigmoid, SGD 0.5 momentum 0.9 with inverse-time decay,
    batch 128, EarlyStopping(2, min_delta 1e-3)."""
    x, y = sentiment_tokens(np.random.default_rng(4300 + seed), 4000)
    train, val = _split(x, y)
    model = keras.Sequential(
        [
            keras.Input((30,), dtype="int32"),
            keras.layers.Embedding(300, 16),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    schedule = keras.optimizers.schedules.InverseTimeDecay(0.5, decay_steps=100, decay_rate=0.5)
    _compile(model, keras.optimizers.SGD(schedule, momentum=0.9), "binary_crossentropy", ["accuracy"])
    return Setup(
        model,
        train,
        epochs=40,
        batch_size=128,
        validation=val,
        callbacks=[early_stopping(2, min_delta=1e-3)],
        accuracy="accuracy",
    )


@config("emb_topics_onehot_two_inputs_adam", "embedding/multiclass")
def _(seed):
    """Two inputs (tokens + 4 standardised numbers) joined, softmax + categorical CE on one-hot labels,
    Adam 2e-3, batch 64, fixed 20 epochs, validation_split. Class = topic, shifted by the numbers' sign."""
    rng = np.random.default_rng(4400 + seed)
    tokens, topic = topic_tokens(rng, 2400, topics=3, vocab=300)
    numbers = rng.normal(size=(2400, 4)).astype("float32")
    y = keras.utils.to_categorical((topic + (numbers[:, 0] > 0)) % 3, 3)
    token_in = keras.Input((25,), dtype="int32", name="tokens")
    number_in = keras.Input((4,), name="numbers")
    pooled = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(300, 16)(token_in))
    h = keras.layers.Concatenate()([pooled, keras.layers.Dense(16, activation="relu")(number_in)])
    h = keras.layers.Dense(32, activation="relu")(h)
    model = keras.Model([token_in, number_in], keras.layers.Dense(3, activation="softmax")(h))
    _compile(model, keras.optimizers.Adam(2e-3), "categorical_crossentropy", ["accuracy"])
    return Setup(
        model,
        ({"tokens": tokens, "numbers": numbers}, y),
        epochs=20,
        batch_size=64,
        validation=0.2,
        accuracy="accuracy",
    )


# Harder cases for the rules: converged early, stopped by EarlyStopping, loss near 0, small batches,
# frozen layers, compiled steps, other input kinds --------------------------------------------
def blobs(rng: np.random.Generator, n: int, classes: int, features: int, spread: float = 4.0):
    """Gaussian class clusters, standardised (well separated when `spread` is large)."""
    centres = rng.normal(scale=spread / np.sqrt(features), size=(classes, features))
    y = rng.integers(0, classes, n)
    x = centres[y] + rng.normal(size=(n, features)) / np.sqrt(features)
    (x,) = _standardize(x)
    return x, y.astype("int32")


@config("mlp_easy_blobs_3_epochs_converged", "mlp/multiclass", seeds=2)
def _(seed):
    """Well-separated blobs, 4 classes: 100% accuracy within 2 epochs, so a 3-epoch budget is enough.
    Adam 1e-2, softmax + sparse CE, batch 32, validation_split."""
    x, y = blobs(np.random.default_rng(5000 + seed), 3000, 4, 8, spread=8.0)
    model = _compile(
        mlp(8, 4, (32,), output_activation="softmax"),
        keras.optimizers.Adam(1e-2),
        "sparse_categorical_crossentropy",
        ["accuracy"],
    )
    return Setup(model, (x, y), epochs=3, batch_size=32, validation=0.2, accuracy="accuracy")


@config("gru_small_data_es_stops_overfit", "rnn/binary", seeds=2)
def _(seed):
    """Only 600 sequences, GRU(32): validation loss turns up after a while and EarlyStopping(3,
    restore_best_weights) stops it, as intended. Adam 3e-3, batch 16."""
    x, y = sequence_sign(np.random.default_rng(5100 + seed), 600, length=15)
    train, val = _split(x, y, 0.3)
    model = keras.Sequential(
        [
            keras.Input((15, 1)),
            keras.layers.GRU(32),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    _compile(model, keras.optimizers.Adam(3e-3), "binary_crossentropy", ["accuracy"])
    return Setup(
        model, train, epochs=60, batch_size=16, validation=val, callbacks=[early_stopping(3)], accuracy="accuracy"
    )


@config("reg_linear_exact_adam_long_near_zero", "regression")
def _(seed):
    """Noise-free linear targets, linear model, Adam 1e-2 for 40 epochs at batch 16: the MSE sits near
    1e-8 with Adam's usual relative jitter around it. Nothing to fix."""
    x, y = linear_exact(np.random.default_rng(5200 + seed), 800, features=6, outputs=1)
    model = _compile(keras.Sequential([keras.Input((6,)), keras.layers.Dense(1)]), keras.optimizers.Adam(1e-2), "mse")
    return Setup(model, (x, y), epochs=40, batch_size=16, validation=0.2)


@config("mlp_deep_relu_he_adam_bs64", "mlp/regression")
def _(seed):
    """Six ReLU layers (He init), Friedman #1, MSE, Adam 1e-3, batch 64, EarlyStopping(4)."""
    x, y = friedman(np.random.default_rng(5300 + seed), 3000)
    train, val = _split(x, y)
    layers = [keras.Input((10,))]
    layers += [keras.layers.Dense(64, activation="relu", kernel_initializer="he_normal") for _ in range(6)]
    model = _compile(keras.Sequential([*layers, keras.layers.Dense(1)]), keras.optimizers.Adam(1e-3), "mse")
    return Setup(model, train, epochs=60, batch_size=64, validation=val, callbacks=[early_stopping(4)])


@config("mlp_deep_tanh_sgd_momentum_rings", "mlp/multiclass")
def _(seed):
    """Four tanh layers (Glorot init), four rings, logits + sparse CE, SGD 0.01 momentum 0.9, batch 32, 30 epochs.
    (At SGD 0.05 the loss blew up from 0.01 to 1.6 in epoch 9 and took 3 epochs to recover: a real instability.)"""
    x, y = rings(np.random.default_rng(5400 + seed), 2000, classes=4, noise=0.1)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model = _compile(
        mlp(2, 4, (64, 64, 64, 64), activation="tanh"), keras.optimizers.SGD(0.01, momentum=0.9), loss, ["accuracy"]
    )
    return Setup(model, (x, y), epochs=30, batch_size=32, validation=0.2, accuracy="accuracy")


@config("mlp_imbalanced_class_weight_auc", "mlp/binary")
def _(seed):
    """10% positives, class_weight to balance them, sigmoid + binary CE, AUC metric, Adam 1e-3, EarlyStopping(4)."""
    rng = np.random.default_rng(5500 + seed)
    x = rng.normal(size=(4000, 6)).astype("float32")
    score = x[:, 0] + 0.8 * x[:, 1] * x[:, 2] - 0.5 * x[:, 3] ** 2 + 0.3 * rng.normal(size=4000)
    y = (score > np.quantile(score, 0.9)).astype("float32")
    train, val = _split(x, y)
    model = _compile(
        mlp(6, 1, (32, 32), output_activation="sigmoid"),
        keras.optimizers.Adam(1e-3),
        "binary_crossentropy",
        ["auc", "accuracy"],
    )
    return Setup(
        model,
        train,
        epochs=60,
        batch_size=64,
        validation=val,
        callbacks=[early_stopping(4)],
        accuracy="accuracy",
        fit_kwargs={"class_weight": {0: 0.55, 1: 5.0}},
    )


@config("mlp_multilabel_sigmoid_rmsprop", "mlp/multilabel")
def _(seed):
    """Five independent yes/no labels, 5 sigmoid outputs + binary CE, RMSprop 1e-3, batch 64, 25 epochs."""
    rng = np.random.default_rng(5600 + seed)
    x = rng.normal(size=(3000, 10)).astype("float32")
    w = rng.normal(size=(10, 5))
    y = (np.tanh(x @ w / 2) + 0.3 * rng.normal(size=(3000, 5)) > 0).astype("float32")
    model = _compile(
        mlp(10, 5, (64, 32), output_activation="sigmoid"),
        keras.optimizers.RMSprop(1e-3),
        "binary_crossentropy",
        ["binary_accuracy"],
    )
    return Setup(model, (x, y), epochs=25, batch_size=64, validation=0.2, accuracy="binary_accuracy")


@config("mlp_20_classes_adam_bs128", "mlp/multiclass")
def _(seed):
    """20 Gaussian classes in 16 dimensions, softmax + sparse CE, Adam 2e-3, batch 128, 30 epochs."""
    x, y = blobs(np.random.default_rng(5700 + seed), 6000, 20, 16, spread=5.0)
    model = _compile(
        mlp(16, 20, (128, 64), output_activation="softmax"),
        keras.optimizers.Adam(2e-3),
        "sparse_categorical_crossentropy",
        ["accuracy"],
    )
    return Setup(model, (x, y), epochs=30, batch_size=128, validation=0.2, accuracy="accuracy")


@config("cnn_bars_jit_compile_steps_per_execution", "cnn/multiclass")
def _(seed):
    """CNN compiled with jit_compile=True and steps_per_execution=4, Adam 2e-3, logits, batch 32, 15 epochs."""
    x, y = bars(np.random.default_rng(5800 + seed), 1500)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model = _compile(
        cnn((12, 12, 1), 4), keras.optimizers.Adam(2e-3), loss, ["accuracy"], jit_compile=True, steps_per_execution=4
    )
    return Setup(model, (x, y), epochs=15, batch_size=32, validation=0.2, accuracy="accuracy")


@config("cnn_frozen_pretrained_base_new_head", "cnn/multiclass")
def _(seed):
    """Transfer learning: a conv base first trained (without the callback) on gratings, then frozen;
    only a new head is trained on the bars task with the callback. Adam 3e-3, batch 32, 15 epochs."""
    rng = np.random.default_rng(5900 + seed)
    base = keras.Sequential(
        [
            keras.Input((16, 16, 1)),
            keras.layers.Conv2D(16, 3, activation="relu", padding="same"),
            keras.layers.Conv2D(32, 3, activation="relu", padding="same"),
            keras.layers.GlobalMaxPooling2D(),
        ]
    )
    xs, ys = stripes(rng, 1000)
    pretrain = keras.Sequential([base, keras.layers.Dense(3)])
    pretrain.compile(keras.optimizers.Adam(3e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    pretrain.fit(xs, ys, epochs=3, batch_size=32, verbose=0)
    base.trainable = False
    x, y = bars(rng, 1500, size=16)
    model = keras.Sequential(
        [
            keras.Input((16, 16, 1)),
            base,
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(4, activation="softmax"),
        ]
    )
    _compile(model, keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", ["accuracy"])
    return Setup(model, (x, y), epochs=15, batch_size=32, validation=0.2, accuracy="accuracy")


class ShuffledBatches(keras.utils.PyDataset):
    """A keras.utils.PyDataset over arrays that reshuffles every epoch."""

    def __init__(self, x, y, batch_size: int, seed: int, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size = x, y, batch_size
        self.rng = np.random.default_rng(seed)
        self.order = self.rng.permutation(len(y))

    def __len__(self):
        return math.ceil(len(self.y) / self.batch_size)

    def __getitem__(self, index):
        rows = self.order[index * self.batch_size : (index + 1) * self.batch_size]
        return self.x[rows], self.y[rows]

    def on_epoch_end(self):
        self.order = self.rng.permutation(len(self.y))


@config("reg_pydataset_multi_target_nadam", "regression")
def _(seed):
    """Three smooth targets fed by a keras.utils.PyDataset (batch 50), MSE, Nadam 2e-3, validation arrays, 25 epochs."""
    x, y = multi_target(np.random.default_rng(6000 + seed), 3000)
    (xt, yt), val = _split(x, y)
    model = _compile(mlp(8, 3, (64, 64)), keras.optimizers.Nadam(2e-3), "mse")
    return Setup(model, ShuffledBatches(xt, yt, 50, seed), epochs=25, validation=val)


@config("mlp_tfdata_repeat_steps_per_epoch_validation_freq", "mlp/multiclass")
def _(seed):
    """tf.data .repeat() with steps_per_epoch=40, validation every 2nd epoch, one-hot + categorical CE
    from logits, Adam 2e-3, batch 32, 30 epochs."""
    x, y = rings(np.random.default_rng(6100 + seed), 2000, classes=3, noise=0.2)
    onehot = keras.utils.to_categorical(y, 3)
    (xt, yt), (xv, yv) = _split(x, onehot)
    train = (
        tf.data.Dataset.from_tensor_slices((xt, yt))
        .cache()
        .shuffle(len(yt), seed=seed)
        .repeat()
        .batch(32)
        .prefetch(AUTOTUNE)
    )
    loss = keras.losses.CategoricalCrossentropy(from_logits=True)
    model = _compile(mlp(2, 3, (32, 32)), keras.optimizers.Adam(2e-3), loss, ["accuracy"])
    return Setup(
        model,
        train,
        epochs=30,
        validation=pipeline(xv, yv, 256, shuffle=False),
        accuracy="accuracy",
        fit_kwargs={"steps_per_epoch": 40, "validation_freq": 2},
    )


@config("reg_friedman_bs8_sgd_noisy_batches", "regression")
def _(seed):
    """Batch 8 (noisy per-batch losses), Friedman #1 with extra noise, MSE, SGD 5e-3 momentum 0.9, 8 epochs."""
    x, y = friedman(np.random.default_rng(6200 + seed), 3000, noise=2.0)
    model = _compile(mlp(10, 1, (64, 32)), keras.optimizers.SGD(5e-3, momentum=0.9), "mse")
    return Setup(model, (x, y), epochs=8, batch_size=8, validation=0.2)


# Healthy runs that look like the faults of bench/learn_less_zoo.py (team issue 36): few steps on a
# small data set, EarlyStopping on a converged run, an imbalanced set whose minority is learned,
# label smoothing, strong but appropriate regularisation ------------------------------------------
@config("learnless_small_data_few_steps_converged", "mlp/multiclass", seeds=2)
def _(seed):
    """240 samples in batches of 64 for 20 epochs (80 optimizer steps): an easy task, converged."""
    x, y = blobs(np.random.default_rng(7000 + seed), 300, 3, 6, spread=8.0)
    train, val = _split(x, y)
    model = _compile(
        mlp(6, 3, (32,)),
        keras.optimizers.Adam(3e-2),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        ["accuracy"],
    )
    return Setup(model, train, epochs=20, batch_size=64, validation=val, accuracy="accuracy")


@config("learnless_full_batch_lbfgs_like_converged", "regression", seeds=2)
def _(seed):
    """Full-batch training of a small linear problem (500 samples, batch 500, 60 steps), Adam 0.1: converged."""
    x, y = linear_exact(np.random.default_rng(7100 + seed), 500, features=4, outputs=1)
    train, val = _split(x, y)
    model = _compile(keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)]), keras.optimizers.Adam(0.1), "mse")
    return Setup(model, train, epochs=60, batch_size=500, validation=val)


@config("learnless_es_patience1_converged", "mlp/binary", seeds=2)
def _(seed):
    """EarlyStopping(patience=1, min_delta=1e-3) on two moons: it stops a run that has converged."""
    x, y = moons(np.random.default_rng(7200 + seed), 1500, noise=0.1)
    train, val = _split(x, y)
    model = _compile(
        mlp(2, 1, (32, 32), output_activation="sigmoid"),
        keras.optimizers.Adam(1e-2),
        "binary_crossentropy",
        ["accuracy"],
    )
    stop = keras.callbacks.EarlyStopping(monitor="val_loss", patience=1, min_delta=1e-3, restore_best_weights=True)
    return Setup(model, train, epochs=100, batch_size=32, validation=val, callbacks=[stop], accuracy="accuracy")


@config("learnless_imbalanced_minority_learned", "mlp/binary", seeds=2)
def _(seed):
    """88% negatives, but the positives are well separated: the minority is learned (accuracy ~99%)."""
    rng = np.random.default_rng(7300 + seed)
    y = (rng.random(2000) < 0.12).astype("float32")
    x = (rng.normal(size=(2000, 6)) + 2.5 * y[:, None]).astype("float32")
    train, val = _split(x, y)
    model = _compile(
        mlp(6, 1, (32,), output_activation="sigmoid"), keras.optimizers.Adam(3e-3), "binary_crossentropy", ["accuracy"]
    )
    return Setup(model, train, epochs=20, batch_size=32, validation=val, accuracy="accuracy")


@config("learnless_label_smoothing", "mlp/multiclass", seeds=2)
def _(seed):
    """One-hot labels with label_smoothing=0.2: the loss floor sits well above 0, accuracy near 100%."""
    x, y = rings(np.random.default_rng(7400 + seed), 2000, classes=3, noise=0.15)
    onehot = keras.utils.to_categorical(y, 3)
    train, val = _split(x, onehot)
    loss = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.2)
    model = _compile(mlp(2, 3, (64, 64)), keras.optimizers.Adam(3e-3), loss, ["accuracy"])
    return Setup(model, train, epochs=30, batch_size=32, validation=val, accuracy="accuracy")


@config("learnless_strong_regularisation_fits", "mlp/multiclass", seeds=2)
def _(seed):
    """Dropout 0.6 after each of two wide layers plus L2(1e-3): strong, but the model still learns well."""
    x, y = blobs(np.random.default_rng(7500 + seed), 2000, 5, 10, spread=4.0)
    train, val = _split(x, y)
    l2 = keras.regularizers.L2(1e-3)
    model = keras.Sequential(
        [
            keras.Input((10,)),
            keras.layers.Dense(256, activation="relu", kernel_regularizer=l2),
            keras.layers.Dropout(0.6),
            keras.layers.Dense(256, activation="relu", kernel_regularizer=l2),
            keras.layers.Dropout(0.6),
            keras.layers.Dense(5),
        ]
    )
    _compile(
        model, keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"]
    )
    return Setup(model, train, epochs=30, batch_size=32, validation=val, accuracy="accuracy")


@config("learnless_l2_0p1_regression_fits", "regression", seeds=1)
def _(seed):
    """L2(0.1) on the output layer of a Friedman MLP only: a large factor on one small layer, still learns."""
    x, y = friedman(np.random.default_rng(7600 + seed), 2000)
    train, val = _split(x, y)
    model = keras.Sequential(
        [
            keras.Input((10,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(1, kernel_regularizer=keras.regularizers.L2(0.1)),
        ]
    )
    _compile(model, keras.optimizers.Adam(2e-3), "mse")
    return Setup(model, train, epochs=40, batch_size=32, validation=val)


# Healthy runs that look like issue 36's label faults: training and validation class shares apart
# (a small random split; a training set balanced on purpose against a natural validation set), and
# inputs that repeat (copies with their own label; categorical inputs whose outcomes are noisy) ------
def imbalanced_blobs(rng: np.random.Generator, n: int, shares: list[float], features: int, spread: float = 4.0):
    """`blobs` whose classes are drawn with the given shares."""
    centres = rng.normal(scale=spread / np.sqrt(features), size=(len(shares), features))
    y = rng.choice(len(shares), n, p=shares)
    x = centres[y] + rng.normal(size=(n, features)) / np.sqrt(features)
    (x,) = _standardize(x)
    return x, y.astype("int32")


def _sparse_classifier(inputs: int, classes: int, hidden=(32, 32), rate: float = 3e-3):
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return _compile(mlp(inputs, classes, hidden), keras.optimizers.Adam(rate), loss, ["accuracy"])


@config("labels_small_random_split_shares_differ", "mlp/multiclass", seeds=2)
def _(seed):
    """200 overlapping samples of 4 classes, a random 20% split: 40 validation labels whose class shares
    differ from training by chance (~0.1 apart), validation accuracy 5-10 points below training, and
    EarlyStopping(patience=5, restore_best_weights=True) before it overfits."""
    x, y = blobs(np.random.default_rng(7700 + seed), 200, 4, 6, spread=1.5)
    train, val = _split(x, y)
    model, stop = _sparse_classifier(6, 4, (64, 64)), early_stopping(5)
    return Setup(model, train, epochs=40, batch_size=16, validation=val, callbacks=[stop], accuracy="accuracy")


@config("labels_balanced_training_natural_validation", "mlp/multiclass", seeds=2)
def _(seed):
    """A training set balanced on purpose (each class down-sampled to the smallest) against a validation
    set with the natural 80/12/8 mix: the shares are ~0.47 apart, the classes overlap, and the model
    learns each about equally well (validation accuracy 3-4 points below training); EarlyStopping(patience=3)."""
    x, y = imbalanced_blobs(np.random.default_rng(7800 + seed), 6000, [0.8, 0.12, 0.08], 8, spread=1.0)
    (xt, yt), val = _split(x, y)
    smallest = np.bincount(yt).min()
    rng = np.random.default_rng(seed)
    keep = np.sort(np.concatenate([rng.choice(np.flatnonzero(yt == k), smallest, replace=False) for k in range(3)]))
    model, stop = _sparse_classifier(8, 3), early_stopping(3)
    train = (xt[keep], yt[keep])
    return Setup(model, train, epochs=30, batch_size=32, validation=val, callbacks=[stop], accuracy="accuracy")


@config("labels_imbalanced_stratified_split", "mlp/multiclass", seeds=2)
def _(seed):
    """75/17/8 classes on both sides of a stratified split: imbalanced, but the same mix in validation."""
    x, y = imbalanced_blobs(np.random.default_rng(7900 + seed), 3000, [0.75, 0.17, 0.08], 8, spread=1.5)
    val_rows = np.concatenate([np.flatnonzero(y == k)[: int(0.2 * (y == k).sum())] for k in range(3)])
    is_val = np.zeros(len(y), bool)
    is_val[val_rows] = True
    model = _sparse_classifier(8, 3)
    train, val = (x[~is_val], y[~is_val]), (x[is_val], y[is_val])
    return Setup(model, train, epochs=25, batch_size=32, validation=val, accuracy="accuracy")


@config("labels_minority_oversampled_copies_agree", "mlp/binary", seeds=2)
def _(seed):
    """The positives (10%) copied until they are 40% of the training set (random over-sampling): many
    exact duplicate rows, every copy with its own label."""
    rng = np.random.default_rng(8000 + seed)
    y = (rng.random(3000) < 0.1).astype("float32")
    x = (rng.normal(size=(3000, 6)) + 1.5 * y[:, None]).astype("float32")
    (xt, yt), val = _split(x, y)
    positives = np.flatnonzero(yt == 1)
    copies = rng.choice(positives, int(0.6 * (yt == 0).sum()) - positives.size, replace=True)
    order = rng.permutation(len(yt) + copies.size)
    xt, yt = np.concatenate([xt, xt[copies]])[order], np.concatenate([yt, yt[copies]])[order]
    model = _compile(
        mlp(6, 1, (32,), output_activation="sigmoid"), keras.optimizers.Adam(3e-3), "binary_crossentropy", ["accuracy"]
    )
    return Setup(model, (xt, yt), epochs=20, batch_size=32, validation=val, accuracy="accuracy")


@config("labels_categorical_inputs_noisy_outcomes", "mlp/binary", seeds=2)
def _(seed):
    """Six yes/no features (64 possible inputs) and an outcome that depends on them with noise: the same
    input often has both outcomes (the data's Bayes error, ~15%), so training accuracy is capped by nature."""
    rng = np.random.default_rng(8100 + seed)
    x = rng.integers(0, 2, size=(3000, 6)).astype("float32")
    score = x @ np.array([1.5, -1.0, 1.0, 0.8, -0.6, 0.4]) - 1.0
    y = (rng.random(3000) < 1 / (1 + np.exp(-3 * score))).astype("float32")
    model = _compile(
        mlp(6, 1, (16,), output_activation="sigmoid"), keras.optimizers.Adam(3e-3), "binary_crossentropy", ["accuracy"]
    )
    return Setup(model, (x, y), epochs=20, batch_size=32, validation=0.2, accuracy="accuracy")


# -- running and judging ------------------------------------------------------------------------
def _initial_loss(setup: Setup) -> float:
    """The untrained model's loss on (up to 1024 samples of) the training data."""
    if isinstance(setup.train, tf.data.Dataset):
        result = setup.model.evaluate(setup.train.take(16), verbose=0, return_dict=True)
    elif not isinstance(setup.train, tuple):  # a PyDataset
        result = setup.model.evaluate(setup.train, steps=min(16, len(setup.train)), verbose=0, return_dict=True)
    else:
        x, y = setup.train
        x = {k: v[:1024] for k, v in x.items()} if isinstance(x, dict) else x[:1024]
        result = setup.model.evaluate(x, y[:1024], batch_size=256, verbose=0, return_dict=True)
    return float(result["loss"])


def _fit(setup: Setup, log_dir: str, seed: int) -> keras.callbacks.History:
    callbacks = [HealthCallback(log_dir=log_dir, verbose=False), *setup.callbacks]
    kwargs: dict[str, Any] = {"epochs": setup.epochs, "callbacks": callbacks, "verbose": 0, **setup.fit_kwargs}
    if isinstance(setup.validation, float):
        kwargs["validation_split"] = setup.validation
    elif setup.validation is not None:  # (x, y) or a Dataset
        kwargs["validation_data"] = setup.validation
    if not isinstance(setup.train, tuple):  # a Dataset or PyDataset shuffles itself
        return setup.model.fit(setup.train, shuffle=False, **kwargs)
    x, y = setup.train
    return setup.model.fit(x, y, batch_size=setup.batch_size, shuffle=True, **kwargs)


def _diagnose(root: str) -> list:
    reader = SignalReader(open_logdir(root))
    findings = []
    for group in reader.groups():
        findings += engine.diagnose(reader.read(group))
    return findings


def _last(history: dict, key: str | None) -> float | None:
    values = history.get(key) if key else None
    return float(values[-1]) if values else None


def run_one(cfg: Config, seed: int, base: str) -> dict[str, Any]:
    name = f"{cfg.name}-s{seed}"
    root = os.path.join(base, name)
    result: dict[str, Any] = {"run": name, "config": cfg.name, "kind": cfg.kind, "seed": seed}
    started = time.perf_counter()
    try:
        keras.utils.set_random_seed(seed)
        setup = cfg.make(seed)
        initial = _initial_loss(setup)
        history = _fit(setup, os.path.join(root, "run"), seed).history
    except Exception as err:  # one broken config must not stop the sweep
        result.update(
            error=f"{type(err).__name__}: {err}",
            traceback=traceback.format_exc(),
            seconds=time.perf_counter() - started,
        )
        return result
    result["seconds"] = time.perf_counter() - started
    final = _last(history, "loss")
    val_losses = history.get("val_loss") or []
    result.update(
        epochs_run=len(history.get("loss", [])),
        epochs_max=setup.epochs,
        initial_loss=initial,
        final_loss=final,
        final_accuracy=_last(history, setup.accuracy),
        final_val_loss=_last(history, "val_loss"),
        best_val_loss=float(min(val_losses)) if val_losses else None,
        final_val_accuracy=_last(history, f"val_{setup.accuracy}" if setup.accuracy else None),
        stopped_early=len(history.get("loss", [])) < setup.epochs,
    )
    result["learned"] = final is not None and math.isfinite(final) and final <= LEARNED_RATIO * initial
    try:
        findings = _diagnose(root)
    except Exception as err:
        result.update(error=f"diagnose failed: {type(err).__name__}: {err}", traceback=traceback.format_exc())
        return result
    result["findings"] = [f.to_dict() for f in findings]
    result["loud"] = [f.to_dict() for f in findings if f.severity >= Severity.WARNING]
    result["info_codes"] = sorted({f.code for f in findings if f.severity < Severity.WARNING})
    return result


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def print_result(index: int, total: int, r: dict[str, Any]) -> None:
    head = f"[{index:2d}/{total}] {r['run']:58} {r.get('seconds', 0):5.1f}s"
    if "initial_loss" not in r:
        lines = [line for line in r["error"].splitlines() if line.strip()]
        print(f"{head}  FAILED {' '.join(lines[:2])[:300]}  (traceback in --json)")
        return
    verdict = "LEARNED" if r["learned"] else "NOT LEARNED"
    line = (
        f"{head}  ep {r['epochs_run']}/{r['epochs_max']}{' (stopped)' if r['stopped_early'] else ''}"
        f"  loss {_fmt(r['initial_loss'])}->{_fmt(r['final_loss'])} acc {_fmt(r['final_accuracy'], 3)}"
        f"  val_loss {_fmt(r['final_val_loss'])} (best {_fmt(r['best_val_loss'])}) val_acc {_fmt(r['final_val_accuracy'], 3)}"
        f"  {verdict}"
    )
    print(line)
    if "error" in r:
        print(f"    ERROR {r['error'].splitlines()[0]}  (traceback in --json)")
        return
    for f in r["loud"]:
        print(f"    [{f['severity']}] {f['code']} @{f['step']}: {f['title']}")
        print(f"        {f['detail']}")
    if r["info_codes"]:
        print(f"    (info: {', '.join(r['info_codes'])})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only", default=None, help="run only configs whose name contains this substring (several: a,b)"
    )
    parser.add_argument(
        "--seeds", type=int, default=None, help="seeds 0..N-1 for every config (default: each config's own)"
    )
    parser.add_argument("--list", action="store_true", help="list the runs and exit")
    parser.add_argument("--json", default=None, metavar="PATH", help="write every run's results and findings here")
    parser.add_argument("--keep", default=None, metavar="DIR", help="keep the logdirs under DIR (default: a temp dir)")
    args = parser.parse_args(argv)

    runs = [
        (cfg, seed)
        for cfg in CONFIGS
        if not args.only or any(part in cfg.name for part in args.only.split(","))
        for seed in range(args.seeds if args.seeds is not None else cfg.seeds)
    ]
    if args.list:
        for cfg, seed in runs:
            print(f"{cfg.name + '-s' + str(seed):58} {cfg.kind:22} {cfg.note}")
        print(f"{len(runs)} runs")
        return 0
    if not runs:
        print("no run matches", file=sys.stderr)
        return 2

    base = args.keep or tempfile.mkdtemp(prefix="healthy_sweep_")
    os.makedirs(base, exist_ok=True)
    started = time.perf_counter()
    results = []
    try:
        for index, (cfg, seed) in enumerate(runs, 1):
            r = run_one(cfg, seed, base)
            results.append(r)
            print_result(index, len(runs), r)
            sys.stdout.flush()
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    total_seconds = time.perf_counter() - started

    trained = [r for r in results if "findings" in r]
    loud = [r for r in trained if r["loud"]]
    failed = [r["run"] for r in results if "findings" not in r]
    not_learned = [r["run"] for r in trained if not r["learned"]]
    per_code = Counter(f["code"] for r in loud for f in r["loud"])
    runs_per_code = Counter(code for r in loud for code in {f["code"] for f in r["loud"]})
    print()
    print(f"healthy runs with a warning or critical finding: {len(loud)} of {len(trained)}")
    for code, count in per_code.most_common():
        print(f"    {code}: {count} finding(s) in {runs_per_code[code]} run(s)")
    if failed:
        print(f"runs that failed to train or be diagnosed: {len(failed)}: {', '.join(failed)}")
    if not_learned:
        print(f"runs that did not learn (config bug): {len(not_learned)}: {', '.join(not_learned)}")
    print(f"total {total_seconds:.0f}s for {len(results)} runs" + (f"; logdirs kept in {base}" if args.keep else ""))
    if args.json:
        summary = {
            "healthy_runs_with_warning_or_critical": len(loud),
            "runs_diagnosed": len(trained),
            "per_code": dict(per_code),
            "failed": failed,
            "not_learned": not_learned,
            "seconds": total_seconds,
        }
        with open(args.json, "w") as out:
            json.dump({"summary": summary, "runs": results}, out, indent=2, default=str)
    return 0 if not loud and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
