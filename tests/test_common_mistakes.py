"""The mistakes people actually make, each on a real small training run, with its healthy twin
(the same task done right) that must get no warning or critical finding."""

from __future__ import annotations

import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import alarms, diagnose_logdir, loud

from tb_trainhealth import HealthCallback
from tb_trainhealth.findings import Severity

rng = np.random.default_rng(0)
N, FEATURES, CLASSES = 960, 8, 3
CENTERS = rng.normal(scale=2.0, size=(CLASSES, FEATURES))
Y = rng.integers(0, CLASSES, size=N).astype("int32")
X = (CENTERS[Y] + rng.normal(size=(N, FEATURES))).astype("float32")
# 8x8 images whose class is which band of rows is bright; raw uint8 like a decoded PNG.
PIXELS = rng.integers(0, 100, size=(N, 8, 8, 1))
for _index, _label in enumerate(Y):
    PIXELS[_index, _label * 2 : _label * 2 + 3] += 150
PIXELS = PIXELS.astype("uint8")


def mlp(units: int, activation: str | None = None, inputs: int = FEATURES) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((inputs,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(units, activation=activation),
        ]
    )


def train(tmp_path, model, loss, x, y, *, epochs=4, lr=3e-3, callbacks=(), **fit_kwargs):
    keras.utils.set_random_seed(0)
    model.compile(keras.optimizers.Adam(lr), loss, metrics=["accuracy"] if "crossentropy" in str(loss) else None)
    log_dir = str(tmp_path / "run")
    try:
        model.fit(x, y, epochs=epochs, verbose=0, callbacks=[HealthCallback(log_dir), *callbacks], **fit_kwargs)
    except (ValueError, tf.errors.InvalidArgumentError):
        pass  # the mistake crashed training: recorded by the callback, the finding is what we test
    return diagnose_logdir(str(tmp_path))["run"]


def sparse(from_logits=True):
    return keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits)


def sorted_by_class():
    order = np.argsort(Y, kind="stable")
    return X[order], Y[order]


def segmenter() -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(2, 1),  # per-pixel logits: background, bright
        ]
    )


# Per-pixel masks: 1 where the pixel is bright; the first row marked void (255) in VOID_MASKS,
# as segmentation datasets mark unlabelled pixels.
MASKS = (PIXELS[..., 0] > 127).astype("int32")
VOID_MASKS = MASKS.copy()
VOID_MASKS[:, 0, :] = 255


def functional_mlp(divide_by: float) -> keras.Model:
    inputs = keras.Input((64,))
    x = inputs / divide_by  # plain arithmetic: no layer the lint could recognise
    x = keras.layers.Dense(32, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(CLASSES)(x))


REGRESSION_Y = (300 + 50 * np.tanh(X[:, 0])).astype("float32")  # targets in the hundreds

# name: (broken run, healthy twin, expected code, text the first fixes must hold)
# Multi-label targets: each sample carries its class and, for a third of them, the next class too.
MULTI_HOT = np.eye(CLASSES, dtype="float32")[Y]
MULTI_HOT[::3] += np.eye(CLASSES, dtype="float32")[(Y[::3] + 1) % CLASSES]

# Counts whose rate grows with the first feature: what the poisson loss is for.
COUNTS = np.random.default_rng(5).poisson(np.exp(0.5 * X[:, 0])).astype("float32")

# XOR of two features' signs: no linear model does better than chance.
XOR = ((X[:, 0] - X[:, 0].mean()) * (X[:, 1] - X[:, 1].mean()) > 0).astype("float32")


def stack(activation: str | None) -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((FEATURES,)),
            keras.layers.Dense(32, activation=activation),
            keras.layers.Dense(32, activation=activation),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )


