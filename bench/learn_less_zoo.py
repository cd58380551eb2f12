"""Runs that train without an error but learn far less than they could (team issue 36).

Each broken run has a healthy twin that differs in exactly one setting (the fault). For each
pair the zoo trains both with HealthCallback, checks in numbers that the broken run really
learns less (its validation accuracy, or for regression its validation loss, against the
twin's), diagnoses both, and scores: found (a warning/critical finding on the broken run),
primary cause named (the worst finding's code is one the case names, and its text names
the cause where the case asks for words), twin quiet (no warning/critical on the twin).

Fault classes: 1 labels wrong, 2 too little training, 3 hyperparameters that freeze or
wreck learning, 4 instability on a loss still large, 5 an info finding that is the cause.
Usage: python bench/learn_less_zoo.py [--seeds 1] [--only NAME[,NAME]] [--verbose]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import keras
import numpy as np

from tb_trainhealth import HealthCallback, engine
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader

SPARSE_CE = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
# The broken run must be at least this much worse than its twin (validation accuracy points,
# or this share of the twin's validation loss for regression): it really learns less.
ACCURACY_GAP = 0.05
LOSS_GAP = 0.25


# -- data -------------------------------------------------------------------------------------
def blobs(n: int, features: int, classes: int, seed: int, noise: float = 1.0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=1.6, size=(classes, features))
    y = rng.integers(0, classes, size=n)
    x = centers[y] + rng.normal(scale=noise, size=(n, features))
    return x.astype("float32"), y.astype("int32")


def two_gaussians(n: int, features: int, seed: int, distance: float = 2.0):
    """Two classes, unit-variance Gaussians `distance` apart along a random direction (the same
    difficulty for every seed: the best possible accuracy is Phi(distance / 2), 0.84 at 2.0)."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=features)
    y = rng.integers(0, 2, size=n)
    x = rng.normal(size=(n, features)) + np.outer(y - 0.5, direction / np.linalg.norm(direction) * distance)
    return x.astype("float32"), y.astype("float32")


