"""`HealthCallback(baseline=...)` during the fit, with real tiny training: a run clearly behind its
baseline at the same step is said so at an epoch end before the last (live, and on the read side);
other seeds of the same set-up are never said behind; a run behind early that catches up is not
worse at the end. The replay over the compare zoo: bench/baseline_during_fit.py."""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest
from test_compare import SETTINGS, run_of

from tb_trainhealth import HealthCallback
from tb_trainhealth.cli import diagnose_logdir
from tb_trainhealth.compare.comparison import behind_finding
from tb_trainhealth.compare.so_far import Yardstick, cut_at, judged_so_far
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import ComparisonEvent, FitEndEvent, PartOffEvent, Verdict
from tb_trainhealth.findings import Finding
from tb_trainhealth.signals import RunSignals, Series

SAMPLES = 1200
EPOCHS = 6
GOOD_RATE = 3e-3


def _data(classifier: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(SAMPLES, 12)).astype("float32")
    hidden = np.tanh(x @ rng.normal(size=(12, 8)))
    if classifier:
        return x, np.argmax(hidden @ rng.normal(size=(8, 3)), axis=1)
    return x, (hidden @ rng.normal(size=8) + 0.1 * rng.normal(size=SAMPLES)).astype("float32")


def _train(log_dir: str, *, seed: int = 0, classifier: bool = True, learning_rate: float = GOOD_RATE,
           schedule=None, baseline: str | None = None, found: list | None = None,
           after: list | None = None) -> HealthCallback:  # fmt: skip
    keras.utils.set_random_seed(seed)
    x, y = _data(classifier)
    head = keras.layers.Dense(3, activation="softmax") if classifier else keras.layers.Dense(1)
    model = keras.Sequential([keras.Input((12,)), keras.layers.Dense(32, activation="relu"), head])
    loss = "sparse_categorical_crossentropy" if classifier else "mse"
    model.compile(keras.optimizers.Adam(learning_rate), loss, metrics=["accuracy"] if classifier else [])
    health = HealthCallback(
        log_dir, verbose=False, baseline=baseline, on_finding=None if found is None else found.append
    )
    callbacks = [health] if schedule is None else [keras.callbacks.LearningRateScheduler(schedule), health]
    callbacks += after or []  # (their hooks run after the HealthCallback's)
    model.fit(x, y, epochs=EPOCHS, batch_size=32, validation_split=0.25, verbose=0, callbacks=callbacks)
    return health


def _comparisons(health: HealthCallback) -> list[ComparisonEvent]:
    recording = health._run.recording
    assert recording is not None
    return recording.signals().events_of(ComparisonEvent)


