"""The constant-prediction yardstick (issue 44): measured by the callback with the run's own loss,
however compile() was given it, and held against the run by `worse_than_constant`."""

from __future__ import annotations

import functools

import keras
import numpy as np
import pytest
from conftest import diagnose_logdir, read_logdir

from tb_trainhealth import HealthCallback
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import LintCheck
from tb_trainhealth.findings import Severity
from tb_trainhealth.rules.constant_yardstick import check_far_worse_than_constant, check_worse_than_constant
from tb_trainhealth.signals import RunSignals, Series

RNG = np.random.default_rng(0)
X = RNG.normal(size=(512, 8)).astype("float32")
CLASSES = RNG.integers(0, 4, 512)


def label_statistics(run: RunSignals) -> LintEvent:
    (stats,) = run.first_of_each_check(LintEvent, {LintCheck.LABEL_STATISTICS})
    return stats


def fit(tmp_path, name: str, y, output, loss, epochs: int = 1, x=X, **compile_args):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((x.shape[1],)), keras.layers.Dense(16, activation="relu"), output])
    model.compile(optimizer=compile_args.pop("optimizer", "adam"), loss=loss, **compile_args)
    logdir = str(tmp_path / name)
    model.fit(x, y, epochs=epochs, batch_size=32, validation_split=0.25, verbose=0, callbacks=[HealthCallback(logdir)])
    (run,) = read_logdir(logdir).values()
    return run, diagnose_logdir(logdir)[run.run]


def entropy(labels: np.ndarray) -> float:
    p = np.bincount(labels) / len(labels)
    return float(-(p * np.log(p)).sum())


@pytest.mark.parametrize(
    "loss",
    [
        "sparse_categorical_crossentropy",
        keras.losses.sparse_categorical_crossentropy,
        keras.losses.SparseCategoricalCrossentropy(),
    ],
    ids=["string", "function", "instance"],
)
def test_the_yardstick_of_a_classifier_is_the_entropy_of_its_label_frequencies_however_the_loss_is_given(
    tmp_path, loss
):
    run, _ = fit(tmp_path, "run", CLASSES, keras.layers.Dense(4, activation="softmax"), loss)
    stats = label_statistics(run)
    sampled = CLASSES[: int(len(CLASSES) * 0.75)]  # validation_split takes the tail
    assert stats.loss is not None and stats.loss.value == "sparse_categorical_crossentropy"
    assert stats.constant_loss == pytest.approx(entropy(sampled), rel=1e-3)
    assert "class frequencies" in stats.constant_how


def test_the_yardstick_of_logits_and_of_a_partial_is_the_same_entropy(tmp_path):
    logits, _ = fit(
        tmp_path, "logits", CLASSES, keras.layers.Dense(4), keras.losses.SparseCategoricalCrossentropy(True)
    )
    partial = functools.partial(keras.losses.sparse_categorical_crossentropy, from_logits=True)
    wrapped, _ = fit(tmp_path, "partial", CLASSES, keras.layers.Dense(4), partial)
    assert label_statistics(logits).constant_loss == pytest.approx(label_statistics(wrapped).constant_loss, rel=1e-5)
    assert label_statistics(wrapped).loss == label_statistics(logits).loss


def test_a_regression_yardstick_is_the_targets_variance_for_mse_and_their_median_for_mae(tmp_path):
    y = (RNG.normal(size=512) * 3 + 5).astype("float32")
    sampled = y[:384]
    mse, _ = fit(tmp_path, "mse", y, keras.layers.Dense(1), "mse")
    mae, _ = fit(tmp_path, "mae", y, keras.layers.Dense(1), keras.losses.mean_absolute_error)
    assert label_statistics(mse).constant_loss == pytest.approx(sampled.var(), rel=1e-3)
    assert label_statistics(mae).constant_loss == pytest.approx(np.abs(sampled - np.median(sampled)).mean(), rel=1e-3)
    assert "median" in label_statistics(mae).constant_how