def quadrant_images(n: int, seed: int, classes: int = 4, size: int = 12, patch: float = 0.6):
    """Class = which quadrant holds a faint bright patch (`patch` above the noise's 0.5 std)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, size=n)
    x = rng.normal(scale=0.5, size=(n, size, size, 1))
    half = size // 2
    for i, label in enumerate(y):
        r, c = divmod(int(label), 2)
        x[i, r * half : (r + 1) * half, c * half : (c + 1) * half, 0] += patch
    return x.astype("float32"), y.astype("int32")


def smooth_regression(n: int, features: int, seed: int, noise: float = 0.1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features))
    w = rng.normal(size=(features,))
    y = np.sin(x @ w / np.linalg.norm(w)) + 0.5 * np.tanh(x[:, 0] * x[:, 1]) + noise * rng.normal(size=n)
    return x.astype("float32"), y.astype("float32")


def split(x: np.ndarray, y: np.ndarray, fraction: float = 0.25):
    cut = int(len(y) * (1 - fraction))
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


# -- models -----------------------------------------------------------------------------------
def mlp(inputs: int, outputs: int, hidden=(32, 32), dropout: float = 0.0, l2: float = 0.0):
    layers: list[Any] = [keras.Input((inputs,))]
    regularizer = keras.regularizers.L2(l2) if l2 else None
    for units in hidden:
        layers.append(keras.layers.Dense(units, activation="relu", kernel_regularizer=regularizer))
        if dropout:
            layers.append(keras.layers.Dropout(dropout))
    layers.append(keras.layers.Dense(outputs, kernel_regularizer=regularizer))
    return keras.Sequential(layers)


def cnn(classes: int, size: int = 12, dropout: float = 0.0):
    return keras.Sequential(
        [
            keras.Input((size, size, 1)),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            *([keras.layers.Dropout(dropout)] if dropout else []),
            keras.layers.Dense(classes),
        ]
    )


# -- cases --------------------------------------------------------------------------------------
@dataclasses.dataclass
class Setup:
    model: keras.Model
    train: tuple[np.ndarray, np.ndarray]
    validation: tuple[np.ndarray, np.ndarray]
    epochs: int
    batch_size: int = 32
    callbacks: list = dataclasses.field(default_factory=list)
    regression: bool = False
    keras_tensorboard_only: bool = False  # logged by keras.callbacks.TensorBoard alone (epoch points)
    # Judged on the best validation loss, not accuracy: a fault that costs confidence more than the
    # argmax (conflicting duplicates: a random other label on a copy leaves the majority label right).
    judged_on_loss: bool = False


@dataclasses.dataclass
class Case:
    name: str
    fault: int  # the fault class, 1-5
    make: Callable[[int, bool], Setup]  # (seed, broken) -> the run
    primary: tuple[str, ...]  # the worst finding's code must be one of these
    words: tuple[str, ...] = ()  # ...and its title or detail must say one of these (lower case)
    # The answer is a note (info) by design: a run that ran the epochs it was given and was still
    # improving is not broken (rules/undertrained.py's docstring says why, issue 44). Found and
    # named when an info finding of a primary code says the words; still counted apart below.
    note: bool = False


CASES: list[Case] = []


def case(name: str, fault: int, primary: tuple[str, ...], words: tuple[str, ...] = (), note: bool = False):
    def register(make: Callable[[int, bool], Setup]) -> Callable[[int, bool], Setup]:
        CASES.append(Case(name, fault, make, primary, words, note))
        return make

    return register


def _compiled(model, optimizer, loss=SPARSE_CE, metrics=("accuracy",)):
    model.compile(optimizer=optimizer, loss=loss, metrics=list(metrics))
    return model


def _noisy_labels(y: np.ndarray, classes: int, share: float, seed: int) -> np.ndarray:
    """`share` of the labels replaced by random classes (a join or annotation bug)."""
    rng = np.random.default_rng(seed + 7)
    y = y.copy()
    wrong = rng.random(len(y)) < share
    y[wrong] = rng.integers(0, classes, wrong.sum())
    return y


# 1. Labels wrong for much of the data --------------------------------------------------------
@case("labels_shuffled_mlp", 1, ("label_problem",))
def _(seed, broken):
    """80% of the training labels random (validation clean): training climbs, validation at chance."""
    x, y = blobs(1600, 10, 4, seed)
    (xt, yt), val = split(x, y)
    if broken:
        yt = np.random.default_rng(seed).permutation(yt)
    model = _compiled(mlp(10, 4, (128, 128), l2=1e-4), keras.optimizers.Adam(2e-3))
    return Setup(model, (xt, yt), val, epochs=20)


@case("labels_shuffled_cnn", 1, ("label_problem", "loss_plateau"), ("label",))
def _(seed, broken):
    x, y = quadrant_images(900, seed)
    (xt, yt), val = split(x, y)
    if broken:
        yt = np.random.default_rng(seed).permutation(yt)
    model = _compiled(cnn(4), keras.optimizers.Adam(3e-3))
    return Setup(model, (xt, yt), val, epochs=25)


@case("labels_one_class_mlp", 1, ("label_problem",), ("validation", "class"))
def _(seed, broken):
    """A filter bug keeps 97% class 0 in training; validation keeps the true (balanced) mix."""
    x, y = blobs(4000, 10, 3, seed, noise=2.2)
    (xt, yt), val = split(x, y)
    if broken:
        keep = (yt == 0) | (np.random.default_rng(seed).random(len(yt)) < 0.015)
        xt, yt = xt[keep], yt[keep]
    else:  # the same number of training samples, the true mix
        keep = np.random.default_rng(seed).random(len(yt)) < 0.35
        xt, yt = xt[keep], yt[keep]
    model = _compiled(mlp(10, 3), keras.optimizers.Adam(1e-3))
    return Setup(model, (xt, yt), val, epochs=15)


def _same_size_subset(x: np.ndarray, y: np.ndarray, size: int, seed: int):
    """A random `size` of the samples: the healthy twin of a filter that kept `size` of them."""
    keep = np.sort(np.random.default_rng(seed + 11).choice(len(y), size, replace=False))
    return x[keep], y[keep]


@case("train_class_filtered_mlp", 1, ("label_problem",), ("class shares",))
def _(seed, broken):
    """`x_train = x[y != 3]`: a filter meant for something else drops class 3 from training only."""
    x, y = blobs(2400, 10, 4, seed, noise=1.2)
    (xt, yt), val = split(x, y)
    keep = yt != 3
    xt, yt = (xt[keep], yt[keep]) if broken else _same_size_subset(xt, yt, int(keep.sum()), seed)
    model = _compiled(mlp(10, 4), keras.optimizers.Adam(1e-3))
    return Setup(model, (xt, yt), val, epochs=15)


@case("train_join_drops_classes_cnn", 1, ("label_problem",), ("class shares",))
def _(seed, broken):
    """A join that keeps 8% of classes 2 and 3 in training: 46/46/4/4% against a balanced validation set."""
    x, y = quadrant_images(1600, seed, patch=0.25)
    (xt, yt), val = split(x, y)
    keep = (yt < 2) | (np.random.default_rng(seed).random(len(yt)) < 0.08)
    xt, yt = (xt[keep], yt[keep]) if broken else _same_size_subset(xt, yt, int(keep.sum()), seed)
    model = _compiled(cnn(4), keras.optimizers.Adam(3e-3))
    return Setup(model, (xt, yt), val, epochs=20)


@case("train_positives_thinned_binary", 1, ("label_problem",), ("class shares", "class mix"))
def _(seed, broken):
    """A join keeps 15% of the positive training rows (50% -> 13% positives); validation stays 50/50."""
    x, y = two_gaussians(3000, 8, seed)
    (xt, yt), val = split(x, y)
    keep = (yt == 0) | (np.random.default_rng(seed).random(len(yt)) < 0.15)
    xt, yt = (xt[keep], yt[keep]) if broken else _same_size_subset(xt, yt, int(keep.sum()), seed)
    model = _compiled(mlp(8, 1), keras.optimizers.Adam(1e-3), keras.losses.BinaryCrossentropy(from_logits=True))
    return Setup(model, (xt, yt), val, epochs=15)


def _duplicate_rows(x: np.ndarray, y: np.ndarray, share: float, classes: int, conflicting: bool, seed: int):
    """`share` of the rows appended once more (a join that matched them twice), with a random other
    label (`conflicting`) or their own."""
    rng = np.random.default_rng(seed + 13)
    rows = rng.choice(len(y), int(len(y) * share), replace=False)
    labels = (y[rows] + rng.integers(1, classes, rows.size)) % classes if conflicting else y[rows]
    order = rng.permutation(len(y) + rows.size)
    return np.concatenate([x, x[rows]])[order], np.concatenate([y, labels.astype(y.dtype)])[order]


@case("conflicting_duplicates_mlp", 1, ("label_problem",), ("duplicate",))
def _(seed, broken):
    """40% of the training rows twice, the copy with a random other label; the twin's copies agree."""
    x, y = blobs(1600, 10, 4, seed, noise=1.6)
    (xt, yt), val = split(x, y)
    xt, yt = _duplicate_rows(xt, yt, 0.4, 4, broken, seed)
    model = _compiled(mlp(10, 4, l2=1e-3), keras.optimizers.Adam(2e-3))
    return Setup(model, (xt, yt), val, epochs=15, judged_on_loss=True)


