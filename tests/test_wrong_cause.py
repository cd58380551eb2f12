"""Runs that train without an error and learn the wrong thing get their cause named.

Real training (demo/scenarios.py WRONG_CAUSE_SCENARIOS: each class on an MLP and a CNN, each
with a healthy twin), and the rules on synthetic signals at their thresholds' edges."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from conftest import LOAD_DEPENDENT, diagnose_logdir, loud
from scenarios import WRONG_CAUSE_SCENARIOS

import tb_trainhealth
from tb_trainhealth import HealthCallback, engine
from tb_trainhealth.callback.lint.data_lint import check_input_scale
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import LayerWeights, LintEvent, NonfiniteEvent, WeightInitEvent
from tb_trainhealth.contract.vocab import LintCheck, LossKind
from tb_trainhealth.findings import Severity
from tb_trainhealth.rules.class_balance import check_majority_class
from tb_trainhealth.rules.data_scale import check_unnormalized_target
from tb_trainhealth.rules.initialization import check_bad_initialization
from tb_trainhealth.rules.loss_metric import check_loss_metric_mismatch
from tb_trainhealth.rules.training_data import labels_unrelated
from tb_trainhealth.signals import RunSignals, Series

# The wrong causes these runs used to get: they must not speak for them any more.
WRONG_CAUSES = {
    "init_nan": {"nonfinite", "loss_divergence", "exploding_gradients", "dead_relu"},
    "shuffled_labels": {"overfitting"},
    "tiny_inputs": {"dead_relu"},
    "majority_class": {"loss_plateau"},
    "unscaled_targets": {"loss_plateau", "undertrained", "dead_relu"},
    "loss_": {"loss_plateau", "undertrained"},
}


@pytest.fixture(scope="module")
def wrong_cause_findings(tmp_path_factory):
    root = tmp_path_factory.mktemp("wrong_cause")
    for scenario in WRONG_CAUSE_SCENARIOS:
        scenario.train(str(root / scenario.name))
    return diagnose_logdir(str(root))


@pytest.mark.parametrize("scenario", [s for s in WRONG_CAUSE_SCENARIOS if not s.expected], ids=lambda s: s.name)
def test_healthy_twin_stays_quiet(scenario, wrong_cause_findings):
    assert loud(wrong_cause_findings[scenario.name]) == {}


@pytest.mark.parametrize("scenario", [s for s in WRONG_CAUSE_SCENARIOS if s.expected], ids=lambda s: s.name)
def test_broken_run_is_given_its_cause_first(scenario, wrong_cause_findings):
    findings = wrong_cause_findings[scenario.name]
    found = loud(findings)
    (code,) = scenario.expected
    assert code in found, [f.title for f in findings]
    leading = [f.code for f in findings if f.code not in LOAD_DEPENDENT]  # (load can add input_bound anywhere)
    assert leading[0] == code, [f.code for f in findings]  # the cause leads
    assert found[code].detail and found[code].fixes and found[code].fixes[0].code
    evidence = found[code].evidence  # something to show in the tab: measured facts or series
    assert evidence.facts or evidence.series, evidence
    assert "events" not in evidence.series
    wrong = next((codes for prefix, codes in WRONG_CAUSES.items() if scenario.name.startswith(prefix)), set())
    assert not wrong & set(found), [f.title for f in findings]


# -- majority_class ---------------------------------------------------------------------------
def stats(**fields) -> LintEvent:
    return LintEvent(0, LintCheck.LABEL_STATISTICS, batches=20, **fields)


def epochs(**series) -> dict[str, Series]:
    return {name: Series.of(np.arange(1, len(v) + 1), v) for name, v in series.items()}


def test_majority_class_needs_flat_accuracy_at_the_majority_share():
    counts = stats(loss=LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, units=2, class_counts=(600.0, 40.0))
    flat = [0.91, 0.9375, 0.9375, 0.9375, 0.9375]
    run = RunSignals("r", series=epochs(epoch_accuracy=flat, epoch_loss=[0.4, 0.25, 0.24, 0.24, 0.24]), events=[counts])
    (finding,) = check_majority_class(run)
    assert finding.code == "majority_class" and "class 0" in finding.title and "class_weight" in finding.fixes[0].code
    moving = [0.91, 0.93, 0.95, 0.94, 0.96]  # a model that predicts the rare class for some samples
    assert check_majority_class(RunSignals("r", series=epochs(epoch_accuracy=moving), events=[counts])) == []
    elsewhere = [0.80, 0.80, 0.80, 0.80]  # flat, but not at the majority share
    assert check_majority_class(RunSignals("r", series=epochs(epoch_accuracy=elsewhere), events=[counts])) == []
    binary = stats(loss=LossKind.BINARY_CROSSENTROPY, units=1, count=640, mean=0.0625)  # 6% positives
    (finding,) = check_majority_class(RunSignals("r", series=epochs(epoch_accuracy=flat), events=[binary]))
    assert "class 0" in finding.title
    coin = stats(loss=LossKind.BINARY_CROSSENTROPY, units=1, count=640, mean=0.48)  # balanced binary task
    stuck_at_half = [0.52, 0.52, 0.52, 0.52]
    assert check_majority_class(RunSignals("r", series=epochs(epoch_accuracy=stuck_at_half), events=[coin])) == []
    balanced = stats(loss=LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, units=4, class_counts=(160.0,) * 4)
    at_chance = [0.25] * 5  # a plateau at chance, not a majority-class predictor
    assert check_majority_class(RunSignals("r", series=epochs(epoch_accuracy=at_chance), events=[balanced])) == []


# -- bad_initialization -----------------------------------------------------------------------
def weights(*layers: LayerWeights, normalized: bool = False) -> WeightInitEvent:
    return WeightInitEvent(0, {f"dense_{i}": layer for i, layer in enumerate(layers)}, normalized=normalized)


CONSTANT = LayerWeights("relu", fan_in=10, units=32, std=0.0, mean=0.05)
HE = LayerWeights("relu", fan_in=32, units=32, std=0.25, mean=0.0)
UNIT = LayerWeights("relu", fan_in=64, units=64, std=1.0, mean=0.0)


def test_symmetric_initialisation_needs_a_constant_kernel_feeding_another():
    out = LayerWeights("linear", fan_in=32, units=4, std=0.0, mean=0.05)
    (finding,) = check_bad_initialization(RunSignals("r", events=[weights(CONSTANT, dataclass_copy(CONSTANT), out)]))
    assert finding.severity == Severity.CRITICAL and "Symmetric" in finding.title
    # A random layer after a constant one breaks the tie (zero-initialised heads, residual branches).
    assert check_bad_initialization(RunSignals("r", events=[weights(CONSTANT, HE, out)])) == []
    assert check_bad_initialization(RunSignals("r", events=[weights(HE, HE, out)])) == []


def dataclass_copy(layer: LayerWeights) -> LayerWeights:
    return LayerWeights(layer.activation, layer.fan_in, layer.units, layer.std, layer.mean)


def test_weights_too_large_explain_a_nan_and_silence_the_learning_rate_advice():
    deep = weights(*(UNIT,) * 5)  # 5.7x per layer: 6e3x over the network
    nan = NonfiniteEvent(3, "loss")
    loss = {sig.LOSS: Series.of([1, 2, 3], [3e4, 2e5, np.nan])}
    run = RunSignals("r", series=loss, events=[deep, nan])
    (finding,) = check_bad_initialization(run)
    assert "NaN at step 3" in finding.title and "he_normal" in finding.fixes[0].code
    assert [f.code for f in engine.diagnose(run) if f.severity >= Severity.WARNING] == ["bad_initialization"]
    # No NaN and no blow-up: large weights alone are not this finding.
    calm = {sig.LOSS: Series.of(np.arange(1, 41), np.linspace(2.0, 1.0, 40))}
    assert check_bad_initialization(RunSignals("r", series=calm, events=[deep])) == []
    # He-scaled weights: the NaN has another cause, nonfinite keeps it.
    run = RunSignals("r", series=loss, events=[weights(*(HE,) * 5), nan])
    assert check_bad_initialization(run) == []
    assert "nonfinite" in {f.code for f in engine.diagnose(run)}
    # A few wide layers among He-scaled ones (trained weights loaded into a deep net): not an initialiser.
    mixed = weights(*(HE,) * 6, *(UNIT,) * 3)
    assert check_bad_initialization(RunSignals("r", series=loss, events=[mixed, nan])) == []
    # Normalisation layers reset the scale: the product means nothing.
    assert (
        check_bad_initialization(RunSignals("r", series=loss, events=[weights(*(UNIT,) * 5, normalized=True), nan]))
        == []
    )


# -- unnormalized_target -----------------------------------------------------------------------
def test_unscaled_targets_only_when_the_model_is_no_better_than_their_mean():
    prices = stats(loss=LossKind.MEAN_SQUARED_ERROR, units=1, count=640, mean=1200.0, variance=7e4)
    stuck = RunSignals("r", series=epochs(epoch_loss=[1.5e6, 1.48e6, 1.45e6]), events=[prices])
    (finding,) = check_unnormalized_target(stuck)
    assert "1200" in finding.title and "y_std" in finding.fixes[0].code
    learned = RunSignals("r", series=epochs(epoch_loss=[1.5e6, 3e4, 900.0]), events=[prices])
    assert check_unnormalized_target(learned) == []  # it reached the targets' scale: no finding
    centred = stats(loss=LossKind.MEAN_ABSOLUTE_ERROR, units=1, count=640, mean=0.0, variance=9e4)  # std 300
    stuck_at_mean = epochs(epoch_loss=[245.0, 243.0, 241.0])  # MAE of predicting the mean: 0.8 x 300
    assert check_unnormalized_target(RunSignals("r", series=stuck_at_mean, events=[centred]))
    assert check_unnormalized_target(RunSignals("r", series=epochs(epoch_loss=[245.0, 60.0]), events=[centred])) == []
    unit = stats(loss=LossKind.MEAN_SQUARED_ERROR, units=1, count=640, mean=1.0, variance=4.0)
    assert check_unnormalized_target(RunSignals("r", series=epochs(epoch_loss=[5.0, 5.0]), events=[unit])) == []


# -- label_problem: labels that do not belong to their inputs ------------------------------------
def test_validation_at_chance_from_the_first_epoch_is_a_pairing_problem_not_overfitting():
    counts = stats(loss=LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, units=4, class_counts=(160.0, 150.0, 170.0, 160.0))
    train = [0.27, 0.30, 0.36, 0.45, 0.55, 0.66]
    val_loss = [1.39, 1.40, 1.43, 1.48, 1.55, 1.64]
    series = epochs(
        epoch_accuracy=train,
        epoch_val_accuracy=[0.25, 0.24, 0.27, 0.23, 0.26, 0.25],
        epoch_loss=[1.38, 1.33, 1.25, 1.12, 0.98, 0.82],
        epoch_val_loss=val_loss,
    )
    run = RunSignals("r", series=series, events=[counts])
    (finding,) = labels_unrelated(run)
    assert finding.severity == Severity.CRITICAL and "do not belong" in finding.title
    assert "overfitting" not in {f.code for f in engine.diagnose(run)}
    # Imbalanced (80/20) and a weak real model: accuracy near the majority share, but its validation
    # loss beats the prior's entropy (0.50), so it learned something that carries over.
    skewed = stats(loss=LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, units=2, class_counts=(512.0, 128.0))
    weak = epochs(
        epoch_accuracy=[0.80, 0.85, 0.90, 0.96],
        epoch_val_accuracy=[0.80, 0.83, 0.85, 0.86],
        epoch_val_loss=[0.49, 0.42, 0.40, 0.41],
    )
    assert labels_unrelated(RunSignals("r", series=weak, events=[skewed])) == []
    weak[sig.EPOCH_VAL_LOSS] = Series.of(np.arange(1, 5), [0.52, 0.55, 0.61, 0.70])  # never beats it: unrelated
    assert labels_unrelated(RunSignals("r", series=weak, events=[skewed]))
    # Validation leaving chance at any epoch: a real signal was learned.
    series[sig.EPOCH_VAL_ACCURACY] = Series.of(np.arange(1, 7), [0.25, 0.30, 0.38, 0.40, 0.41, 0.40])
    assert labels_unrelated(RunSignals("r", series=series, events=[counts])) == []


def test_a_slow_memoriser_below_chance_on_validation_is_a_pairing_problem_when_the_losses_confirm_it():
    # A CNN on shuffled labels after 25 epochs (learn_less_zoo labels_shuffled_cnn, seed 1), every 3rd epoch.
    counts = stats(loss=LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, units=4, class_counts=(172.0, 165.0, 168.0, 170.0))
    series = epochs(
        epoch_accuracy=[0.253, 0.274, 0.301, 0.316, 0.336, 0.354, 0.356, 0.385, 0.415],
        epoch_val_accuracy=[0.018, 0.164, 0.067, 0.089, 0.107, 0.124, 0.098, 0.062, 0.076],
        epoch_loss=[1.393, 1.381, 1.375, 1.368, 1.357, 1.344, 1.323, 1.299, 1.269],
        epoch_val_loss=[1.403, 1.418, 1.44, 1.46, 1.497, 1.519, 1.571, 1.605, 1.63],
    )
    run = RunSignals("r", series=series, events=[counts])
    (finding,) = labels_unrelated(run)
    assert "never above chance (best 16.4%)" in finding.title
    assert [f.code for f in engine.diagnose(run) if f.severity >= Severity.WARNING] == ["label_problem"]
    # The training loss only 3% below the prior's entropy: not memorising yet, and the median rule holds.
    series[sig.EPOCH_LOSS] = Series.of(np.arange(1, 10), np.linspace(1.393, 1.345, 9))
    assert labels_unrelated(RunSignals("r", series=series, events=[counts])) == []


def test_without_an_accuracy_metric_the_losses_alone_name_labels_that_do_not_belong():
    counts = stats(loss=LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, units=4, class_counts=(160.0, 150.0, 170.0, 160.0))
    val_loss = [1.39, 1.40, 1.43, 1.48, 1.55, 1.64]
    memorising = epochs(epoch_loss=[1.38, 1.33, 1.25, 1.12, 0.98, 0.82], epoch_val_loss=val_loss)
    (finding,) = labels_unrelated(RunSignals("r", series=memorising, events=[counts]))
    assert finding.severity == Severity.WARNING and "never beats the constant prediction (1.385)" in finding.title
    assert "metrics=['accuracy']" in finding.detail and "np.random.permutation" in finding.fixes[0].code
    # A validation loss that beat the constant prediction once: something carried over.
    learned = epochs(epoch_loss=[1.38, 1.33, 1.25, 1.12, 0.98, 0.82], epoch_val_loss=[1.2, 1.1, 1.15, 1.3, 1.4, 1.5])
    assert labels_unrelated(RunSignals("r", series=learned, events=[counts])) == []
    # The training loss only 5% below it: not memorising enough to say so without accuracy.
    slow = epochs(epoch_loss=[1.39, 1.38, 1.37, 1.36, 1.34, 1.32], epoch_val_loss=val_loss)
    assert labels_unrelated(RunSignals("r", series=slow, events=[counts])) == []
    # A regression loss: its constant prediction (the mean) is not judged this way.
    regression = stats(loss=LossKind.MEAN_SQUARED_ERROR, units=1, count=640, mean=0.0, variance=1.0)
    flat = epochs(epoch_loss=[1.0, 0.8, 0.6, 0.5, 0.4, 0.3], epoch_val_loss=[1.0, 1.0, 1.1, 1.2, 1.2, 1.3])
    assert labels_unrelated(RunSignals("r", series=flat, events=[regression])) == []


# -- unnormalized_input: inputs scaled to almost nothing -----------------------------------------
def test_tiny_inputs_are_named_but_sparse_features_are_not():
    model = keras.Sequential([keras.Input((300,)), keras.layers.Dense(4)])
    rng = np.random.default_rng(0)
    (event,) = check_input_scale(model, (rng.random((64, 300)) / 255).astype("float32"))
    assert event.check == LintCheck.TINY_INPUT and event.input_max < 0.01
    twice = (rng.normal(size=(64, 300)) / 255).astype("float32")  # standardised, then / 255: tails ~0.02
    assert [e.check for e in check_input_scale(model, twice)] == [LintCheck.TINY_INPUT]
    one_hot = np.eye(300, dtype="float32")[rng.integers(0, 300, 64)]  # RMS 0.06, values 0 and 1
    assert check_input_scale(model, one_hot) == []
    assert check_input_scale(model, rng.random((64, 300)).astype("float32")) == []


# -- loss_metric_mismatch ----------------------------------------------------------------------
def test_a_custom_loss_that_contradicts_the_accuracy_is_named():
    custom = stats(loss=None, units=4, class_counts=(160.0, 160.0, 160.0, 160.0))  # 20 batches of 32
    wrong_axis = epochs(epoch_accuracy=[0.6, 0.9, 0.97], epoch_loss=[3.3, 2.9, 2.8])  # ln 4 = 1.39
    (finding,) = check_loss_metric_mismatch(RunSignals("r", series=wrong_axis, events=[custom]))
    assert "contradicts" in finding.title and "axis=-1" in finding.fixes[0].code
    right = epochs(epoch_accuracy=[0.6, 0.9, 0.97], epoch_loss=[1.1, 0.3, 0.1])
    assert check_loss_metric_mismatch(RunSignals("r", series=right, events=[custom])) == []
    summed = {sig.LOSS: Series.of([1, 2, 3], [44.0, 40.0, 35.0])}  # 32 x ln 4 = 44.4
    (finding,) = check_loss_metric_mismatch(RunSignals("r", series=summed, events=[custom]))
    assert "summed" in finding.title and "reduce_sum" in finding.fixes[0].code
    mean = {sig.LOSS: Series.of([1, 2, 3], [1.45, 1.3, 1.2])}
    assert check_loss_metric_mismatch(RunSignals("r", series=mean, events=[custom])) == []
    # Keras' own losses are never judged here.
    builtin = stats(loss=LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, units=4, class_counts=(160.0,) * 4)
    assert check_loss_metric_mismatch(RunSignals("r", series=wrong_axis, events=[builtin])) == []


# -- preflight: the same cause, named before the first step ----------------------------------------
def _symmetric_mlp() -> keras.Model:
    same = keras.initializers.Constant(0.05)
    return keras.Sequential(
        [
            keras.Input((10,)),
            keras.layers.Dense(32, activation="relu", kernel_initializer=same),
            keras.layers.Dense(4, kernel_initializer=same),
        ]
    )


def test_preflight_names_a_symmetric_initialisation_before_training(tmp_path):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(64, 10)).astype("float32"), rng.integers(0, 4, 64).astype("int32")
    model = _symmetric_mlp()
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    report = tb_trainhealth.preflight(model, x, y)
    codes = [f.code for f in report.findings if f.severity >= Severity.WARNING]
    assert codes[0] == "bad_initialization", codes
    healthy = keras.Sequential([keras.Input((10,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)])
    healthy.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert "bad_initialization" not in {f.code for f in tb_trainhealth.preflight(healthy, x, y).findings}


def test_a_nan_from_the_initialisation_is_named_with_or_without_preflight(tmp_path):
    from scenarios import _classes, _deep_relu_mlp

    x, y = _classes(640, 10, 4, 0)
    for preflight in (True, False):
        keras.utils.set_random_seed(0)
        model = _deep_relu_mlp(keras.initializers.RandomNormal(stddev=1.0))
        model.compile(keras.optimizers.SGD(0.01, momentum=0.9), keras.losses.SparseCategoricalCrossentropy(True))
        callback = HealthCallback(str(tmp_path / f"p{preflight}"), preflight=preflight, verbose=False)
        model.fit(x, y, epochs=1, verbose=0, callbacks=[callback])
    runs = diagnose_logdir(str(tmp_path))
    for name in ("pTrue", "pFalse"):
        found = [f for f in runs[name] if f.severity >= Severity.WARNING]
        assert found[0].code == "bad_initialization" and "nonfinite" not in {f.code for f in found}, found
        assert "learning rate does not help" in found[0].detail
    small_batch = {f.code: f for f in runs["pTrue"]}.get("cannot_fit_small_batch")
    assert small_batch is None or "bad_initialization" in small_batch.title + small_batch.detail