CASES = {
    "hidden layers without an activation on a non-linear task (relu hidden layers are fine)": (
        lambda p: train(p, stack(None), "binary_crossentropy", X, XOR, epochs=8),
        lambda p: train(p, stack("relu"), "binary_crossentropy", X, XOR, epochs=8),
        "model_config",
        'activation="relu"',
    ),
    "0/1 labels under mean_absolute_percentage_error (binary cross-entropy is fine)": (
        lambda p: train(p, mlp(1, "sigmoid"), "mape", X, (Y == 0).astype("float32")),
        lambda p: train(p, mlp(1, "sigmoid"), "binary_crossentropy", X, (Y == 0).astype("float32")),
        "label_problem",
        'loss="binary_crossentropy"',
    ),
    "signed targets under the poisson loss (counts are fine)": (
        lambda p: train(p, mlp(1, "softplus"), "poisson", X, X[:, 0].copy()),
        lambda p: train(p, mlp(1, "softplus"), "poisson", X, COUNTS),
        "label_problem",
        'loss="mse"',
    ),
    "multi-hot rows under categorical_crossentropy (one sigmoid per class with binary cross-entropy is fine)": (
        lambda p: train(p, mlp(CLASSES, "softmax"), keras.losses.categorical_crossentropy, X, MULTI_HOT),
        lambda p: train(p, mlp(CLASSES, "sigmoid"), keras.losses.binary_crossentropy, X, MULTI_HOT),
        "label_problem",
        "BinaryCrossentropy(from_logits=True)",
    ),
    "one unit under categorical_crossentropy (one sigmoid under binary cross-entropy is fine)": (
        lambda p: train(
            p, mlp(1), keras.losses.CategoricalCrossentropy(from_logits=True), X, (Y == 0).astype("float32")
        ),
        lambda p: train(p, mlp(1, "sigmoid"), "binary_crossentropy", X, (Y == 0).astype("float32")),
        "output_loss_mismatch",
        'loss="binary_crossentropy"',
    ),
    "one-unit softmax": (
        lambda p: train(p, mlp(1, "softmax"), "binary_crossentropy", X, (Y == 0).astype("float32")),
        lambda p: train(p, mlp(1, "sigmoid"), "binary_crossentropy", X, (Y == 0).astype("float32")),
        "output_loss_mismatch",
        'Dense(1, activation="sigmoid")',
    ),
    "sigmoid output regressing hundreds": (
        lambda p: train(p, mlp(1, "sigmoid"), "mse", X, REGRESSION_Y),
        lambda p: train(
            p,
            keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)]),
            "mse",
            X,
            REGRESSION_Y / 100,
            epochs=6,
            lr=3e-2,
        ),
        "output_loss_mismatch",
        "linear output",
    ),
    "integer labels with categorical_crossentropy": (
        lambda p: train(p, mlp(CLASSES, "softmax"), "categorical_crossentropy", X, Y),
        lambda p: train(p, mlp(CLASSES), sparse(), X, Y),
        "label_problem",
        "SparseCategoricalCrossentropy",
    ),
    "one-hot labels with a sparse loss": (
        lambda p: train(p, mlp(CLASSES), sparse(), X, np.eye(CLASSES, dtype="float32")[Y]),
        lambda p: train(p, mlp(CLASSES), keras.losses.CategoricalCrossentropy(from_logits=True), X, np.eye(CLASSES)[Y]),
        "label_problem",
        "CategoricalCrossentropy",
    ),
    "class ids beyond the output units (labels 1..3)": (
        lambda p: train(p, mlp(CLASSES), sparse(), X, Y + 1),
        lambda p: train(p, mlp(CLASSES + 1), sparse(), X, Y + 1),
        "label_problem",
        "np.unique(y, return_inverse=True)",
    ),
    "relu output with cross-entropy": (
        lambda p: train(p, mlp(CLASSES, "relu"), sparse(), X, Y),
        lambda p: train(p, mlp(CLASSES), sparse(), X, Y),
        "output_loss_mismatch",
        "from_logits=True",
    ),
    "three classes through one sigmoid unit": (
        lambda p: train(p, mlp(1, "sigmoid"), "binary_crossentropy", X, Y.astype("float32")),
        lambda p: train(p, mlp(CLASSES), sparse(), X, Y),
        "label_problem",
        "Dense(n_classes)",
    ),
    "labels all one class": (
        lambda p: train(p, mlp(CLASSES), sparse(), X, np.zeros(N, "int32")),
        lambda p: train(p, mlp(CLASSES), sparse(), X, Y),
        "label_problem",
        "np.unique(y_train, return_counts=True)",
    ),
    "class-sorted data with validation_split": (
        # validation_split takes the last rows: exactly the last class, never seen in training
        lambda p: train(p, mlp(CLASSES), sparse(), *sorted_by_class(), validation_split=float(np.mean(Y == 2))),
        lambda p: train(p, mlp(CLASSES), sparse(), X, Y, validation_split=0.3, epochs=20),
        "label_problem",
        "stratify=y",
    ),
    "inputs zeroed by integer division (constant predictor)": (
        lambda p: train(p, mlp(CLASSES, inputs=64), sparse(), (PIXELS // 255).reshape(N, -1).astype("float32"), Y),
        lambda p: train(p, mlp(CLASSES), sparse(), X, Y),
        "loss_plateau",
        "",
    ),
    "raw 0-255 pixels": (
        lambda p: train(p, mlp(CLASSES, inputs=64), sparse(), PIXELS.reshape(N, -1).astype("float32"), Y, epochs=2),
        lambda p: train(
            p,
            keras.Sequential(
                [
                    keras.Input((64,)),
                    keras.layers.Rescaling(1 / 255),
                    keras.layers.Dense(32, activation="relu"),
                    keras.layers.Dense(CLASSES),
                ]
            ),
            sparse(),
            PIXELS.reshape(N, -1).astype("float32"),
            Y,
            epochs=2,
        ),
        "unnormalized_input",
        "Rescaling(1.0 / 255)",
    ),
    "raw pixels into a functional model (x / 255 inside it is fine)": (
        lambda p: train(p, functional_mlp(1.0), sparse(), PIXELS.reshape(N, -1).astype("float32"), Y, epochs=2),
        lambda p: train(p, functional_mlp(255.0), sparse(), PIXELS.reshape(N, -1).astype("float32"), Y, epochs=2),
        "unnormalized_input",
        "Rescaling(1.0 / 255)",
    ),
    "segmentation masks with ids 1..2 for two classes (void pixels with ignore_class are fine)": (
        lambda p: train(p, segmenter(), sparse(), PIXELS, MASKS + 1),
        lambda p: train(
            p,
            segmenter(),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=255),
            PIXELS,
            VOID_MASKS,
        ),
        "label_problem",
        "np.unique(y, return_inverse=True)",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_mistake_is_found_with_a_fix_that_names_the_change(tmp_path, case):
    broken, _, code, fix_text = CASES[case]
    findings = broken(tmp_path)
    found = loud(findings)
    learned_anyway = [f for f in findings if f.code == code and "yet the model learned" in f.title]
    if learned_anyway:  # a set-up the run learned despite (raw pixels here: 100% in 2 epochs) is info
        found[code] = learned_anyway[0]
    assert code in found, {c: f.title for c, f in found.items()}
    finding = found[code]
    assert finding.detail and finding.fixes
    assert fix_text in " ".join(f"{f.text} {f.code or ''}" for f in finding.fixes[:2])


@pytest.mark.parametrize("case", list(CASES))
def test_healthy_twin_is_quiet(tmp_path, case):
    _, twin, _, _ = CASES[case]
    assert alarms(twin(tmp_path)) == []


def test_constant_predictor_names_its_baseline(tmp_path):
    x = (PIXELS // 255).reshape(N, -1).astype("float32")  # uint8 // 255: all zeros but the 255s
    finding = loud(train(tmp_path, mlp(CLASSES, inputs=64), sparse(), x, Y))["loss_plateau"]
    counts = np.bincount(Y) / N
    entropy = float(-(counts * np.log(counts)).sum())  # ~ln 3
    baseline = float(re.search(r"baseline \(([\d.]+)\)", finding.title).group(1))
    assert abs(baseline - entropy) < 0.01  # from the labels of the first batches
    assert "label frequencies over 3 classes" in finding.detail


def test_run_stopped_while_improving_is_undertrained_info_and_its_converged_twin_is_not(tmp_path):
    """Six epochs of a loss still falling: a note (the epochs were the author's budget), with the fix."""
    x = rng.normal(size=(1024, FEATURES)).astype("float32")
    y = np.sin(x @ rng.normal(size=FEATURES) / 3).astype("float32")
    model = keras.Sequential(
        [keras.Input((FEATURES,)), keras.layers.Dense(32, activation="tanh"), keras.layers.Dense(1)]
    )
    findings = train(tmp_path / "short", model, "mse", x, y, epochs=6, lr=3e-4, validation_split=0.2, batch_size=64)
    assert alarms(findings) == []
    found = {f.code: f for f in findings}
    assert "undertrained" in found and "Stopped while still improving" in found["undertrained"].title, list(found)
    assert "EarlyStopping" in found["undertrained"].fixes[0].code
    model = keras.Sequential(
        [keras.Input((FEATURES,)), keras.layers.Dense(32, activation="tanh"), keras.layers.Dense(1)]
    )
    stop = keras.callbacks.EarlyStopping(monitor="val_loss", patience=4, restore_best_weights=True)
    twin = train(
        tmp_path / "long",
        model,
        "mse",
        x,
        y,
        epochs=120,
        lr=3e-3,
        validation_split=0.2,
        batch_size=64,
        callbacks=[stop],
    )
    assert alarms(twin) == []


@pytest.mark.parametrize(
    ("head", "cause"),
    [
        ([keras.layers.Dense(CLASSES)], "missing Flatten"),
        ([keras.layers.Flatten(), keras.layers.Dense(CLASSES)], None),  # (pooling would lose which rows are bright)
    ],
    ids=["missing Flatten", "healthy twin"],
)
def test_missing_flatten_crash_names_the_cause(tmp_path, head, cause):
    images = (PIXELS / 255.0).astype("float32")
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, activation="relu"), *head])
    found = loud(train(tmp_path, model, sparse(), images, Y, epochs=3))
    if cause is None:
        assert found == {}
        return
    crash = found["training_crash"]
    assert cause in crash.detail and "(32,) vs model output (32, 6, 6, 3)" in crash.detail
    assert "GlobalAveragePooling2D" in crash.fixes[0].code


