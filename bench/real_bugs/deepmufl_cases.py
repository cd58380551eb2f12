"""Real Keras training bugs from DeepMufl's bug set, ported to small numpy data.

Source: the DeepMufl (ASE 2023) dataset, github.com/ali-ghanbari/deepmufl-ase-2023,
`Dataset/all-bugs/<StackOverflow question id>/bug.py`. Each bug.py is DeepMufl's reproduction of a
StackOverflow question (usually on sklearn `make_classification`/`make_regression` stand-in data); the
question titles (used for the symptoms) come from DeepMufl's `Dataset/raw-so-query.csv`. DeepMufl ships
no fixed programs and the answers were not available offline, so each fix is the usual correction of
the fault DeepMufl's reproduction isolates, with nothing else changed; check it against the accepted
answer before relying on its exact wording. Data is numpy-generated to match the report's task, input
scale, label encoding and output layer; sizes and epochs are cut down so each version trains in seconds.
Scores are held-out accuracy (classification) or R^2 (regression), the same computation for both
versions: `_accuracy` reads several outputs by argmax and one output by a 0.5 threshold (2 classes) or
by rounding to a class index.

Verified (buggy -> fixed, seed 0 | seed 1, callbacks=[], Keras 3 / TF 2.21 CPU):

| name | source | symptom | cause | fix | seed 0 | seed 1 |
| --- | --- | --- | --- | --- | --- | --- |
| (not kept: the same post as other_cases.neuralint_so45378493) dm_conv1d_softmax_one_unit | SO 45378493 | binary CNN always predicts 1 | Dense(1)+softmax (constant 1) | sigmoid | acc 0.509 -> 0.859 | 0.532 -> 0.906 |
| dm_softmax_one_unit_cce | SO 68751439 | accuracy constant every epoch | Dense(1, softmax) + categorical_crossentropy: loss 0 | sigmoid + binary_crossentropy | acc 0.502 -> 0.796 | 0.524 -> 0.694 |
| dm_linear_output_bce_sigmoid_stack | SO 57407973 | val accuracy doesn't change | linear Dense(1) output with binary_crossentropy, deep sigmoid stack | sigmoid output | acc 0.502 -> 0.830 | 0.476 -> 0.724 |
| dm_four_classes_one_sigmoid | SO 62068109 | CNN fails on 4 classes, works on 2 | labels 0..3 into Dense(1, sigmoid) + binary_crossentropy | Dense(4, softmax) + sparse CCE | acc 0.252 -> 0.890 | 0.214 -> 0.906 |
| dm_one_unit_cce_from_logits | SO 66602662 | multi-class model always outputs 0 | 5 classes, Dense(1, sigmoid), CategoricalCrossentropy(from_logits=True): loss 0 | Dense(5) + SparseCategoricalCrossentropy(from_logits=True) | acc 0.208 -> 0.587 | 0.230 -> 0.642 |
| dm_iris_scaler_discarded_one_unit | SO 70650848 | validation loss is a straight line | scaler output discarded; Dense(1, sigmoid) + categorical_crossentropy on 3 classes | keep scaled X; Dense(3, softmax) + sparse CCE | acc 0.320 -> 0.955 | 0.285 -> 0.985 |
| dm_relu_output_signed_regression | SO 59758722 | loss is 1 | ReLU output for signed (standardized) targets | linear output | r2 0.466 -> 0.973 | -0.001 -> 0.970 |
| dm_softmax_output_regression | SO 54738769 | loss not changing | regression through Dense(1, softmax) | linear output | r2 -0.002 -> 0.986 | -0.000 -> 0.981 |
| dm_softmax_poisson_multitarget_regression | SO 56774954 | can't approximate a 3-output function | softmax output + poisson loss on signed targets | linear output + mse | r2 -0.000 -> 0.437 | 0.000 -> 0.437 |
| dm_cars_sigmoid_output_unscaled_target | SO 48976413 | sigmoid regression: huge constant loss | targets in the thousands through a sigmoid output | scale target to [0, 1] | r2 -8.521 -> 0.820 | -8.261 -> 0.854 |
| dm_bce_targets_in_minus1_1 | SO 46869312 | far worse than sklearn MLP; loss negative | targets in [-1, 1] with sigmoid + binary_crossentropy | targets scaled to [0, 1] | r2 0.352 -> 0.966 | 0.464 -> 0.964 |
| dm_unscaled_inputs_targets_small_lr | SO 69901379 | can't overfit; loss in the millions | raw inputs 50..2000, targets 600..4000, Adam(1e-4) | standardize inputs and targets | r2 0.044 -> 0.687 | 0.127 -> 0.740 |
| dm_linear_layers_polynomial | SO 48486598 | predictions are a straight line | Dense layers without activations | tanh hidden layers | r2 -0.030 -> 0.977 | -0.041 -> 0.948 |
| dm_iris_one_epoch | SO 61234347 | worse than random forest / kNN | fit() default of 1 epoch | more epochs | acc 0.608 -> 0.939 | 0.327 -> 0.937 |
| dm_autoencoder_relu_output | SO 60801900 | negative values predicted as zeros | ReLU output layer of an autoencoder | linear output | r2 0.511 -> 1.000 | 0.473 -> 1.000 |
| dm_conv1d_relu_output_cce | SO 53700537 | Conv1D on ECG doesn't learn; nan | Dense(3, relu, no bias) + categorical_crossentropy | softmax output | acc 0.316 -> 1.000 | 0.314 -> 1.000 |
| dm_masked_lstm_relu_output_cce | SO 64413907 | same constant loss masked or not | Dense(3, relu) + losses.categorical_crossentropy | softmax output | acc 0.323 -> 0.677 | 0.362 -> 0.502 |
| dm_logits_with_probability_loss | SO 68101077 | accuracy falls | Dense(10) logits + 'sparse_categorical_crossentropy' (from_logits=False) | SparseCategoricalCrossentropy(from_logits=True) | acc 0.127 -> 0.988 | 0.098 -> 0.919 |
| dm_sigmoid_output_signed_target | SO 62313327 | loss stalls instead of reaching 0 | sigmoid output for a target in [-1, 1] | linear output | r2 0.512 -> 1.000 | 0.491 -> 1.000 |
| dm_conv3d_mape_classification | SO 62957334 | loss stuck at one point | loss='mape' on 0/1 labels | binary_crossentropy | acc 0.510 -> 1.000 | 0.490 -> 1.000 |
| dm_regression_as_binary_classification | SO 66840108 | model has no accuracy | real-valued target (hundreds) with sigmoid + binary_crossentropy | linear output + mse | r2 -3.949 -> 1.000 | -3.678 -> 1.000 |
| dm_deep_sigmoid_bottleneck | SO 65777704 | very low accuracy | 8-unit first layer, 5 stacked sigmoid Dense layers | ReLU layers 128-64-32 | acc 0.084 -> 0.943 | 0.096 -> 0.901 |

Not ported (DeepMufl bugs outside the excluded list): sigmoid + categorical_crossentropy outputs
(41823068, 41999686, 42472447, 50914860, 55198221, 61886777) do not reproduce in Keras 3, whose
cross-entropy reads the pre-sigmoid logits and so trains them like softmax (41823068 and 42472447 scored
identically buggy and fixed); 44758894 (ReLU output + mse), 51185079 (ReLU output + BCE) and 64395424
(linear output + BCE on AND) showed no reliable harm; 68938619 (LSTM + softmax unit) and 69787272 (1-unit
ReLU bottleneck) did not learn when fixed within the time budget; 52566823 (same fault as 48976413) fixed
reached R^2 0.25 only; 57326611, 61763616, 61997645, 62055783 fail with shape/dtype errors in Keras 3;
68701979 never calls fit; the remaining ones need pretrained weights or keras.datasets, are large
image/video/3-D models, use a handful of rows with nothing to hold out, repeat a fault already here
(more Dense(1)+softmax classifiers, softmax/sigmoid regression outputs), or have no clear accepted fix.
"""

