"""Runs that train without an error but learn far less than they could (team issue 36).

In-memory RunSignals for the thresholds; two real tiny trainings (a broken run found, its
one-setting twin quiet). The full evidence is `python bench/learn_less_zoo.py`.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LOAD_DEPENDENT

from tb_trainhealth import engine
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import FitEndEvent, LintEvent
from tb_trainhealth.contract.run_info import RunInfo
from tb_trainhealth.contract.run_settings import RunSettings
from tb_trainhealth.contract.vocab import LintCheck, LossKind
from tb_trainhealth.findings import Severity
from tb_trainhealth.rules.common_fixes import RAISE
from tb_trainhealth.rules.loss_curve import check_loss_plateau
from tb_trainhealth.rules.loss_oscillation import check_loss_oscillation
from tb_trainhealth.rules.model_lint import check_model_config
from tb_trainhealth.rules.training_data import check_label_problem
from tb_trainhealth.rules.undertrained import check_undertrained
from tb_trainhealth.signals import LayerSeries, RunSignals, Series

RNG = np.random.default_rng(0)


def epochs_run(settings: dict | None = None, events: list | None = None, info: RunInfo | None = None, **series):
    """A run on the epoch axis (epochs numbered from 1) with the given per-epoch series."""
    return RunSignals(
        "r",
        series={k: Series.of(np.arange(1, len(v) + 1), v) for k, v in series.items()},
        events=events or [],
        settings=RunSettings(settings=settings or {}),
        info=info or RunInfo(),
        axis=sig.EPOCH_AXIS,
    )


def with_update_ratio(run: RunSignals, ratio: float) -> RunSignals:
    steps = np.arange(20, 20 * 11, 20)
    run.layer_series[sig.LAYER_UPDATE_RATIO] = LayerSeries(steps, np.full((len(steps), 2), ratio))
    return run


def stats(counts: tuple[float, ...]) -> LintEvent:
    return LintEvent(0, LintCheck.LABEL_STATISTICS, loss=LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, class_counts=counts)


FALLING = 1.4 * np.exp(-np.arange(12) / 40)  # a slow, steady fall (full batch: ~2% an epoch)


# -- too few optimizer steps --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("samples", "batch", "loss", "fires"),
    [
        (600, 600, FALLING, True),  # 12 steps, still falling steadily
        (600, 32, FALLING, False),  # 228 steps: judged by the ordinary per-epoch rule, not as too few steps
        (600, 600, np.r_[FALLING[:6], np.full(6, FALLING[6])], False),  # few steps, but flat at the end
    ],
    ids=["full-batch-falling", "many-steps", "few-steps-converged"],
)
def test_too_few_steps_needs_few_steps_and_a_loss_still_falling(samples, batch, loss, fires):
    run = epochs_run({"train_samples": samples, "batch_size": batch}, epoch_loss=loss, epoch_val_loss=loss * 0.98)
    found = [f for f in check_undertrained(run) if "optimizer steps" in f.title]
    assert bool(found) == fires
    if fires:
        assert found[0].severity == Severity.WARNING and "12 optimizer steps" in found[0].title
        assert "batch_size=600" in found[0].detail


@pytest.mark.parametrize(("val_loss", "fires"), [(0.8, True), (0.05, False)], ids=["untrained", "already-fits"])
def test_a_run_of_a_handful_of_steps_is_undertrained_unless_it_already_fits(val_loss, fires):
    """One epoch of 3 steps (real-bug zoo dm_iris_one_epoch): no trend to judge, the step count says it."""
    constant = LintEvent(
        0, LintCheck.LABEL_STATISTICS, constant_loss=1.1, constant_how="predicting the class frequencies"
    )
    run = epochs_run({"train_samples": 96, "batch_size": 32}, [constant], epoch_loss=[1.2], epoch_val_loss=[val_loss])
    found = [f for f in check_undertrained(run) if "optimizer steps" in f.title]
    assert bool(found) == fires
    if fires:
        assert found[0].severity == Severity.WARNING and "Only 3 optimizer steps" in found[0].title


# -- EarlyStopping set too tight ------------------------------------------------------------------
STOPPED = [FitEndEvent(6, epochs_run=6, epochs_planned=50, stopped_early=True, stopped_by=("EarlyStopping",))]
STILL_FALLING = np.array([0.315, 0.19, 0.145, 0.125, 0.112, 0.101])  # the zoo's min_delta run


@pytest.mark.parametrize(
    ("patience", "min_delta", "val", "named"),
    [
        (2, 0.05, STILL_FALLING, "min_delta"),
        (0, 0.0, STILL_FALLING, "patience"),
        (5, 0.0, STILL_FALLING, None),  # a patience the user chose on purpose
        (0, 0.0, np.array([0.315, 0.19, 0.15, 0.149, 0.149, 0.150]), None),  # converged: stopping was right
    ],
    ids=["min-delta", "patience-0", "patience-5", "converged"],
)
def test_early_stopping_that_stopped_a_run_still_improving_names_the_setting(patience, min_delta, val, named):
    settings = {"EarlyStopping.patience": patience, "EarlyStopping.min_delta": min_delta}
    settings["EarlyStopping.monitor"] = "val_loss"
    run = epochs_run(settings, STOPPED, epoch_loss=val * 1.3, epoch_val_loss=val)
    found = check_undertrained(run)
    assert [f.title.split("(")[1].split(")")[0] for f in found] == ([named] if named else [])


# -- training labels of another class mix than validation ------------------------------------------
@pytest.mark.parametrize(
    ("val_accuracy", "fires"),
    [(np.linspace(0.36, 0.61, 10), True), (np.linspace(0.9, 0.95, 10), False)],
    ids=["validation-far-below-the-share", "minority-learned"],
)
def test_class_mix_differs_needs_validation_far_below_the_majority_share(val_accuracy, fires):
    run = epochs_run(
        events=[stats((960.0, 21.0, 17.0))],
        epoch_accuracy=np.linspace(0.76, 0.98, 10),
        epoch_val_accuracy=val_accuracy,
    )
    found = check_label_problem(run)
    assert bool(found) == fires
    if fires:
        assert "class mix" in found[0].title


# -- a plateau names why the weights do not move, and raises the rate once ---------------------------
@pytest.mark.parametrize(
    ("info", "settings", "words"),
    [
        (RunInfo(optimizer="Adam", learning_rate=3e-6), {}, "learning rate (3e-06) is too small"),
        (RunInfo(optimizer="SGD", learning_rate=0.05, clips_gradients=True), {"clipvalue": 1e-6}, "clipvalue=1e-06"),
        (RunInfo(optimizer="Adadelta", learning_rate=1e-3), {}, "Adadelta at learning rate 0.001"),
    ],
    ids=["tiny-rate", "tight-clipping", "adadelta-default"],
)
def test_a_frozen_plateau_names_its_cause_and_raises_the_rate_once(info, settings, words):
    run = RunSignals(
        "r",
        series={sig.LOSS: Series.of(np.arange(1, 401), 1.0 + 0.01 * RNG.normal(size=400))},
        info=info,
        settings=RunSettings(settings=settings),
    )
    (finding,) = check_loss_plateau(with_update_ratio(run, 3e-7))
    assert words in finding.title
    assert sum(f.text.startswith(RAISE) for f in finding.fixes) <= 1
    (diagnosed,) = [f for f in engine.diagnose(run) if f.code == "loss_plateau"]
    assert sum(f.text.startswith(RAISE) for f in diagnosed.fixes) <= 1


def test_a_plateau_at_the_baseline_with_normal_steps_puts_the_labels_first_not_the_learning_rate():
    run = RunSignals(
        "r",
        series={sig.LOSS: Series.of(np.arange(1, 401), np.log(4) + 0.01 * RNG.normal(size=400))},
        events=[stats((250.0, 250.0, 250.0, 250.0))],
        info=RunInfo(optimizer="Adam", learning_rate=1e-3),
    )
    (finding,) = check_loss_plateau(with_update_ratio(run, 8e-4))
    assert not finding.fixes[0].text.startswith(RAISE)


# -- a loss that bounces from epoch to epoch while still large ----------------------------------------
# The zoo's bouncing_regression (targets x20, plain SGD 0.03), seed 0.
BOUNCING_VAL = np.concatenate(
    [
        [113, 174, 158, 206, 206, 141, 70, 66, 85, 96, 118, 68, 54, 44, 43],
        [56, 48, 47, 50, 44, 68, 47, 50, 39, 67, 47, 105, 40, 36, 58],
    ]
).astype(float)
BOUNCING_TRAIN = np.concatenate(
    [
        [152, 161, 174, 159, 192, 180, 112, 72, 75, 204, 70, 59, 61, 53, 63],
        [71, 58, 54, 59, 56, 58, 51, 67, 45, 64, 54, 48, 47, 47, 42],
    ]
).astype(float)


@pytest.mark.parametrize(
    ("val", "ratio", "fires"),
    [
        (BOUNCING_VAL, 0.028, True),
        (BOUNCING_VAL, 5e-4, False),  # normal-sized steps: a noisy validation set, not the learning rate
        (np.linspace(113, 12, 30), 0.028, False),  # falls smoothly
    ],
    ids=["bouncing", "normal-steps", "smooth"],
)
def test_swinging_epochs_on_a_large_loss_are_oscillation(val, ratio, fires):
    run = epochs_run(info=RunInfo(learning_rate=0.03), epoch_loss=BOUNCING_TRAIN, epoch_val_loss=val)
    found = check_loss_oscillation(with_update_ratio(run, ratio))
    assert bool(found) == fires
    if fires:
        assert "learning rate (0.03) is too high" in found[0].title


# -- a lint or a setting confirmed by the run ------------------------------------------------------
def test_a_strong_penalty_is_a_warning_only_when_the_model_stays_at_the_prior():
    settings = {"dense.kernel_regularizer": "L2(l2=3)", "dense_1.kernel_regularizer": "L2(l2=3)"}
    at_prior = epochs_run(
        settings,
        [stats((235.0, 243.0, 268.0, 254.0))],
        epoch_loss=np.linspace(136, 1.67, 15),
        epoch_accuracy=np.r_[np.linspace(0.26, 0.53, 5), np.full(10, 0.268)],
        epoch_val_accuracy=np.r_[np.linspace(0.26, 0.49, 5), np.full(10, 0.198)],
    )
    (finding,) = check_model_config(at_prior)
    assert finding.severity == Severity.WARNING and "L2(l2=3)" in finding.title
    learns = epochs_run(
        {"dense.kernel_regularizer": "L2(l2=0.0001)"},
        [stats((235.0, 243.0, 268.0, 254.0))],
        epoch_loss=np.linspace(1.4, 0.1, 15),
        epoch_accuracy=np.linspace(0.3, 0.98, 15),
    )
    assert check_model_config(learns) == []


@pytest.mark.parametrize(
    ("train_accuracy", "train_loss", "severity"),
    [
        (np.full(15, 0.26), np.linspace(5.8, 2.5, 15), Severity.WARNING),
        (np.linspace(0.3, 0.9, 15), np.linspace(1.4, 0.3, 15), Severity.INFO),
    ],
    ids=["at-chance", "learning"],
)
def test_high_dropout_is_a_warning_when_the_model_is_at_chance(train_accuracy, train_loss, severity):
    run = epochs_run(
        events=[LintEvent(0, LintCheck.HIGH_DROPOUT, layer="dropout", rate=0.95), stats((235.0, 243.0, 268.0, 254.0))],
        epoch_loss=train_loss,
        epoch_accuracy=train_accuracy,
        epoch_val_accuracy=np.linspace(0.32, 0.42, 15),
    )
    (finding,) = check_model_config(run)
    assert finding.severity == severity


# -- real tiny training ---------------------------------------------------------------------------------
def _train(tmp_path, name: str, *, dropout: float, batch_size: int, epochs: int):
    import keras

    from tb_trainhealth import HealthCallback
    from tb_trainhealth.read.logdir import open_logdir
    from tb_trainhealth.read.reader import SignalReader

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=1.6, size=(4, 8))
    y = rng.integers(0, 4, 800)
    x = (centres[y] + rng.normal(size=(800, 8))).astype("float32")
    layers = [keras.Input((8,)), keras.layers.Dense(16, activation="relu")]
    layers += [keras.layers.Dropout(dropout)] if dropout else []
    layers += [keras.layers.Dense(16, activation="relu")]
    layers += [keras.layers.Dropout(dropout)] if dropout else []
    model = keras.Sequential([*layers, keras.layers.Dense(4)])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(keras.optimizers.Adam(3e-3), loss, metrics=["accuracy"])
    root = tmp_path / name
    model.fit(
        x[:600],
        y[:600],
        validation_data=(x[600:], y[600:]),
        epochs=epochs,
        batch_size=batch_size,
        verbose=0,
        callbacks=[HealthCallback(log_dir=str(root / "run"), verbose=False)],
    )
    reader = SignalReader(open_logdir(str(root)))
    (group,) = reader.groups()
    return engine.diagnose(reader.read(group))


def loud(findings) -> list[tuple[str, str]]:
    """Warning and critical findings, the load-dependent input_bound aside (conftest.LOAD_DEPENDENT)."""
    return [(f.code, f.title) for f in findings if f.severity >= Severity.WARNING and f.code not in LOAD_DEPENDENT]


@pytest.mark.parametrize(
    ("ratio", "per_epoch", "fires"),
    [
        (1.8e-5, 0.986, True),  # lr_tiny_regression_sgd, held-out seed 4: 1.4% an epoch at a crawl
        (5e-4, 0.986, False),  # the same fall with healthy-sized steps: a slow but normal run
        (1.8e-5, 1.0, False),  # frozen weights and a flat loss: loss_plateau's case, not this one
    ],
)
def test_a_loss_falling_at_a_crawl_with_frozen_steps_is_learning_too_slowly(ratio, per_epoch, fires):
    losses = 0.78 * per_epoch ** np.arange(15)
    run = with_update_ratio(
        epochs_run(info=RunInfo(optimizer="SGD", learning_rate=1e-5), epoch_loss=losses, epoch_val_loss=losses * 0.96),
        ratio,
    )
    found = [f for f in engine.diagnose(run) if f.code == "undertrained"]
    assert bool(found) == fires, [f.title for f in found]
    if fires:
        assert found[0].severity == Severity.WARNING and "Learning far too slowly" in found[0].title
        assert (
            "learning rate (1e-05) is too small" in found[0].title
            and "SGD(learning_rate=0.001" in found[0].fixes[0].code  # never below 1e-3 (common_fixes.USUAL_RATE)
        )


def test_a_converged_run_whose_schedule_ends_with_tiny_steps_is_not_learning_too_slowly():
    # healthy_sweep cnn_hv_bars_logits_adamw_cosine_warmup_bs128, compiled without an accuracy metric.
    train = [0.686, 0.605, 0.263, 0.0182, 0.00226, 0.00127, 0.000938, 0.00074, 0.000603, 0.000504, 0.00043]
    train += [0.000373, 0.000329, 0.000294, 0.000265, 0.000242, 0.000224, 0.000208, 0.000195, 0.000184, 0.000175]
    train += [0.000168, 0.000161, 0.000156, 0.000152, 0.000149, 0.000146, 0.000144, 0.000143, 0.000142]
    val = [0.667, 0.486, 0.0586, 0.00355, 0.0015, 0.00105, 0.000813, 0.000654, 0.00054, 0.000457, 0.000393]
    val += [0.000344, 0.000305, 0.000274, 0.000249, 0.000229, 0.000212, 0.000198, 0.000186, 0.000177, 0.000169]
    val += [0.000162, 0.000156, 0.000152, 0.000148, 0.000145, 0.000143, 0.000141, 0.00014, 0.000139]
    run = with_update_ratio(epochs_run(info=RunInfo(optimizer="AdamW"), epoch_loss=train, epoch_val_loss=val), 5.7e-5)
    assert [f.title for f in engine.diagnose(run) if f.code == "undertrained"] == []


def test_dropout_095_is_the_cause_and_its_twin_is_quiet(tmp_path):
    broken = loud(_train(tmp_path, "broken", dropout=0.95, batch_size=32, epochs=8))
    assert broken and broken[0][0] == "model_config" and "Dropout" in broken[0][1], broken
    assert loud(_train(tmp_path, "twin", dropout=0.2, batch_size=32, epochs=8)) == []


def test_a_batch_the_size_of_the_data_set_is_too_few_steps_and_its_twin_is_quiet(tmp_path):
    broken = loud(_train(tmp_path, "broken", dropout=0.0, batch_size=600, epochs=12))
    assert broken and broken[0][0] == "undertrained" and "optimizer steps" in broken[0][1], broken
    assert loud(_train(tmp_path, "twin", dropout=0.0, batch_size=32, epochs=12)) == []


# -- the data settings the label checks read (write side) ---------------------------------------------
def _duplicated(rows: int, share: float, conflicting: bool):
    """`rows` distinct samples of 4 classes, and a copy of `share` of them (another label if `conflicting`)."""
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(rows, 6)).astype("float32"), rng.integers(0, 4, rows).astype("int32")
    copies = rng.choice(rows, int(rows * share), replace=False)
    shifted = (y[copies] + rng.integers(1, 4, copies.size)) % 4 if conflicting else y[copies]
    return np.concatenate([x, x[copies]]), np.concatenate([y, shifted.astype("int32")])


def test_data_settings_record_validation_shares_and_conflicting_duplicates():
    from tb_trainhealth.callback.data_settings import data_settings

    x, y = _duplicated(1000, 0.4, conflicting=True)
    val_y = np.array([0, 0, 0, 1, 2, 2, 2, 2], "int32")
    found = data_settings(
        {"x": x, "y": y, "val_x": x[:8], "val_y": val_y}, None, LossKind.SPARSE_CATEGORICAL_CROSSENTROPY
    )
    assert found["validation_label_distribution"] == [0.375, 0.125, 0.5]
    # 400 inputs twice, each with two labels: 800 of 1400 samples conflict, 400 can never be fitted.
    assert found["duplicate_label_conflict"] == round(800 / 1400, 4)
    assert found["duplicate_label_ceiling"] == round(1000 / 1400, 4)
    assert found["distinct_input_share"] == round(1000 / 1400, 4)
    agreeing = data_settings({"x": x, "y": _duplicated(1000, 0.4, conflicting=False)[1]}, None, None)
    assert agreeing["duplicate_label_conflict"] == 0.0 and agreeing["duplicate_label_ceiling"] == 1.0
    assert agreeing["distinct_input_share"] == round(1000 / 1400, 4)
    targets = data_settings({"x": x, "y": y.astype("float32")}, None, LossKind.MEAN_SQUARED_ERROR)
    assert "duplicate_label_conflict" not in targets and "validation_label_distribution" not in targets


def test_duplicates_are_judged_on_every_feature_and_left_out_above_the_size_limit(monkeypatch):
    from tb_trainhealth.callback import data_settings

    x, y = _duplicated(300, 0.5, conflicting=True)
    one_hot = np.eye(4, dtype="float32")[y]
    same_on_the_grid = x.copy()
    same_on_the_grid[:, ::2] = 1.0  # all rows alike on the features the pass reads...
    monkeypatch.setattr(data_settings, "MAX_FINGERPRINT_VALUES", 1800)  # ...every 2nd of 450 x 6 (labels: all)
    assert data_settings.feature_stride(450, 6) == 2 and data_settings.feature_stride(450, 4) == 1
    loss = LossKind.CATEGORICAL_CROSSENTROPY
    found = data_settings.array_statistics([same_on_the_grid], [one_hot], True)
    assert found["duplicate_label_conflict"] == round(300 / 450, 4)  # the real copies only: rows differ elsewhere
    alike = np.ones_like(x)  # alike on every feature: one input, four labels
    assert data_settings.array_statistics([alike], [one_hot], True)["duplicate_label_conflict"] == 1.0
    with_nan = x.copy()
    with_nan[:10, 0] = np.nan  # rows of NaN would all share one key: no duplicate settings then
    assert "duplicate_label_conflict" not in data_settings.array_statistics([with_nan], [one_hot], True)
    monkeypatch.setattr(data_settings, "MAX_DUPLICATE_ROWS", 400)
    assert "duplicate_label_conflict" not in data_settings.data_settings({"x": x, "y": one_hot}, None, loss)


# -- training labels unlike the validation labels; one input with several labels (rules) -----------------
BALANCED = [0.25, 0.25, 0.25, 0.25]
FILTERED = [0.3333, 0.3333, 0.3334]  # class 3 filtered out of training


@pytest.mark.parametrize(
    ("train_shares", "val_samples", "train_accuracy", "val_accuracy", "fires"),
    [
        (FILTERED, 600, np.linspace(0.7, 0.99, 10), np.linspace(0.70, 0.737, 10), True),
        (FILTERED, 600, np.linspace(0.7, 0.95, 10), np.linspace(0.70, 0.93, 10), False),  # a shift that learns
        ([0.35, 0.15, 0.275, 0.225], 40, np.linspace(0.6, 1.0, 10), np.linspace(0.6, 0.8, 10), False),  # chance
    ],
    ids=["filtered-and-confirmed", "shifted-but-learns", "small-validation-set"],
)
def test_class_shares_unlike_validation_need_a_real_distance_and_validation_far_below(
    train_shares, val_samples, train_accuracy, val_accuracy, fires
):
    settings = {
        "label_distribution": train_shares,
        "validation_label_distribution": BALANCED,
        "train_samples": 1300,
        "validation_samples": val_samples,
    }
    run = epochs_run(settings, epoch_accuracy=train_accuracy, epoch_val_accuracy=val_accuracy)
    found = check_label_problem(run)
    assert bool(found) == fires
    if fires:
        assert "different class shares" in found[0].title and "class 3: 0.0% of training labels" in found[0].detail
        assert any("np.bincount" in (fix.code or "") for fix in found[0].fixes)


def test_the_validation_gap_of_class_shares_apart_is_the_label_problem_not_overfitting():
    settings = {"label_distribution": FILTERED, "validation_label_distribution": BALANCED}
    settings |= {"train_samples": 1300, "validation_samples": 600}
    curves = {
        "epoch_accuracy": np.linspace(0.7, 0.99, 10),
        "epoch_val_accuracy": np.linspace(0.70, 0.737, 10),
        "epoch_loss": np.linspace(0.8, 0.05, 10),
        "epoch_val_loss": np.r_[0.8, 0.7, 0.65, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3],
    }
    alone = epochs_run({}, **curves)  # the same curves without the label settings: overfitting
    assert "overfitting" in [f.code for f in engine.diagnose(alone)]
    found = [f.code for f in engine.diagnose(epochs_run(settings, **curves)) if f.severity >= Severity.WARNING]
    assert "label_problem" in found and "overfitting" not in found


def test_a_model_that_never_beat_the_constant_prediction_is_not_called_overfitting():
    from tb_trainhealth.rules.overfitting import check_overfitting

    # labels_shuffled_cnn seed 4 (epochs 1, 2, then every 3rd): the entropy of 4 balanced classes is 1.386.
    val_loss = [1.411, 1.394, 1.446, 1.473, 1.482, 1.49, 1.502, 1.52, 1.54]
    train_loss = [1.4, 1.384, 1.378, 1.373, 1.367, 1.361, 1.354, 1.341, 1.328]
    balanced = stats((170.0, 170.0, 170.0, 170.0))
    assert check_overfitting(epochs_run(events=[balanced], epoch_loss=train_loss, epoch_val_loss=val_loss)) == []
    # The same shape once the model had learned something that carries over: overfitting.
    learned = [v - 0.3 for v in val_loss]
    assert check_overfitting(epochs_run(events=[balanced], epoch_loss=train_loss, epoch_val_loss=learned))
    # And where the training loss went well below the baseline: memorising, still reported.
    memorised = [1.4, 1.3, 1.2, 1.1, 1.0, 0.9, 0.8, 0.7, 0.6]
    assert check_overfitting(epochs_run(events=[balanced], epoch_loss=memorised, epoch_val_loss=val_loss))


def test_class_shares_of_regression_targets_are_not_compared():
    settings = {"label_distribution": [0.5, 0.5], "validation_label_distribution": [0.9, 0.1]}
    settings |= {"train_samples": 1000, "validation_samples": 1000}
    run = epochs_run(
        settings,
        info=RunInfo(loss="mean_squared_error"),
        epoch_accuracy=np.linspace(0.7, 0.99, 10),
        epoch_val_accuracy=np.linspace(0.5, 0.6, 10),
    )
    assert check_label_problem(run) == []


@pytest.mark.parametrize(
    ("ceiling", "distinct", "train_accuracy", "fires"),
    [
        (0.714, 0.714, np.r_[0.5, np.full(9, 0.66)], True),  # 40% of rows copied with another label
        (0.866, 0.027, np.r_[0.75, np.full(9, 0.86)], False),  # 64 categorical inputs: noisy by nature
        (1.0, 0.714, np.linspace(0.7, 0.95, 10), False),  # copies that agree
        (0.714, 0.714, np.linspace(0.3, 0.45, 10), False),  # far below the cap: something else holds it
    ],
    ids=["conflicting-copies", "categorical-inputs", "copies-agree", "not-at-the-cap"],
)
def test_conflicting_duplicates_need_a_cap_the_training_accuracy_reaches(ceiling, distinct, train_accuracy, fires):
    settings = {
        "duplicate_label_conflict": round(2 * (1 - ceiling), 4) if ceiling < 1 else 0.0,
        "duplicate_label_ceiling": ceiling,
        "distinct_input_share": distinct,
    }
    run = epochs_run(settings, epoch_accuracy=train_accuracy, epoch_val_accuracy=np.full(10, 0.88))
    found = check_label_problem(run)
    assert bool(found) == fires
    if fires:
        assert "cannot pass 71%" in found[0].title and "Validation accuracy reaches 88.0%" in found[0].detail
        assert any("np.unique" in (fix.code or "") for fix in found[0].fixes)
        assert any("groupby" in (fix.code or "") for fix in found[0].fixes)


# -- ... and the same on real tiny trainings ------------------------------------------------------------
def _fit_labels(tmp_path, name: str, train, val, epochs: int = 12):
    import keras

    from tb_trainhealth import HealthCallback
    from tb_trainhealth.read.logdir import open_logdir
    from tb_trainhealth.read.reader import SignalReader

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)])
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(keras.optimizers.Adam(3e-3), loss, metrics=["accuracy"])
    root = tmp_path / name
    callback = HealthCallback(log_dir=str(root / "run"), verbose=False)
    model.fit(*train, validation_data=val, epochs=epochs, batch_size=32, verbose=0, callbacks=[callback])
    reader = SignalReader(open_logdir(str(root)))
    (group,) = reader.groups()
    return engine.diagnose(reader.read(group))


def _four_blobs(n: int = 1200):
    rng = np.random.default_rng(1)
    centres = rng.normal(scale=1.6, size=(4, 8))
    y = rng.integers(0, 4, n).astype("int32")
    return (centres[y] + rng.normal(scale=1.2, size=(n, 8))).astype("float32"), y


def test_a_training_set_filtered_of_one_class_is_found_and_a_random_subset_is_quiet(tmp_path):
    x, y = _four_blobs()
    train, val = (x[:900], y[:900]), (x[900:], y[900:])
    kept = train[1] != 3  # the filter bug: x_train = x[y != 3]
    broken = loud(_fit_labels(tmp_path, "broken", (train[0][kept], train[1][kept]), val))
    assert broken and broken[0][0] == "label_problem" and "class shares" in broken[0][1], broken
    subset = np.random.default_rng(0).permutation(900)[: int(kept.sum())]
    assert loud(_fit_labels(tmp_path, "twin", (train[0][subset], train[1][subset]), val)) == []


def test_inputs_copied_with_other_labels_are_found_and_copies_that_agree_are_quiet(tmp_path):
    x, y = _four_blobs()
    train, val = (x[:900], y[:900]), (x[900:], y[900:])
    copies = np.random.default_rng(2).choice(900, 400, replace=False)
    other = ((train[1][copies] + 1 + np.arange(400) % 3) % 4).astype("int32")
    x_twice = np.concatenate([train[0], train[0][copies]])
    broken = loud(_fit_labels(tmp_path, "broken", (x_twice, np.concatenate([train[1], other])), val))
    assert broken and broken[0][0] == "label_problem" and "share their exact input" in broken[0][1], broken
    agree = (x_twice, np.concatenate([train[1], train[1][copies]]))
    assert loud(_fit_labels(tmp_path, "twin", agree, val)) == []