def test_undertrained_is_judged_at_the_end_and_never_stops_a_run_that_is_improving(tmp_path):
    local = np.random.default_rng(7)  # its own data: the same run whatever ran before
    x = local.normal(size=(1024, FEATURES)).astype("float32")
    y = np.sin(x @ local.normal(size=FEATURES) / 3).astype("float32")
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((FEATURES,)), keras.layers.Dense(32, activation="tanh"), keras.layers.Dense(1)]
    )
    model.compile(keras.optimizers.Adam(3e-4), "mse")
    # (measure_input=False: on a loaded machine input_bound, a warning, would stop the run first)
    health = HealthCallback(str(tmp_path / "run"), stop_on="warning", diagnose_every=1, measure_input=False)
    history = model.fit(x, y, epochs=6, batch_size=64, validation_split=0.2, verbose=0, callbacks=[health])
    assert len(history.history["loss"]) == 6, [(f.code, f.title) for f in health.findings]  # not stopped for progress
    assert "undertrained" in {f.code for f in health.findings}  # but reported when it ended


@pytest.mark.parametrize("scaled", [True, False], ids=["labels-divided-by-255", "healthy-twin"])
def test_fractional_labels_for_a_sparse_loss_are_named_not_called_a_plateau(tmp_path, scaled):
    """y / 255 given to a sparse cross-entropy: every label becomes class 0 when the loss casts it."""
    y = (Y * 100 / 255).astype("float32") if scaled else Y
    findings = train(tmp_path, mlp(CLASSES), sparse(), X, y)
    if not scaled:
        assert alarms(findings) == []
        return
    found = loud(findings)
    finding = found["label_problem"]
    assert finding.severity.label == "critical" and "Fractional labels" in finding.title
    assert "class id(s)" in finding.title and "astype('int32')" in finding.fixes[0].code