from __future__ import annotations

import keras
import numpy as np

from bench.real_bugs.case import Case

_DM = "ali-ghanbari/deepmufl-ase-2023 Dataset/all-bugs"


# ----------------------------------------------------------------------------------------------
# Shared helpers: numpy data that stands in for the report's data, and the held-out scores.
# ----------------------------------------------------------------------------------------------


def _rng(seed: int) -> np.random.Generator:
    keras.utils.set_random_seed(seed)
    return np.random.default_rng(seed)


def _classes(rng: np.random.Generator, n: int, d: int, k: int, informative: int, sep: float = 1.0):
    """make_classification-like: k classes, each two Gaussian clusters in `informative` dimensions
    (so no single linear cut separates them), the other dimensions noise."""
    centers = rng.normal(0.0, sep, size=(k, 2, informative))
    y = rng.integers(0, k, size=n)
    sub = rng.integers(0, 2, size=n)
    x = rng.normal(0.0, 1.0, size=(n, d))
    x[:, :informative] += centers[y, sub]
    perm = rng.permutation(d)
    return x[:, perm].astype("float32"), y.astype("int64")


def _images(rng: np.random.Generator, n: int, hw: int, ch: int, k: int, amp: float = 0.8):
    """k classes of blocky class templates plus pixel noise, shape (n, hw, hw, ch)."""
    cell = 4
    small = rng.normal(0.0, 1.0, size=(k, hw // cell, hw // cell, ch))
    templates = np.kron(small, np.ones((1, cell, cell, 1)))
    y = rng.integers(0, k, size=n)
    x = amp * templates[y] + rng.normal(0.0, 1.0, size=(n, hw, hw, ch))
    return x.astype("float32"), y.astype("int64")


def _regression(rng: np.random.Generator, n: int, d: int, targets: int = 1, informative: int = 10, noise=1.0):
    """make_regression-like: y = X @ coef with coef ~ U(0, 100) on `informative` features."""
    x = rng.normal(0.0, 1.0, size=(n, d))
    coef = np.zeros((d, targets))
    inf = min(informative, d)
    coef[:inf] = 100.0 * rng.uniform(0.0, 1.0, size=(inf, targets))
    y = x @ coef + noise * rng.normal(0.0, 1.0, size=(n, targets))
    return x.astype("float32"), y.astype("float32")


def _predict(model, x) -> np.ndarray:
    p = np.asarray(model.predict(x, verbose=0), dtype="float64")
    return p.reshape(len(x), -1)


def _accuracy(model, x, y, k: int) -> float:
    """Held-out accuracy from the model's output, read the usual way for its shape: argmax over
    several outputs; one output thresholded at 0.5 (two classes) or rounded to a class index."""
    p = _predict(model, x)
    if not np.all(np.isfinite(p)):
        p = np.nan_to_num(p, nan=0.0, posinf=0.0, neginf=0.0)
    if p.shape[1] == 1:
        pred = (p[:, 0] > 0.5).astype(int) if k == 2 else np.clip(np.rint(p[:, 0]), 0, k - 1).astype(int)
    else:
        pred = p.argmax(axis=1)
    return float(np.mean(pred == np.asarray(y).reshape(-1)))


def _r2(y_true, y_pred) -> float:
    """Coefficient of determination, averaged over targets; non-finite predictions score as 0."""
    yt = np.asarray(y_true, dtype="float64").reshape(len(y_true), -1)
    yp = np.asarray(y_pred, dtype="float64").reshape(len(y_true), -1)
    yp = np.nan_to_num(yp, nan=0.0, posinf=0.0, neginf=0.0)
    ss_res = ((yt - yp) ** 2).sum(axis=0)
    ss_tot = ((yt - yt.mean(axis=0)) ** 2).sum(axis=0)
    return float(np.mean(1.0 - ss_res / ss_tot))


def _minmax(train, *others, lo=0.0, hi=1.0):
    mn, mx = train.min(axis=0), train.max(axis=0)
    scale = np.where(mx > mn, mx - mn, 1.0)
    return [lo + (hi - lo) * (a - mn) / scale for a in (train, *others)]


def _standardize(train, *others):
    mu, sd = train.mean(axis=0), train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return [(a - mu) / sd for a in (train, *others)]


def _l2_rows(x):
    """keras.utils.normalize(x): each row scaled to unit L2 norm along the last axis."""
    norm = np.sqrt((x**2).sum(axis=-1, keepdims=True))
    return x / np.where(norm > 0, norm, 1.0)


# ----------------------------------------------------------------------------------------------
# The cases
# ----------------------------------------------------------------------------------------------


def run_45378493(buggy: bool, seed: int, callbacks: list) -> float:
    """Conv1D/BatchNorm/LeakyReLU binary classifier ending in Dense(1) + softmax."""
    rng = _rng(seed)
    x, y = _classes(rng, 2000, 40, 2, informative=8)
    x = x.reshape(-1, 10, 4)
    x_tr, y_tr, x_te, y_te = x[:1200], y[:1200], x[1200:], y[1200:]
    L = keras.layers
    model = keras.Sequential(
        [
            keras.Input((10, 4)),
            L.Conv1D(filters=16, kernel_size=4, padding="same"),
            L.BatchNormalization(),
            L.LeakyReLU(),
            L.Dropout(0.2),
            L.Conv1D(filters=8, kernel_size=4, padding="same"),
            L.BatchNormalization(),
            L.LeakyReLU(),
            L.Dropout(0.2),
            L.Flatten(),
            L.Dense(64),
            L.BatchNormalization(),
            L.LeakyReLU(),
            L.Dense(1),
            L.Activation("softmax" if buggy else "sigmoid"),
        ]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(x_tr, y_tr, epochs=20, batch_size=128, validation_data=(x_te, y_te), callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 2)


def run_68751439(buggy: bool, seed: int, callbacks: list) -> float:
    """Dense(1, softmax) binary classifier compiled with categorical_crossentropy."""
    rng = _rng(seed)
    x, y = _classes(rng, 1500, 14, 2, informative=6)
    x_tr, y_tr, x_te, y_te = x[:1000], y[:1000], x[1000:], y[1000:]
    model = keras.Sequential(
        [
            keras.Input((14,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(1, activation="softmax" if buggy else "sigmoid"),
        ]
    )
    loss = "categorical_crossentropy" if buggy else "binary_crossentropy"
    model.compile(loss=loss, optimizer="adam", metrics=["accuracy"])
    model.fit(x_tr, y_tr, epochs=30, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 2)


def run_57407973(buggy: bool, seed: int, callbacks: list) -> float:
    """Stack of sigmoid layers whose last Dense(1) has no activation, with binary_crossentropy."""
    rng = _rng(seed)
    x, y = _classes(rng, 1500, 28, 2, informative=6)
    x_tr, y_tr, x_te, y_te = x[:1000], y[:1000], x[1000:], y[1000:]
    L = keras.layers
    model = keras.Sequential(
        [
            keras.Input((28,)),
            L.Dense(28, kernel_initializer="normal", activation="sigmoid"),
            L.Dense(200, kernel_initializer="normal", activation="sigmoid"),
            L.Dropout(0.5),
            L.Dense(300, kernel_initializer="normal", activation="sigmoid"),
            L.Dropout(0.5),
            L.Dense(300, kernel_initializer="normal", activation="sigmoid"),
            L.Dropout(0.5),
            L.Dense(150, kernel_initializer="normal", activation="sigmoid"),
            L.Dropout(0.4),
            L.Dense(1, kernel_initializer="normal", activation=None if buggy else "sigmoid"),
        ]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(x_tr, y_tr, epochs=15, batch_size=32, validation_data=(x_te, y_te), callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 2)


def run_62068109(buggy: bool, seed: int, callbacks: list) -> float:
    """Four-class image CNN ending in Dense(1) + sigmoid with binary_crossentropy."""
    rng = _rng(seed)
    x, y = _images(rng, 1500, 28, 1, 4, amp=0.25)
    x_tr, y_tr, x_te, y_te = x[:1000], y[:1000], x[1000:], y[1000:]
    L = keras.layers
    head = [L.Dense(1), L.Activation("sigmoid")] if buggy else [L.Dense(4), L.Activation("softmax")]
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            L.Conv2D(32, (3, 3)),
            L.Activation("relu"),
            L.MaxPooling2D(pool_size=(2, 2)),
            L.Conv2D(32, (3, 3)),
            L.Activation("relu"),
            L.MaxPooling2D(pool_size=(2, 2)),
            L.Conv2D(32, (3, 3)),
            L.Activation("relu"),
            L.MaxPooling2D(pool_size=(2, 2)),
            L.Flatten(),
            L.Dense(64),
            L.Activation("relu"),
            L.Dropout(0.5),
            *head,
        ]
    )
    loss = "binary_crossentropy" if buggy else "sparse_categorical_crossentropy"
    model.compile(loss=loss, optimizer="adam", metrics=["accuracy"])
    model.fit(x_tr, y_tr, epochs=8, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 4)


def run_66602662(buggy: bool, seed: int, callbacks: list) -> float:
    """Five-class classifier with one sigmoid output and CategoricalCrossentropy(from_logits=True)."""
    rng = _rng(seed)
    x, y = _classes(rng, 1600, 5, 5, informative=4, sep=1.5)
    x_tr, y_tr, x_te, y_te = x[:1000], y[:1000], x[1000:], y[1000:]
    L = keras.layers
    out = L.Dense(1, activation="sigmoid") if buggy else L.Dense(5)
    model = keras.Sequential(
        [
            keras.Input((5,)),
            L.Dense(32, activation="relu"),
            L.Dense(16, activation="relu"),
            L.Dropout(0.2),
            L.Dense(8, activation="relu"),
            L.Dropout(0.2),
            out,
        ]
    )
    if buggy:
        loss = keras.losses.CategoricalCrossentropy(from_logits=True)
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer="adam", loss=loss)
    model.fit(x_tr, y_tr, epochs=20, batch_size=24, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 5)


_IRIS_MEAN = np.array([[5.01, 3.43, 1.46, 0.25], [5.94, 2.77, 4.26, 1.33], [6.59, 2.97, 5.55, 2.03]])
_IRIS_STD = np.array([[0.35, 0.38, 0.17, 0.11], [0.52, 0.31, 0.47, 0.20], [0.64, 0.32, 0.55, 0.27]])


def _iris(rng: np.random.Generator, n: int):
    y = rng.integers(0, 3, size=n)
    x = _IRIS_MEAN[y] + _IRIS_STD[y] * rng.normal(0.0, 1.0, size=(n, 4))
    return x.astype("float32"), y.astype("int64")


def run_70650848(buggy: bool, seed: int, callbacks: list) -> float:
    """Iris: StandardScaler output thrown away, Dense(1, sigmoid) with categorical_crossentropy."""
    rng = _rng(seed)
    x, y = _iris(rng, 1600)
    x_tr, y_tr, x_te, y_te = x[:1200], y[:1200], x[1200:], y[1200:]
    if not buggy:  # the fix keeps what the scaler returns (fit on the training split only)
        x_tr, x_te = _standardize(x_tr, x_te)
    L = keras.layers
    out = L.Dense(1, activation="sigmoid") if buggy else L.Dense(3, activation="softmax")
    model = keras.Sequential(
        [
            keras.Input((4,)),
            L.Dense(4, activation="relu"),
            L.BatchNormalization(),
            L.Dropout(0.3),
            L.Dense(4, activation="relu"),
            L.BatchNormalization(),
            L.Dropout(0.3),
            out,
        ]
    )
    if buggy:
        model.compile(optimizer="sgd", loss="categorical_crossentropy", metrics=["categorical_accuracy"])
    else:
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x_tr, y_tr, validation_data=(x_te, y_te), batch_size=16, epochs=20, callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 3)


def run_59758722(buggy: bool, seed: int, callbacks: list) -> float:
    """Regression on signed targets with a ReLU output unit (RMSprop, mse)."""
    rng = _rng(seed)
    x, y = _regression(rng, 2000, 4, informative=4, noise=20.0)
    y = (y - y.mean()) / y.std()  # standardized targets: a dead output unit scores an mse of 1
    x_tr, y_tr, x_te, y_te = x[:1500], y[:1500], x[1500:], y[1500:]
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(30, activation="relu"),
            keras.layers.Dense(30, activation="relu"),
            keras.layers.Dense(1, activation="relu" if buggy else None),
        ]
    )
    model.compile(loss="mean_squared_error", optimizer="RMSprop")
    model.fit(x_tr, y_tr, batch_size=128, epochs=40, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _r2(y_te, _predict(model, x_te))


def run_54738769(buggy: bool, seed: int, callbacks: list) -> float:
    """Regression network ending in Dense(1, softmax)."""
    rng = _rng(seed)
    x, y = _regression(rng, 2500, 18, informative=10)
    x_tr, y_tr, x_te, y_te = x[:2000], y[:2000], x[2000:], y[2000:]
    model = keras.Sequential(
        [
            keras.Input((18,)),
            keras.layers.Dense(18, activation="tanh"),
            keras.layers.Dense(36, activation="relu"),
            keras.layers.Dense(72, activation="relu"),
            keras.layers.Dense(72, activation="relu"),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(1, activation="softmax" if buggy else None),
        ]
    )
    model.compile(loss="mean_squared_error", optimizer="adam")
    model.fit(x_tr, y_tr, epochs=15, batch_size=35, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _r2(y_te, _predict(model, x_te))


def run_56774954(buggy: bool, seed: int, callbacks: list) -> float:
    """Three-target regression with a softmax output layer and the poisson loss."""
    rng = _rng(seed)
    x, y = _regression(rng, 2500, 10, targets=3, informative=10)
    x_tr, y_tr, x_te, y_te = x[:2000], y[:2000], x[2000:], y[2000:]
    inputs = keras.Input(shape=(10,))
    hidden = keras.layers.Dense(100, activation="sigmoid")(inputs)
    hidden = keras.layers.Dense(80, activation="sigmoid")(hidden)
    outputs = keras.layers.Dense(3, activation="softmax" if buggy else None)(hidden)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="poisson" if buggy else "mse")
    model.fit(x_tr, y_tr, batch_size=32, epochs=30, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _r2(y_te, _predict(model, x_te))


def _cars(rng: np.random.Generator, n: int):
    """Stand-in for the report's cars.csv: age, gender, miles, debt, income -> purchase amount."""
    age = rng.uniform(19, 60, n)
    gender = rng.integers(0, 2, n).astype(float)
    miles = rng.uniform(10, 97, n)
    debt = np.where(rng.uniform(size=n) < 0.4, 0.0, rng.uniform(0, 59770, n))
    income = rng.uniform(0, 11970, n)
    amount = 500 + 180 * age + 400 * gender + 40 * miles + 0.25 * debt + 0.6 * income
    amount = np.clip(amount + rng.normal(0, 2500, n), 500, None)
    x = np.stack([age, gender, miles, debt, income], axis=1)
    return x.astype("float32"), amount.reshape(-1, 1).astype("float32")


def run_48976413(buggy: bool, seed: int, callbacks: list) -> float:
    """Car purchase amount regression (targets in the thousands) through a sigmoid output unit."""
    rng = _rng(seed)
    x, y = _cars(rng, 3500)
    x_tr, y_tr, x_te, y_te = x[:3000], y[:3000], x[3000:], y[3000:]
    x_tr, x_te = _minmax(x_tr, x_te)
    model = keras.Sequential(
        [
            keras.Input((5,)),
            keras.layers.Dense(12, kernel_initializer="normal", activation="relu"),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(loss="mse", optimizer="adam", metrics=["mse", "mae"])
    if buggy:
        model.fit(x_tr, y_tr, epochs=30, batch_size=50, validation_split=0.2, callbacks=callbacks, verbose=0)
        return _r2(y_te, _predict(model, x_te))
    y_lo, y_hi = y_tr.min(), y_tr.max()  # the fix scales the target into the sigmoid's [0, 1] and back
    model.fit(
        x_tr,
        (y_tr - y_lo) / (y_hi - y_lo),
        epochs=30,
        batch_size=50,
        validation_split=0.2,
        callbacks=callbacks,
        verbose=0,
    )
    return _r2(y_te, y_lo + (y_hi - y_lo) * _predict(model, x_te))


def run_46869312(buggy: bool, seed: int, callbacks: list) -> float:
    """binary_crossentropy + sigmoid output on targets scaled to [-1, 1] (custom uniform init)."""
    rng = _rng(seed)
    num_streams, num_stages = 4, 64
    x, y = _regression(rng, 8000, num_stages, informative=10)
    y = 2 * ((y - y.min()) / (y.max() - y.min())) - 1
    x_tr, y_tr, x_te, y_te = x[:6000], y[:6000], x[6000:], y[6000:]
    hidden_units = 2 ** (num_streams + 1)
    b1 = np.sqrt(3.5 / ((num_stages + 1) + num_stages))
    b2 = np.sqrt(3.5 / ((num_stages + 1) + hidden_units))
    b3 = np.sqrt(3.5 / (hidden_units + 1))
    RU = keras.initializers.RandomUniform
    model = keras.Sequential(
        [
            keras.Input((num_stages,)),
            keras.layers.Dense(num_stages, activation="relu", kernel_initializer=RU(minval=-b1, maxval=b1)),
            keras.layers.Dense(hidden_units, activation="relu", kernel_initializer=RU(minval=-b2, maxval=b2)),
            keras.layers.Dense(1, activation="sigmoid", kernel_initializer=RU(minval=-b3, maxval=b3)),
        ]
    )
    model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.Adam(learning_rate=1e-3), metrics=["accuracy"])
    # The fix maps the targets into [0, 1], the range binary_crossentropy and the sigmoid expect.
    t_tr, t_te = (y_tr, y_te) if buggy else ((y_tr + 1) / 2, (y_te + 1) / 2)
    model.fit(x_tr, t_tr, validation_data=(x_te, t_te), epochs=10, batch_size=200, callbacks=callbacks, verbose=0)
    p = _predict(model, x_te)
    return _r2(y_te, p if buggy else 2 * p - 1)


def run_69901379(buggy: bool, seed: int, callbacks: list) -> float:
    """MLP regression on raw inputs in [50, 2000] and raw targets in [600, 4000] with Adam(1e-4)."""
    rng = _rng(seed)
    n = 4000
    x = rng.integers(50, 2000, (n, 10)).astype("float32")
    w = rng.uniform(-1, 1, 10)
    s = (x - 1025) / 560 @ w / np.sqrt((w**2).sum())  # a unit-variance projection of the inputs
    y = 600 + 3400 * np.clip(s**2 / 4, 0, 1)  # a bowl: no straight line through the raw inputs fits it
    y = (y + rng.normal(0, 60, n)).reshape(-1, 1).astype("float32")
    x_tr, y_tr, x_te, y_te = x[:3200], y[:3200], x[3200:], y[3200:]
    k = 16
    model = keras.Sequential(
        [
            keras.Input((10,)),
            keras.layers.Flatten(),
            keras.layers.Dense(k, activation="relu"),
            keras.layers.Dense(k, activation="relu"),
            keras.layers.Dense(k, activation="relu"),
            keras.layers.Dense(k, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(loss="mse", optimizer=keras.optimizers.Adam(learning_rate=0.0001))
    if buggy:
        model.fit(x_tr, y_tr, epochs=30, batch_size=32, validation_split=0.2, callbacks=callbacks, verbose=0)
        return _r2(y_te, _predict(model, x_te))
    xs_tr, xs_te = _standardize(x_tr, x_te)  # the fix standardizes inputs and targets
    mu, sd = y_tr.mean(), y_tr.std()
    model.fit(xs_tr, (y_tr - mu) / sd, epochs=30, batch_size=32, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _r2(y_te, mu + sd * _predict(model, xs_te))


def run_48486598(buggy: bool, seed: int, callbacks: list) -> float:
    """Fitting a quintic curve with Dense layers that have no activation functions."""
    rng = _rng(seed)

    def f(x):
        return 0.05 * (15.72807 * x - 7.273893 * x**2 + 1.4912 * x**3 - 0.1384615 * x**4 + 0.00474359 * x**5)

    x_tr = rng.uniform(0.0, 10.0, 2000).astype("float32")
    x_te = rng.uniform(0.0, 10.0, 400).astype("float32")
    y_tr, y_te = f(x_tr), f(x_te)
    L = keras.layers
    if buggy:
        layers = [L.Dense(1), L.Dense(5), L.Dense(1, activation="linear")]
    else:  # the fix: nonlinear hidden activations (and room for them)
        layers = [L.Dense(32, activation="tanh"), L.Dense(32, activation="tanh"), L.Dense(1, activation="linear")]
    model = keras.Sequential([keras.Input((1,)), *layers])
    model.compile(loss="mean_absolute_error", optimizer="adam", metrics=["accuracy"])
    model.fit(x_tr, y_tr, epochs=12, batch_size=10, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _r2(y_te, _predict(model, x_te))


def run_61234347(buggy: bool, seed: int, callbacks: list) -> float:
    """Iris with a very deep tanh network fitted with model.fit's default single epoch."""
    rng = _rng(seed)
    x, y = _iris(rng, 600)
    y1h = keras.utils.to_categorical(y, 3)
    x_tr, y_tr, x_te, y_te = x[:105], y1h[:105], x[105:], y[105:]
    L = keras.layers
    model = keras.Sequential(
        [
            keras.Input((4,)),
            L.Dense(1000, activation="tanh"),
            L.Dense(500, activation="tanh"),
            L.Dense(250, activation="tanh"),
            L.Dense(125, activation="tanh"),
            L.Dense(64, activation="tanh"),
            L.Dense(32, activation="tanh"),
            L.Dense(9, activation="tanh"),
            L.Dense(3, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    epochs = 1 if buggy else 20  # the report relied on fit()'s default of one epoch
    model.fit(x_tr, y_tr, epochs=epochs, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 3)


def run_60801900(buggy: bool, seed: int, callbacks: list) -> float:
    """Dense autoencoder with a ReLU output layer reconstructing data in [-1.92, 1.92]."""
    rng = _rng(seed)
    contexts = 60
    x = rng.normal(0.0, 1.0, size=(200, contexts * 3))
    (x,) = _minmax(x, lo=-1.9236537371711413, hi=1.9242677998256246)
    x = x.reshape(-1, contexts, 3).astype("float32")
    x_tr, x_te = x[:120], x[120:]
    L = keras.layers
    model = keras.Sequential(
        [
            keras.Input((contexts, 3)),
            L.Dense(128, activation="relu"),
            L.Dense(64, activation="relu"),
            L.Dense(32, activation="relu"),
            L.Dense(64, activation="relu"),
            L.Dense(128, activation="relu"),
            L.Dense(3, activation="relu" if buggy else "linear"),
        ]
    )
    model.compile(optimizer="adam", loss="mse", metrics=["accuracy"])
    model.fit(x_tr, x_tr, epochs=15, batch_size=2, shuffle=True, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _r2(x_te.reshape(-1, 3), _predict(model, x_te).reshape(-1, 3))


def run_53700537(buggy: bool, seed: int, callbacks: list) -> float:
    """1-D CNN classifier ending in Dense(3, relu, use_bias=False) with categorical_crossentropy."""
    rng = _rng(seed)
    n, length = 1500, 200
    y = rng.integers(0, 3, size=n)
    t = np.arange(length)
    freq = np.array([0.03, 0.08, 0.16])[y]
    x = np.sin(2 * np.pi * freq[:, None] * t[None, :] + rng.uniform(0, 2 * np.pi, (n, 1)))
    x = (x + rng.normal(0, 1.0, (n, length))).reshape(n, length, 1).astype("float32")
    y1h = keras.utils.to_categorical(y, 3)
    x_tr, y_tr, x_te, y_te = x[:1000], y1h[:1000], x[1000:], y[1000:]
    L = keras.layers
    model = keras.Sequential(
        [
            keras.Input((length, 1)),
            L.Conv1D(20, 20, activation="relu"),
            L.MaxPooling1D(3),
            L.Conv1D(20, 10, activation="relu"),
            L.MaxPooling1D(3),
            L.Conv1D(20, 10, activation="relu"),
            L.GlobalAveragePooling1D(),
            L.Dense(3, activation="relu", use_bias=False) if buggy else L.Dense(3, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])
    model.fit(x_tr, y_tr, epochs=5, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 3)


def run_64413907(buggy: bool, seed: int, callbacks: list) -> float:
    """Masked LSTM(1) classifier with a ReLU Dense(3) output and losses.categorical_crossentropy."""
    rng = _rng(seed)
    n, timesteps, mask_value = 2400, 6, -100.0
    feats = rng.random((n, timesteps, 1)).astype("float32")
    lengths = rng.integers(2, timesteps, size=n)
    last = feats[np.arange(n), lengths - 1, 0]
    y = np.digitize(last, [1 / 3, 2 / 3])  # the class is set by the last step before the padding
    for i in range(n):
        feats[i, lengths[i] :, 0] = mask_value
    y1h = keras.utils.to_categorical(y, 3)
    x_tr, y_tr, x_te, y_te = feats[:2000], y1h[:2000], feats[2000:], y[2000:]
    model = keras.Sequential(
        [
            keras.Input((timesteps, 1)),
            keras.layers.Masking(mask_value=mask_value),
            keras.layers.LSTM(1, return_sequences=False),
            keras.layers.Dense(3, activation="relu" if buggy else "softmax"),
        ]
    )
    model.compile(loss=keras.losses.categorical_crossentropy, optimizer="adam", metrics=["accuracy"])
    model.fit(x_tr, y_tr, batch_size=16, epochs=10, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 3)


def run_68101077(buggy: bool, seed: int, callbacks: list) -> float:
    """Flatten-Dense(128)-Dense(10) logits compiled with the string 'sparse_categorical_crossentropy'."""
    rng = _rng(seed)
    x, y = _images(rng, 3000, 28, 1, 10, amp=0.3)
    x = x.reshape(-1, 28, 28)
    x = (x - x.min()) / (x.max() - x.min())
    x_tr, y_tr, x_te, y_te = x[:2000], y[:2000], x[2000:], y[2000:]
    model = keras.Sequential(
        [
            keras.Input((28, 28)),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    loss = "sparse_categorical_crossentropy" if buggy else keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer="adam", loss=loss, metrics=["accuracy"])
    model.fit(x_tr, y_tr, epochs=10, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 10)


def run_62313327(buggy: bool, seed: int, callbacks: list) -> float:
    """Learn y = x[1] (in [-1, 1]) through Dense(1, relu) -> Dense(1, sigmoid)."""
    rng = _rng(seed)
    x = (rng.random((6000, 30)) * 2 - 1).astype("float32")
    y = x[:, 1:2].copy()
    x_tr, y_tr, x_te, y_te = x[:5000], y[:5000], x[5000:], y[5000:]
    model = keras.Sequential(
        [
            keras.Input((30,)),
            keras.layers.Dense(1, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid" if buggy else None),
        ]
    )
    optimizer = keras.optimizers.Adam(learning_rate=0.01)
    model.compile(optimizer=optimizer, loss=keras.losses.MeanSquaredError())
    model.fit(x_tr, y_tr, epochs=10, batch_size=32, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _r2(y_te, _predict(model, x_te))


def run_62957334(buggy: bool, seed: int, callbacks: list) -> float:
    """Conv3D binary classifier with linear activations trained with the 'mape' loss."""
    rng = _rng(seed)
    x, y = _images(rng, 600, 12, 18, 2, amp=0.15)
    x = x.reshape(-1, 12, 12, 3, 6)
    x_tr, y_tr, x_te, y_te = x[:400], y[:400], x[400:], y[400:]
    L = keras.layers
    model = keras.Sequential(
        [
            keras.Input((12, 12, 3, 6)),
            L.Conv3D(32, (3, 3, 3), activation="linear", padding="same"),
            L.MaxPool3D((2, 2, 2), padding="same"),
            L.Conv3D(32, (3, 3, 3), activation="linear", padding="same"),
            L.MaxPool3D((2, 2, 2), padding="same"),
            L.Conv3D(32, (3, 3, 3), activation="linear", padding="same"),
            L.Flatten(),
            L.Dense(10, activation="linear"),
            L.Dense(units=1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer=keras.optimizers.Nadam(), loss="mape" if buggy else "binary_crossentropy")
    model.fit(x_tr, y_tr, epochs=6, shuffle=True, batch_size=20, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 2)


def run_66840108(buggy: bool, seed: int, callbacks: list) -> float:
    """A regression target (3a from inputs a, 2a) fitted as binary classification: sigmoid + BCE."""
    rng = _rng(seed)
    a = rng.uniform(26, 488, 1000).astype("float32")
    x = np.stack([a, 2 * a], axis=1)
    y = (3 * a + rng.normal(0, 5, 1000)).reshape(-1, 1).astype("float32")
    x_tr, y_tr, x_te, y_te = x[:600], y[:600], x[600:], y[600:]
    model = keras.Sequential(
        [
            keras.Input((2,)),
            keras.layers.Dense(196, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid" if buggy else "linear"),
        ]
    )
    loss = "binary_crossentropy" if buggy else "mse"
    model.compile(loss=loss, optimizer="adam", metrics=["accuracy"] if buggy else ["mae"])
    model.fit(x_tr, y_tr, epochs=20, batch_size=10, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _r2(y_te, _predict(model, x_te))


def run_65777704(buggy: bool, seed: int, callbacks: list) -> float:
    """Image classifier of stacked sigmoid Dense layers starting from an 8-unit bottleneck."""
    rng = _rng(seed)
    x, y = _images(rng, 3000, 16, 3, 10, amp=0.2)
    x = _l2_rows(x)
    y1h = keras.utils.to_categorical(y, 10)
    x_tr, y_tr, x_te, y_te = x[:2000], y1h[:2000], x[2000:], y[2000:]
    L = keras.layers
    if buggy:
        hidden = [L.Dense(units=u, activation="sigmoid") for u in (8, 16, 32, 64, 128)]
    else:
        hidden = [L.Dense(units=u, activation="relu") for u in (128, 64, 32)]
    model = keras.Sequential([keras.Input((16, 16, 3)), L.Flatten(), *hidden, L.Dense(units=10, activation="softmax")])
    model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    model.fit(x_tr, y_tr, epochs=20, batch_size=500, validation_split=0.2, callbacks=callbacks, verbose=0)
    return _accuracy(model, x_te, y_te, 10)


def _case(qid: str, name: str, symptom: str, cause: str, fix: str, codes: tuple[str, ...], **kw) -> Case:
    return Case(
        name=name,
        source=f"SO {qid}; {_DM}/{qid}/bug.py",
        symptom=symptom,
        cause=cause,
        fix=fix,
        codes=codes,
        run=globals()[f"run_{qid}"],
        **kw,
    )


CASES: list[Case] = [
    _case(
        "68751439",
        "dm_softmax_one_unit_cce",
        "Constant model accuracy after each epoch.",
        "Binary labels, Dense(1, activation='softmax') and loss='categorical_crossentropy': the softmax of "
        "one unit is 1 and the cross-entropy is 0, so nothing is learned.",
        "Dense(1, activation='sigmoid') with loss='binary_crossentropy'.",
        ("output_loss_mismatch", "loss_plateau", "majority_class"),
        fix_changes=("activation", "loss"),
    ),
    _case(
        "57407973",
        "dm_linear_output_bce_sigmoid_stack",
        "Validation accuracy doesn't change (sometimes); loss sits near 0.69.",
        "The last Dense(1) has no activation but the loss is binary_crossentropy, which clips the raw "
        "output into (0, 1); behind it a deep stack of sigmoid layers with 'normal' init passes little "
        "gradient.",
        "activation='sigmoid' on the output Dense(1).",
        ("output_loss_mismatch", "vanishing_gradients", "loss_plateau"),
        fix_changes=("activation",),
    ),
    _case(
        "62068109",
        "dm_four_classes_one_sigmoid",
        "The CNN works well on 2 species but not on 4.",
        "Integer labels 0..3 fed to Dense(1) + sigmoid with binary_crossentropy: labels above 1 make the "
        "loss unbounded below (it runs to large negative values) and one sigmoid can't name 4 classes.",
        "Dense(4) + softmax with sparse_categorical_crossentropy.",
        ("label_problem", "output_loss_mismatch", "loss_divergence"),
        fix_changes=("units", "activation", "loss"),
    ),
    _case(
        "66602662",
        "dm_one_unit_cce_from_logits",
        "The Keras multi-class classifier always gives 0 output.",
        "Five integer classes, Dense(1, sigmoid) and CategoricalCrossentropy(from_logits=True): a softmax "
        "over one logit is 1, so the loss is exactly 0 and no gradient flows.",
        "Dense(5) logits with SparseCategoricalCrossentropy(from_logits=True).",
        ("output_loss_mismatch", "label_problem", "loss_plateau"),
        fix_changes=("units", "activation", "loss"),
    ),
    _case(
        "70650848",
        "dm_iris_scaler_discarded_one_unit",
        "The cross-entropy validation loss comes out as a straight line.",
        "sc.fit_transform(X_train) results were thrown away (inputs stay unscaled) and three integer classes "
        "go to Dense(1, sigmoid) with categorical_crossentropy, whose loss over one unit is always 0.",
        "Keep the scaler's output and use Dense(3, softmax) with sparse_categorical_crossentropy.",
        ("output_loss_mismatch", "label_problem", "unnormalized_input"),
        # train_labels changes too, but only because the inputs it weighs the labels by were scaled.
        fix_changes=("input_mean", "input_std", "train_inputs", "units", "activation", "loss"),
    ),
    _case(
        "59758722",
        "dm_relu_output_signed_regression",
        "Keras NN loss is 1 (and stays there).",
        "Standardized regression targets, half of them negative, predicted by Dense(1, activation='relu'): "
        "the output cannot go below 0 and its unit dies for negative targets.",
        "Linear output unit.",
        ("output_loss_mismatch", "dead_relu"),
        score_name="r2",
        margin=0.1,
        fix_changes=("activation",),
    ),
    _case(
        "54738769",
        "dm_softmax_output_regression",
        "The loss in Keras does not change while training the model.",
        "Regression network ending in Dense(1, activation='softmax'): the prediction is the constant 1, "
        "so the mse never moves.",
        "Linear output unit.",
        ("output_loss_mismatch", "loss_plateau", "worse_than_constant"),
        score_name="r2",
        margin=0.1,
        fix_changes=("activation",),
    ),
    _case(
        "56774954",
        "dm_softmax_poisson_multitarget_regression",
        "The network can't approximate a function with a multi-dimensional output.",
        "Three real-valued (signed) targets predicted through a softmax layer (outputs sum to 1) and trained "
        "with the poisson loss, which is for non-negative counts; the loss runs negative.",
        "Linear output layer with mean squared error.",
        ("output_loss_mismatch", "label_problem", "loss_divergence"),
        score_name="r2",
        margin=0.1,
        fix_changes=("activation", "loss"),
    ),
    _case(
        "48976413",
        "dm_cars_sigmoid_output_unscaled_target",
        "Can the sigmoid activation be used for regression? Loss stays huge and constant.",
        "Purchase amounts in the thousands regressed through a sigmoid output unit, which saturates at 1: "
        "the loss is stuck at the targets' mean square.",
        "Scale the target into [0, 1] (MinMaxScaler) for the sigmoid and scale predictions back.",
        ("unnormalized_target", "saturated_activation", "worse_than_constant"),
        score_name="r2",
        margin=0.1,
        fix_changes=("label_distribution", "train_labels", "validation_label_distribution"),
    ),
    _case(
        "46869312",
        "dm_bce_targets_in_minus1_1",
        "Keras results are much worse than sklearn's MLPClassifier on the same data; the loss goes negative.",
        "Targets rescaled to [-1, 1] trained with a sigmoid output and binary_crossentropy, which needs "
        "targets in [0, 1]: negative targets drive the loss to minus infinity.",
        "Scale the targets to [0, 1] (and map predictions back).",
        ("label_problem", "loss_divergence", "output_loss_mismatch"),
        score_name="r2",
        margin=0.1,
        fix_changes=("label_distribution", "train_labels", "validation_label_distribution"),
    ),
    _case(
        "69901379",
        "dm_unscaled_inputs_targets_small_lr",
        "Can't even overfit a small data set with ReLU layers: the loss stays in the millions.",
        "Raw inputs in [50, 2000] and raw targets in [600, 4000] with Adam(learning_rate=1e-4): the net "
        "spends its steps chasing the target scale.",
        "Standardize inputs and targets (and invert the target scaling for predictions).",
        ("unnormalized_target", "unnormalized_input", "undertrained"),
        score_name="r2",
        margin=0.1,
        fix_changes=(
            "input_mean",
            "input_std",
            "train_inputs",
            "label_distribution",
            "train_labels",
            "validation_label_distribution",
        ),
    ),
    _case(
        "48486598",
        "dm_linear_layers_polynomial",
        "How to predict a function with Keras? The predictions are a straight line.",
        "Dense(1) -> Dense(5) -> Dense(1) with no activation functions is one linear map; it can't fit "
        "the quintic curve.",
        "Nonlinear hidden layers (tanh) with more units.",
        ("model_config", "loss_plateau", "undertrained"),
        score_name="r2",
        margin=0.1,
        fix_changes=("activation", "units"),
    ),
    _case(
        "61234347",
        "dm_iris_one_epoch",
        "Bad results with Keras compared with a random forest or kNN on iris.",
        "model.fit(X_train, y_train) without epochs trains one epoch (4 steps) of a very deep tanh network.",
        "Train for more epochs.",
        ("undertrained",),
        fix_changes=("epochs",),
    ),
    _case(
        "60801900",
        "dm_autoencoder_relu_output",
        "The model predicts negative values as zeros.",
        "Autoencoder for data in [-1.92, 1.92] whose output layer is Dense(3, activation='relu'): it can't "
        "reconstruct negative values.",
        "Linear output layer.",
        ("output_loss_mismatch", "dead_relu"),
        score_name="r2",
        margin=0.1,
        fix_changes=("activation",),
    ),
    _case(
        "53700537",
        "dm_conv1d_relu_output_cce",
        "The Conv1D model on ECG signals doesn't learn; loss becomes nan.",
        "Dense(3, activation='relu', use_bias=False) feeding categorical_crossentropy: the cross-entropy "
        "divides the outputs by their sum, which is 0 once the ReLUs die, giving nan.",
        "Dense(3, activation='softmax').",
        ("nonfinite", "output_loss_mismatch", "dead_relu"),
        fix_changes=("activation", "use_bias"),
    ),
    _case(
        "64413907",
        "dm_masked_lstm_relu_output_cce",
        "Masked and unmasked input give the same (constant) loss.",
        "Dense(3, activation='relu') output with keras.losses.categorical_crossentropy: dead or unnormalized "
        "ReLU outputs leave the loss constant.",
        "Dense(3, activation='softmax').",
        ("output_loss_mismatch", "dead_relu", "loss_plateau"),
        fix_changes=("activation",),
    ),
    _case(
        "68101077",
        "dm_logits_with_probability_loss",
        "Accuracy falls during training (fashion-MNIST tutorial model).",
        "The last Dense(10) outputs logits but loss='sparse_categorical_crossentropy' (from_logits=False) "
        "treats them as probabilities, clipping them into (0, 1).",
        "loss=SparseCategoricalCrossentropy(from_logits=True).",
        ("output_loss_mismatch", "loss_plateau"),
        fix_changes=("from_logits", "loss"),
    ),
    _case(
        "62313327",
        "dm_sigmoid_output_signed_target",
        "The network loss stalls where it should fall to zero quickly.",
        "The target x[1] lies in [-1, 1] but the output is Dense(1, activation='sigmoid'), which only covers (0, 1).",
        "Linear output unit.",
        ("output_loss_mismatch", "saturated_activation", "dead_relu"),
        score_name="r2",
        margin=0.1,
        fix_changes=("activation",),
    ),
    _case(
        "62957334",
        "dm_conv3d_mape_classification",
        "The Keras CNN loss gets stuck at one point.",
        "Binary 0/1 labels trained with loss='mape': a percentage error divides by the label, so the zeros "
        "dominate and the sigmoid collapses to one class.",
        "loss='binary_crossentropy'.",
        ("output_loss_mismatch", "label_problem", "majority_class"),
        fix_changes=("loss",),
    ),
    _case(
        "66840108",
        "dm_regression_as_binary_classification",
        "Keras produces a model with no accuracy.",
        "A real-valued target (3a for inputs a, 2a, in the hundreds) fitted as a binary classification "
        "with sigmoid + binary_crossentropy: targets above 1 drive the loss to minus infinity.",
        "Treat it as regression: linear output with mean squared error.",
        ("label_problem", "loss_divergence", "output_loss_mismatch"),
        score_name="r2",
        margin=0.1,
        fix_changes=("activation", "loss"),
    ),
    _case(
        "65777704",
        "dm_deep_sigmoid_bottleneck",
        "Very low accuracy (about chance) from a Keras image classifier.",
        "Flatten -> sigmoid Dense layers of 8, 16, 32, 64, 128 units: an 8-unit first layer and five "
        "stacked sigmoids leave almost no gradient or information for the softmax.",
        "ReLU hidden layers, widest first (128, 64, 32).",
        ("vanishing_gradients", "saturated_activation", "model_config"),
        # The fix changes the activations, the widths and the number of hidden layers.
        fix_changes=("activation", "units", "layers"),
    ),
]