@case("conflicting_duplicates_cnn", 1, ("label_problem",), ("duplicate",))
def _(seed, broken):
    x, y = quadrant_images(1200, seed, patch=0.25)
    (xt, yt), val = split(x, y)
    xt, yt = _duplicate_rows(xt, yt, 0.5, 4, broken, seed)
    model = _compiled(cnn(4), keras.optimizers.Adam(3e-3))
    return Setup(model, (xt, yt), val, epochs=20, judged_on_loss=True)


# 2. Too little training --------------------------------------------------------------------
@case("few_epochs_mlp", 2, ("undertrained",), ("epoch", "still"), note=True)
def _(seed, broken):
    """3 epochs where 30 are needed."""
    x, y = blobs(2000, 12, 6, seed, noise=1.4)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(12, 6), keras.optimizers.Adam(3e-4))
    return Setup(model, (xt, yt), val, epochs=3 if broken else 30)


@case("full_batch_cnn", 2, ("undertrained",), ("step", "batch"))
def _(seed, broken):
    """A batch the size of the data set: 12 optimizer steps in all."""
    x, y = quadrant_images(800, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(cnn(4), keras.optimizers.Adam(3e-3))
    return Setup(model, (xt, yt), val, epochs=12 if broken else 25, batch_size=len(yt) if broken else 32)


@case("cut_short_regression", 2, ("undertrained",), ("epoch", "still"), note=True)
def _(seed, broken):
    x, y = smooth_regression(2400, 8, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(8, 1, (64, 64)), keras.optimizers.Adam(2e-4), "mse", ())
    return Setup(model, (xt, yt), val, epochs=4 if broken else 40, regression=True)


@case("early_stopping_patience0_mlp", 2, ("undertrained",), ("earlystopping", "patience"))
def _(seed, broken):
    """EarlyStopping(monitor='val_accuracy', patience=0): the first epoch whose accuracy ties ends the run."""
    x, y = blobs(1500, 12, 6, seed, noise=1.8)
    (xt, yt), val = split(x, y, 0.1)
    model = _compiled(mlp(12, 6, (64,)), keras.optimizers.SGD(1e-3, momentum=0.5))
    stop = keras.callbacks.EarlyStopping(monitor="val_accuracy", patience=0 if broken else 5, restore_best_weights=True)
    return Setup(model, (xt, yt), val, epochs=60, callbacks=[stop])


@case("early_stopping_min_delta_regression", 2, ("undertrained",), ("earlystopping", "min_delta"))
def _(seed, broken):
    """min_delta=0.05 on a validation loss that gains ~0.01 an epoch."""
    x, y = smooth_regression(2000, 8, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(8, 1, (64, 64)), keras.optimizers.Adam(3e-4), "mse", ())
    stop = keras.callbacks.EarlyStopping(
        monitor="val_loss", patience=2, min_delta=0.05 if broken else 0.0, restore_best_weights=True
    )
    return Setup(model, (xt, yt), val, epochs=50, callbacks=[stop], regression=True)


# 3. Hyperparameters that freeze or wreck learning -----------------------------------------------
@case("lr_tiny_mlp", 3, ("loss_plateau", "undertrained"), ("learning rate",))
def _(seed, broken):
    x, y = blobs(1600, 10, 4, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(10, 4), keras.optimizers.Adam(3e-6 if broken else 1e-3))
    return Setup(model, (xt, yt), val, epochs=15)


@case("lr_tiny_regression_sgd", 3, ("loss_plateau", "undertrained"), ("learning rate",))
def _(seed, broken):
    x, y = smooth_regression(2000, 8, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(8, 1, (64, 64)), keras.optimizers.SGD(1e-5 if broken else 1e-2, momentum=0.9), "mse", ())
    return Setup(model, (xt, yt), val, epochs=15, regression=True)


@case("clip_tiny_cnn", 3, ("loss_plateau", "undertrained"), ("clip",))
def _(seed, broken):
    """clipvalue=1e-6: every update is tiny whatever the learning rate."""
    x, y = quadrant_images(800, seed)
    (xt, yt), val = split(x, y)
    optimizer = keras.optimizers.SGD(0.05, momentum=0.9, clipvalue=1e-6 if broken else 1.0)
    model = _compiled(cnn(4), optimizer)
    return Setup(model, (xt, yt), val, epochs=15)


@case("adadelta_default_mlp", 3, ("loss_plateau", "undertrained"), ("adadelta", "learning rate"))
def _(seed, broken):
    """Adadelta at Keras' default 1e-3 (the paper's rate is 1.0)."""
    x, y = blobs(1600, 10, 4, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(10, 4), keras.optimizers.Adadelta(1e-3 if broken else 1.0))
    return Setup(model, (xt, yt), val, epochs=15)


@case("l2_huge_mlp", 3, ("model_config", "loss_plateau", "majority_class"), ("regulari", "l2", "prior", "baseline"))
def _(seed, broken):
    """L2(1.0) on every kernel: the model stays at the class prior."""
    x, y = blobs(1600, 10, 4, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(10, 4, l2=3.0 if broken else 1e-4), keras.optimizers.Adam(1e-3))
    return Setup(model, (xt, yt), val, epochs=15)


@case(
    "l2_huge_regression", 3, ("model_config", "loss_plateau", "majority_class"), ("regulari", "l2", "mean", "baseline")
)
def _(seed, broken):
    x, y = smooth_regression(2000, 8, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(8, 1, (64, 64), l2=3.0 if broken else 1e-4), keras.optimizers.Adam(1e-3), "mse", ())
    return Setup(model, (xt, yt), val, epochs=15, regression=True)


@case(
    "lr_huge_nan_mlp",
    3,
    ("nonfinite", "exploding_gradients", "loss_divergence", "dead_relu", "loss_plateau"),
    ("learning rate",),
)
def _(seed, broken):
    """SGD at 3.0: the first updates blow the loss up to NaN (seeds 0-3), or kill the ReLU units and
    leave the loss at the constant baseline (seed 4): either way the learning rate is the cause."""
    x, y = blobs(1600, 10, 4, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(10, 4), keras.optimizers.SGD(3.0 if broken else 0.03))
    return Setup(model, (xt, yt), val, epochs=12)


# 4. Instability on a loss still large -----------------------------------------------------------
@case("bouncing_regression", 4, ("loss_divergence", "loss_oscillation"), ("learning rate",))
def _(seed, broken):
    """Targets x20, plain SGD at 0.03: the epoch loss bounces between ~40 and ~200 and never settles."""
    x, y = smooth_regression(2000, 8, seed)
    (xt, yt), val = split(x, 20 * y)
    model = _compiled(mlp(8, 1, (64, 64)), keras.optimizers.SGD(0.03 if broken else 0.01), "mse", ())
    return Setup(model, (xt, yt), val, epochs=30, regression=True)


@case("flat_high_keras_tb_only", 4, ("loss_plateau",), ())
def _(seed, broken):
    """Logged by keras.callbacks.TensorBoard only: 12 epoch points, flat at a high loss (lr 1e-6)."""
    x, y = blobs(1600, 10, 4, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(10, 4), keras.optimizers.Adam(1e-6 if broken else 1e-3))
    return Setup(model, (xt, yt), val, epochs=12, keras_tensorboard_only=True)


# 5. An info finding that is the whole explanation -------------------------------------------------
@case("dropout_095_mlp", 5, ("model_config", "loss_plateau", "majority_class"), ("dropout",))
def _(seed, broken):
    x, y = blobs(1600, 10, 4, seed, noise=1.4)
    (xt, yt), val = split(x, y)
    model = _compiled(mlp(10, 4, (16, 16), dropout=0.95 if broken else 0.2), keras.optimizers.Adam(1e-3))
    return Setup(model, (xt, yt), val, epochs=15)


@case("dropout_095_cnn", 5, ("model_config", "loss_plateau", "majority_class"), ("dropout",))
def _(seed, broken):
    x, y = quadrant_images(800, seed)
    (xt, yt), val = split(x, y)
    model = _compiled(cnn(4, dropout=0.97 if broken else 0.2), keras.optimizers.Adam(3e-3))
    return Setup(model, (xt, yt), val, epochs=15)


# -- running ----------------------------------------------------------------------------------
def train(setup: Setup, root: str) -> dict[str, list[float]]:
    run_dir = os.path.join(root, "run")
    if setup.keras_tensorboard_only:
        logger: keras.callbacks.Callback = keras.callbacks.TensorBoard(log_dir=run_dir)
    else:
        logger = HealthCallback(log_dir=run_dir, verbose=False)
    history = setup.model.fit(
        *setup.train,
        validation_data=setup.validation,
        epochs=setup.epochs,
        batch_size=setup.batch_size,
        callbacks=[logger, *setup.callbacks],
        verbose=0,
    )
    return history.history


def diagnose(root: str) -> list[Finding]:
    reader = SignalReader(open_logdir(root))
    return [f for group in reader.groups() for f in engine.diagnose(reader.read(group))]


def learned(history: dict[str, list[float]], regression: bool) -> float:
    """What the run learned, judged on validation: the best accuracy, or the best loss."""
    if regression:
        return float(np.nanmin(history["val_loss"]))
    return float(np.nanmax(history["val_accuracy"]))


def learns_less(broken: float, twin: float, regression: bool) -> bool:
    if regression:
        return not np.isfinite(broken) or broken >= twin * (1 + LOSS_GAP)
    return broken <= twin - ACCURACY_GAP


def loud(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity >= Severity.WARNING]


def says_cause(c: Case, finding: Finding) -> bool:
    text = f"{finding.title} {finding.detail}".lower()
    return finding.code in c.primary and (not c.words or any(w in text for w in c.words))


def names_cause(c: Case, findings: list[Finding]) -> bool:
    """The worst finding is one the case names, and says the cause in words where asked (a
    note case: no warning, and a note that says it)."""
    if c.note:
        return not loud(findings) and any(says_cause(c, f) for f in findings)
    return bool(loud(findings)) and says_cause(c, findings[0])  # (engine.diagnose sorts worst first)


def run_pair(c: Case, seed: int, verbose: bool, keep: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"case": c.name, "fault": c.fault, "seed": seed}
    for broken in (True, False):
        key = "broken" if broken else "twin"
        with tempfile.TemporaryDirectory() as scratch:
            root = os.path.join(keep, f"{c.name}-s{seed}-{key}") if keep else scratch
            keras.utils.set_random_seed(seed)
            setup = c.make(seed, broken)
            started = time.perf_counter()
            history = train(setup, root)
            findings = diagnose(root)
        result[key] = {
            "learned": learned(history, setup.regression or setup.judged_on_loss),
            "findings": findings,
            "seconds": time.perf_counter() - started,
            "epochs": len(history["loss"]),
        }
    b, t = result["broken"], result["twin"]
    by_loss = setup.regression or setup.judged_on_loss
    result["learns_less"] = learns_less(b["learned"], t["learned"], by_loss)
    result["named"] = names_cause(c, b["findings"])
    result["found"] = bool(loud(b["findings"])) or (c.note and result["named"])
    result["note"] = c.note
    result["twin_quiet"] = not loud(t["findings"])
    print_pair(result, by_loss, verbose)
    return result


def print_pair(r: dict[str, Any], regression: bool, verbose: bool) -> None:
    b, t = r["broken"], r["twin"]
    measure = "best val_loss" if regression else "best val_acc"
    print(
        f"{r['case']:38} s{r['seed']} {measure} {b['learned']:.3g} vs twin {t['learned']:.3g}"
        f" (ep {b['epochs']}/{t['epochs']}, {b['seconds'] + t['seconds']:.0f}s)"
        f"  less={'Y' if r['learns_less'] else 'N'} found={'Y' if r['found'] else 'N'}"
        f" named={'Y' if r['named'] else 'N'} twin_quiet={'Y' if r['twin_quiet'] else 'N'}"
    )
    for key in ("broken", "twin"):
        shown = r[key]["findings"] if verbose or (r["note"] and key == "broken") else loud(r[key]["findings"])
        for f in shown:
            print(f"    {key:6} [{f.severity.label}] {f.code}{f.onset_text}: {f.title}")
            if verbose:
                print(f"           {f.detail}")
                for fix in f.fixes:
                    print(f"           fix: {fix.text}")
    sys.stdout.flush()


def summary(results: list[dict[str, Any]]) -> None:
    print()
    print(f"{'fault':6} {'runs':>4} {'less':>4} {'found':>5} {'named':>5} {'twins quiet':>11}")
    for fault in sorted({r["fault"] for r in results}):
        rows = [r for r in results if r["fault"] == fault]
        counts = [sum(r[k] for r in rows) for k in ("learns_less", "found", "named", "twin_quiet")]
        print(f"{fault:<6} {len(rows):>4} {counts[0]:>4} {counts[1]:>5} {counts[2]:>5} {counts[3]:>11}")
    n = len(results)
    found, named = sum(r["found"] for r in results), sum(r["named"] for r in results)
    quiet, less = sum(r["twin_quiet"] for r in results), sum(r["learns_less"] for r in results)
    print(
        f"broken runs found: {found} of {n}; primary cause named: {named} of {n} ({named / max(n, 1):.0%}); "
        f"twins quiet: {quiet} of {n}; broken runs that really learn less: {less} of {n}"
        f" ({sum(r['note'] and r['found'] for r in results)} found as a note by design)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--only", default=None)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--keep", default=None, metavar="DIR", help="keep the logdirs under DIR")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or any(p in c.name for p in args.only.split(","))]
    results = [
        run_pair(c, seed, args.verbose, args.keep)
        for c in cases
        for seed in range(args.first_seed, args.first_seed + args.seeds)
    ]
    summary(results)
    ok = all(r["found"] and r["twin_quiet"] and r["learns_less"] for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