@pytest.mark.parametrize("loss", ["binary_crossentropy", keras.losses.BinaryCrossentropy()], ids=["string", "instance"])
def test_the_yardstick_of_integer_labels_against_one_sigmoid_is_the_entropy_of_their_positive_rate(tmp_path, loss):
    """(n,) integer labels against (n, 1) outputs: aligned as compile() aligns them."""
    labels = (X[:, 0] > 0.3).astype("int64")
    run, _ = fit(tmp_path, "run", labels, keras.layers.Dense(1, activation="sigmoid"), loss)
    p = labels[:384].mean()
    assert label_statistics(run).constant_loss == pytest.approx(-(p * np.log(p) + (1 - p) * np.log(1 - p)), rel=1e-3)


def test_a_custom_loss_gets_a_yardstick_from_itself(tmp_path):
    y = (RNG.normal(size=512) * 3 + 5).astype("float32")

    def my_squared_error(y_true, y_pred):
        return keras.ops.mean(keras.ops.square(y_true - keras.ops.squeeze(y_pred, -1)), axis=-1)

    run, _ = fit(tmp_path, "custom", y, keras.layers.Dense(1), my_squared_error)
    stats = label_statistics(run)
    assert stats.loss is None  # not a built-in: nothing else is assumed about it
    assert stats.constant_loss == pytest.approx(y[:384].var(), rel=1e-3)


def test_a_loss_no_check_understands_is_said_once_and_a_built_in_function_is_not(tmp_path):
    y = (RNG.normal(size=512) * 3 + 5).astype("float32")

    def my_loss(y_true, y_pred):
        return keras.ops.mean(keras.ops.abs(y_true - y_pred[:, 0]))

    _, custom = fit(tmp_path, "custom", y, keras.layers.Dense(1), my_loss)
    _, built_in = fit(tmp_path, "built_in", y, keras.layers.Dense(1), keras.losses.mean_absolute_error)
    (said,) = [f for f in custom if f.evidence.check == "custom_loss"]
    assert said.severity == Severity.INFO and "`my_loss`" in said.title and "yardstick still holds" in said.detail
    assert not [f for f in built_in if f.evidence.check == "custom_loss"]


def test_a_relu_output_under_the_cross_entropy_function_object_is_named_as_it_is_for_the_string(tmp_path):
    onehot = np.eye(4, dtype="float32")[CLASSES]
    for loss in ("categorical_crossentropy", keras.losses.categorical_crossentropy):
        name = loss if isinstance(loss, str) else "function"
        _, findings = fit(tmp_path, name, onehot, keras.layers.Dense(4, activation="relu"), loss)
        mismatch = [f for f in findings if f.code == "output_loss_mismatch"]
        assert mismatch and mismatch[0].severity >= Severity.WARNING, (name, [f.code for f in findings])


def test_a_sigmoid_fitted_to_targets_far_outside_its_range_is_worse_than_a_constant(tmp_path):
    """A custom loss: no lint knows what it expects, the yardstick still holds."""
    w = RNG.normal(size=8)
    y = (7.5 + np.tanh(X @ w) * 2.5).astype("float32")  # targets in 5..10
    squared = lambda y_true, y_pred: keras.ops.mean(keras.ops.square(y_true - y_pred[:, 0]))  # noqa: E731
    _, findings = fit(tmp_path, "sigmoid", y, keras.layers.Dense(1, activation="sigmoid"), squared, epochs=4)
    found = [f for f in findings if f.code == "worse_than_constant"]
    assert found and found[0].severity == Severity.CRITICAL, [f.code for f in findings]  # 14x the constant
    assert "worse than a constant" in found[0].title.lower()


def test_a_healthy_regression_and_classifier_are_never_worse_than_the_constant(tmp_path):
    w = RNG.normal(size=8)
    y = (X @ w + 0.1 * RNG.normal(size=512)).astype("float32")
    _, regression = fit(tmp_path, "regression", y, keras.layers.Dense(1), "mse", epochs=5)
    labels = (X[:, 0] + X[:, 1] > 0).astype("int32") + 2 * (X[:, 2] > 0)
    _, classifier = fit(
        tmp_path,
        "classifier",
        labels,
        keras.layers.Dense(4),
        keras.losses.SparseCategoricalCrossentropy(True),
        epochs=5,
    )
    for findings in (regression, classifier):
        assert not [f for f in findings if f.code == "worse_than_constant"]