@pytest.fixture(scope="module")
def baselines(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("baselines")
    paths = {"classifier": str(root / "classifier"), "regression": str(root / "regression")}
    _train(paths["classifier"])
    _train(paths["regression"], classifier=False)
    return paths


def test_a_learning_rate_1000x_too_small_is_said_behind_before_the_last_epoch(baselines, tmp_path):
    found: list[Finding] = []
    log_dir, read_mid_fit = str(tmp_path / "tiny"), []

    def read_the_files(epoch: int, logs: dict) -> None:  # what `watch` and the live tab read
        if epoch == EPOCHS - 2:
            (report,) = diagnose_logdir(log_dir)
            read_mid_fit.extend(f for f in report.findings if f.code == "worse_than_baseline")

    health = _train(log_dir, learning_rate=GOOD_RATE / 1000, baseline=baselines["classifier"], found=found,
                    after=[keras.callbacks.LambdaCallback(on_epoch_end=read_the_files)])  # fmt: skip
    last_step = health._run.step
    during = [e for e in _comparisons(health) if e.during_fit]
    assert [e.verdict for e in during] == ["worse"]  # said once, not at every epoch
    behind = during[0]
    assert behind.step < last_step
    assert behind.finding is not None and behind.finding["step"] == behind.step
    assert behind.finding["title"].startswith("Behind baseline") and "learning_rate" in behind.finding["title"]
    # Live: on_finding got it during the fit, with the step from which the run is behind.
    live = [f for f in found if f.code == "worse_than_baseline"]
    assert live and live[0].title == behind.finding["title"] and live[0].step < last_step
    # The event files, read during the fit, say it too (`watch`, the live Health tab).
    assert [f.title for f in read_mid_fit] == [behind.finding["title"]]
    # The read side: the end-of-fit verdict is current, and it says since when the run was behind.
    (result,) = diagnose_logdir(log_dir)
    (worse,) = [f for f in result.findings if f.code == "worse_than_baseline"]
    assert worse.title.startswith("Worse than baseline")
    assert f"Behind the baseline since step {behind.step}." in worse.detail
    assert any(entry.text.startswith("behind baseline") for entry in result.timeline)


@pytest.mark.parametrize("classifier, seeds", [(True, (1, 2)), (False, (1, 2))], ids=["classifier", "regression"])
def test_another_seed_is_never_said_behind(baselines, tmp_path, classifier, seeds):
    baseline = baselines["classifier" if classifier else "regression"]
    for seed in seeds:
        health = _train(str(tmp_path / f"seed{seed}"), seed=seed, classifier=classifier, baseline=baseline)
        comparisons = _comparisons(health)
        assert [(e.during_fit, e.verdict) for e in comparisons] == [(False, "same")], comparisons
        assert not health.guard.disabled


def test_a_run_behind_early_that_catches_up_is_not_worse_at_the_end(baselines, tmp_path):
    def warm_up(epoch: int, rate: float) -> float:  # two epochs at a rate 1000x too small, then a good one
        return GOOD_RATE / 1000 if epoch < 2 else 1e-2

    health = _train(str(tmp_path / "warm"), schedule=warm_up, baseline=baselines["classifier"])
    comparisons = _comparisons(health)
    assert (comparisons[0].during_fit, comparisons[0].verdict) == (True, "worse")
    assert comparisons[-1].during_fit is False and comparisons[-1].verdict == "same"
    assert "worse_than_baseline" not in [f.code for f in health.findings]
    (result,) = diagnose_logdir(str(tmp_path / "warm"))
    assert "worse_than_baseline" not in [f.code for f in result.findings]


# -- the check itself, on runs built in memory (test_compare.run_of: val_accuracy rising to 0.9) -----


def test_the_run_so_far_is_judged_at_the_same_step_not_against_the_baseline_end():
    baseline = run_of("base", epochs=10)
    halfway = dataclasses.replace(baseline.before(4 * 40 + 1), run="twin")  # a twin, 4 epochs in
    stick = Yardstick.of(halfway, baseline)
    judged = judged_so_far(halfway, baseline, stick)
    assert judged is not None and judged.judgement.verdict is Verdict.SAME
    assert judged.run_end == judged.baseline_end == 160
    stuck = run_of("stuck", val_accuracy=0.3, epochs=10)
    assert judged_so_far(stuck.before(41), baseline, stick) is None  # one epoch: too early to say
    judged = judged_so_far(stuck.before(4 * 40 + 1), baseline, stick)
    assert judged is not None and judged.judgement.verdict is Verdict.WORSE and "at step 160" in judged.judgement.why


def test_a_baseline_shorter_than_the_run_is_judged_over_its_own_steps():
    baseline = run_of("base", epochs=10).before(5 * 40 + 1)  # stopped after 5 of its 10 epochs
    longer = run_of("longer", val_accuracy=0.9, epochs=10, seed=1)
    judged = judged_so_far(longer, baseline, Yardstick.of(longer, baseline))
    assert judged is not None and judged.judgement.verdict is Verdict.SAME
    assert judged.run_end == judged.baseline_end == 200


def test_a_run_most_of_an_epoch_behind_a_steep_baseline_is_within_its_own_move():
    baseline = run_of("base", epochs=10)
    lagging = run_of("lagging", epochs=10, seed=1)
    epochs = np.arange(1, 11)
    late = 0.25 + (0.9 - 0.25) * (1 - np.exp(-(epochs - 0.7) / 2))  # 0.7 epoch behind the baseline's curve
    lagging.series[sig.EPOCH_VAL_ACCURACY] = Series.of(epochs * 40, late)
    at_two = lagging.before(2 * 40 + 1)
    judged = judged_so_far(at_two, baseline, Yardstick.of(at_two, baseline))
    gap = baseline.series[sig.EPOCH_VAL_ACCURACY].values[1] - late[1]
    assert gap > 0.06  # beyond two seeds' noise at the end of a run...
    assert judged is not None and judged.judgement.verdict is Verdict.SAME  # ...not beyond the baseline's move there


def test_a_baseline_with_epochs_only_is_judged_epoch_by_epoch():
    full = run_of("base", epochs=10)  # its epochs end at steps 40, 80, ...: read back as epochs 1, 2, ...
    epochs_only = RunSignals(
        "keras_only",
        series={name: Series(np.arange(1, 11), full.series[name].values) for name in (sig.EPOCH_LOSS,
                sig.EPOCH_ACCURACY, sig.EPOCH_VAL_ACCURACY)},
        axis=sig.EPOCH_AXIS,
    )  # fmt: skip
    stuck = run_of("stuck", val_accuracy=0.3, epochs=10).before(3 * 40 + 1)
    judged = judged_so_far(stuck, epochs_only, Yardstick.of(stuck, epochs_only))
    assert judged is not None and judged.judgement.verdict is Verdict.WORSE
    assert (judged.run_end, judged.baseline_end) == (120, 3)
    twin = full.before(3 * 40 + 1)
    judged = judged_so_far(twin, epochs_only, Yardstick.of(twin, epochs_only))
    assert judged is not None and judged.judgement.verdict is Verdict.SAME


def test_mid_fit_a_run_without_its_end_of_fit_is_not_taken_for_one_that_stopped_early():
    baseline = run_of("base", epochs=10)
    settings = dict(SETTINGS, epochs=30, learning_rate=1e-4)  # planned for longer, at a 10x smaller rate
    still_training = dataclasses.replace(run_of("run", settings, val_accuracy=0.4, epochs=10), events=[])
    judged = judged_so_far(cut_at(still_training, 120), baseline, Yardstick.of(still_training, baseline))
    assert judged is not None and judged.judgement.verdict is Verdict.WORSE
    finding = behind_finding(cut_at(still_training, 120), cut_at(baseline, 120), judged.judgement, since=120)
    assert finding.title.startswith("Behind baseline base since step 120: likely cause learning_rate")
    assert "stopped after fewer epochs" not in finding.detail


def test_epochs_of_another_length_are_judged_epoch_by_epoch_not_at_the_same_step():
    """A batch 4x smaller makes 4x the steps per epoch: at the run's third epoch (step 480) the
    baseline (40 steps an epoch) ended long ago; a twin is judged against the baseline's third epoch."""
    baseline = run_of("base", epochs=10)
    smaller_batches = run_of("twin", epochs=10, steps=1600, seed=1).before(3 * 160 + 1)
    judged = judged_so_far(smaller_batches, baseline, Yardstick.of(smaller_batches, baseline))
    assert judged is not None and judged.judgement.verdict is Verdict.SAME
    assert (judged.run_end, judged.baseline_end) == (480, 120)


def test_mid_fit_an_accuracy_of_another_meaning_does_not_decide():
    """What the run's metrics resolved to comes from the model mid-fit (its end of fit is not written
    yet): exact equality of real numbers against the share of correct classes is no comparison."""
    baseline = run_of("base", epochs=10)
    baseline.events = [FitEndEvent(400, epochs_run=10, metric_classes={"accuracy": "SparseCategoricalAccuracy"})]
    stuck = run_of("stuck", val_accuracy=0.3, epochs=10).before(4 * 40 + 1)
    assert judged_so_far(stuck, baseline, Yardstick.of(stuck, baseline)).judgement.verdict is Verdict.WORSE
    resolved = FitEndEvent(160, metric_classes={"accuracy": "accuracy"})
    stuck = dataclasses.replace(stuck, events=[*stuck.events, resolved])
    judged = judged_so_far(stuck, baseline, Yardstick.of(stuck, baseline))
    assert judged is not None and judged.judgement.verdict is Verdict.SAME and "loss" in judged.judgement.why


def test_an_error_in_the_epoch_end_check_never_costs_the_final_verdict(baselines, tmp_path, monkeypatch):
    from tb_trainhealth.compare import so_far

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the per-epoch check")

    monkeypatch.setattr(so_far, "judged_so_far", broken)
    health = _train(str(tmp_path / "run"), learning_rate=GOOD_RATE / 1000, baseline=baselines["classifier"])
    comparisons = _comparisons(health)
    assert [c.during_fit for c in comparisons] == [False] and comparisons[0].verdict == "worse"
    parts = health._run.recording.signals().events_of(PartOffEvent)
    assert [p.part for p in parts] == ["baseline so far"]