def test_one_sample_batches_are_judged_on_enough_samples(tmp_path):
    """batch_size=1 on rows that are each constant (one value repeated): the first one-row batch
    is "constant", the data is not; and per-sample losses swing without being spikes."""
    values = rng.normal(size=(320, 1)).astype("float32")
    x = np.repeat(values, FEATURES, axis=1)
    y = (values[:, 0] > 0).astype("int32")
    found = loud(train(tmp_path, mlp(2), sparse(), x, y, epochs=2, batch_size=1, lr=1e-3))
    assert found == {}, {code: f.title for code, f in found.items()}


def test_batches_in_class_order_are_said_and_shuffled_ones_are_not(tmp_path):
    """tf.data over class-sorted arrays without shuffle(): 18 of the first 20 batches hold one class
    (shuffled, ~0% would), said with the fix; the same pipeline with shuffle() says nothing."""
    ordered = tf.data.Dataset.from_tensor_slices(sorted_by_class())
    findings = train(tmp_path / "sorted", mlp(CLASSES), sparse(), ordered.batch(32), None)
    (said,) = [f for f in findings if f.code == "label_problem"]
    assert said.title.startswith("Batches come in class order") and "dataset.shuffle(" in said.fixes[0].code
    # Warning or note by the harm the run shows (its step loss jumping: how much depends on the
    # model's initial weights, drawn before the seed is set); the rule's thresholds: test_batch_order.
    harmed = "jumps from batch to batch" in said.detail
    assert (said.severity == Severity.WARNING) == harmed and harmed != ("does not show the harm yet" in said.detail)
    shuffled = train(tmp_path / "shuffled", mlp(CLASSES), sparse(), ordered.shuffle(N, seed=0).batch(32), None)
    assert [f for f in shuffled if f.code == "label_problem"] == []