# -- the rule on synthetic runs ---------------------------------------------------------------
def synthetic(constant: float, val: list[float], train: list[float] | None = None) -> RunSignals:
    stats = LintEvent(0, LintCheck.LABEL_STATISTICS, constant_loss=constant, constant_how="predicting the mean")
    steps = np.arange(1, len(val) + 1) * 10
    series = {sig.EPOCH_VAL_LOSS: Series.of(steps, np.asarray(val, float))}
    if train is not None:
        series[sig.EPOCH_LOSS] = Series.of(steps, np.asarray(train, float))
    return RunSignals("r", series=series, events=[stats])


def test_a_loss_that_falls_but_never_reaches_the_constant_is_worse_than_it():
    (finding,) = check_far_worse_than_constant(synthetic(2.0, [58, 50, 44, 40, 37]))
    assert finding.severity == Severity.CRITICAL and "18x" in finding.title
    assert check_worse_than_constant(synthetic(2.0, [58, 50, 44, 40, 37])) == []


def test_a_loss_still_falling_a_little_above_the_constant_is_on_its_way_and_a_flat_one_is_not():
    assert check_worse_than_constant(synthetic(2.0, [5.0, 4.0, 3.2, 2.7, 2.4])) == []  # 1.2x, falling 25%
    (flat,) = check_worse_than_constant(synthetic(2.0, [2.6, 2.45, 2.42, 2.43, 2.41]))  # 1.2x, flat
    assert flat.severity == Severity.WARNING


def test_a_model_collapsed_onto_the_mean_after_a_blown_up_first_epoch_is_named():
    run = synthetic(2.0, [1e5, 2.004, 2.001, 2.0], [3e5, 2.01, 2.002, 2.001])
    (finding,) = check_far_worse_than_constant(run)
    assert "collapsed" in finding.title and "blew up" in finding.detail and finding.severity == Severity.CRITICAL
    assert check_worse_than_constant(run) == []


def test_a_loss_near_the_constant_on_data_with_little_signal_is_not_a_finding():
    """A healthy model on noisy data ends near the constant: it never stood far above it nor fell back."""
    assert (
        check_worse_than_constant(synthetic(2.0, [2.05, 2.0, 1.98, 1.97, 1.975], [2.1, 1.99, 1.96, 1.95, 1.94])) == []
    )
    assert check_worse_than_constant(synthetic(2.0, [2.1, 2.08, 2.05, 2.1])) == []  # within 10% above: noise


@pytest.mark.parametrize("signal", [True, False], ids=["learns", "no-signal"])
def test_soft_targets_are_judged_on_the_way_down_to_their_own_entropy(tmp_path, signal):
    """Scores in [0, 1] under binary cross-entropy (real-bug zoo dm_bce_targets_in_minus1_1's fix):
    no model gets below the targets' entropy, ~0.65 here, so a loss from 0.69 to 0.655 learned most
    of what there is. It is no plateau; the same targets shuffled apart from their inputs are."""
    local = np.random.default_rng(3)
    scores = 1 / (1 + np.exp(-X @ local.normal(size=8) * 0.2))  # soft targets, 0.35-0.65 mostly
    y = (scores if signal else local.permutation(scores)).astype("float32")
    run, findings = fit(
        tmp_path,
        "run",
        y,
        keras.layers.Dense(1, activation="sigmoid"),
        "binary_crossentropy",
        epochs=20,
        optimizer=keras.optimizers.Adam(1e-2),
    )
    p = np.clip(y[: int(len(y) * 0.75)], 1e-7, 1 - 1e-7)
    floor = float(np.mean(-(p * np.log(p) + (1 - p) * np.log(1 - p))))
    assert label_statistics(run).floor_loss == pytest.approx(floor, rel=0.02)  # (from the first batches)
    assert ("loss_plateau" in {f.code for f in findings if f.severity >= Severity.WARNING}) == (not signal)
