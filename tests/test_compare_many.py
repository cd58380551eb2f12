"""How `tb-trainhealth compare LOGDIR --baseline` orders its runs: on comparisons built in memory
(the command end to end: tests/test_compare_cli.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from tb_trainhealth.compare import many
from tb_trainhealth.compare.baseline_pick import named_choice
from tb_trainhealth.compare.comparison import Comparison
from tb_trainhealth.compare.curves import MetricPair
from tb_trainhealth.compare.settings_diff import Change
from tb_trainhealth.contract.events import Verdict
from tb_trainhealth.signals import RunSignals


def _comparison(run: str, verdict: Verdict, metric: str | None = None, baseline: float = 0.0, final: float = 0.0):
    higher = metric is not None and "accuracy" in metric
    metrics = [MetricPair(metric, higher, baseline, final, baseline, final)] if metric else []
    why = f"{metric} {final} is compared with the baseline's {baseline}" if metric else "the run broke"
    return Comparison(run, "base", verdict, why, [], None, metrics, [], metric)


def test_many_runs_are_listed_worse_first_and_by_the_deciding_metrics_shortfall():
    pairs = [
        many.Pair(comparison, named_choice(RunSignals("x"), RunSignals("base")))
        for comparison in (
            _comparison("a_better", Verdict.BETTER, "val_accuracy", 0.5, 0.9),
            _comparison("b_same", Verdict.SAME, "val_accuracy", 0.5, 0.5),
            _comparison("c_unknown", Verdict.UNKNOWN),
            _comparison("d_slightly_worse", Verdict.WORSE, "val_accuracy", 0.9, 0.8),  # 0.1: 1.7 bands
            _comparison("e_broke", Verdict.WORSE),  # no deciding metric: after those with one
            _comparison("f_much_worse", Verdict.WORSE, "val_loss", 0.5, 5.0),  # 10x: 4.9 bands
            _comparison("g_nan", Verdict.WORSE, "val_loss", 0.5, math.nan),
            _comparison("h_accuracy", Verdict.WORSE, "accuracy", 0.9, 0.3),
        )
    ]
    # The deciding metric is the one the verdict names, not the first: val_accuracy 0.9 -> 0.89 is no shortfall.
    pairs[-1].comparison.metrics.insert(0, MetricPair("val_accuracy", True, 0.9, 0.89, 0.9, 0.89))
    order = [pair.comparison.run for pair in many.worst_first(pairs)]
    assert order == ["g_nan", "h_accuracy", "f_much_worse", "d_slightly_worse", "e_broke", "c_unknown",
                     "b_same", "a_better"]  # fmt: skip
    assert pairs[3].deficit == pytest.approx(0.1 / 0.06)


def test_the_likely_cause_is_the_first_change_of_a_worse_run_only():
    """What the one-line listing and the tab's table both show, spelled once (`Pair.likely_cause`)."""
    choice = named_choice(RunSignals("x"), RunSignals("base"))
    worse = _comparison("w", Verdict.WORSE, "val_loss", 0.5, 5.0)
    worse.changes[:] = [Change("learning_rate", 0.001, 1e-06), Change("batch_size", 32, 64)]
    same = _comparison("s", Verdict.SAME, "val_loss", 0.5, 0.5)
    same.changes[:] = worse.changes
    worse.named = 1  # (compare() names as many as the evidence supports: culprit.likely_culprits)
    assert many.Pair(worse, choice).to_json()["likely_cause"] == "learning_rate 0.001 -> 1e-06"
    assert many.Pair(same, choice).to_json()["likely_cause"] is None
    assert many.Pair(_comparison("n", Verdict.WORSE), choice).likely_cause is None  # worse, nothing changed


def test_a_pair_that_cannot_be_compared_is_its_own_unknown_line_and_the_others_stand(monkeypatch):
    from tb_trainhealth.diagnosis import Diagnosis
    from tb_trainhealth.read.reader import RunGroup

    def diagnosed(name: str) -> Diagnosis:
        return Diagnosis(RunGroup(name, {"main": name}), RunSignals(name), [], [], (0, 0.0, 0))

    original = many.compare

    def fails_for_odd(run, *args, **kwargs):
        if run.run == "odd":
            raise ValueError("a shape nothing foresaw")
        return original(run, *args, **kwargs)

    monkeypatch.setattr(many, "compare", fails_for_odd)
    base, odd, fine = diagnosed("base"), diagnosed("odd"), diagnosed("fine")
    pairs = {pair.comparison.run: pair.comparison for pair in many.against_one([base, odd, fine], base)}
    assert pairs["odd"].verdict is Verdict.UNKNOWN and "ValueError: a shape nothing foresaw" in pairs["odd"].why
    assert pairs["fine"].why != pairs["odd"].why and pairs["odd"].baseline == "base"


def test_a_budget_is_no_cause_for_a_run_that_broke_or_fell_back_and_inputs_without_variance_lead():
    """The demo with `--baseline best` read "likely cause epochs 25 -> 2" for a run with NaN inputs,
    "epochs 25 -> 8" for a learning-rate schedule that blew up, "epochs 20 -> 4" for inputs all zero."""
    from tb_trainhealth.compare import culprit

    fewer_epochs, schedule = Change("epochs", 25, 8), Change("learning_rate_schedule", None, "PiecewiseConstantDecay")
    shares = Change("label_distribution", [0.23, 0.23, 0.27, 0.27], [0.24, 0.25, 0.25, 0.26])  # sampling
    unmeasured = Change("train_inputs", 6.99, None)  # (NaN in the data: no fingerprint)
    ended_early = culprit.Evidence(stopped_earlier=True, parted_early=True)
    assert culprit.ranked([schedule, fewer_epochs], ended_early)[0] is fewer_epochs  # ran out of epochs: may be
    broke = dataclasses.replace(ended_early, broke=True)
    assert culprit.ranked([schedule, fewer_epochs], broke)[0] is schedule
    weak = culprit.ranked([fewer_epochs, shares, unmeasured], broke)
    assert culprit.likely_culprits(weak, broke, 2) == 0  # the break is the story: nothing named
    assert culprit.likely_culprits([schedule, fewer_epochs], broke, 2) == 2
    flat = Change("input_std", 0.527, 0.0)
    assert culprit.ranked([fewer_epochs, flat], culprit.Evidence(stopped_earlier=True))[0] is flat


def test_a_run_with_a_critical_finding_is_never_judged_better():
    """sorted_validation_split (validation accuracy 0%: critical) read "better" on training accuracy."""
    from test_baseline_pick import run_of

    from tb_trainhealth.compare.comparison import compare
    from tb_trainhealth.findings import Evidence, Finding, Severity

    critical = Finding("label_problem", Severity.CRITICAL, 0, "Validation classes never seen in training", "", Evidence(()))
    run, baseline = run_of("run", 2.0, loss=0.01), run_of("base", 1.0, loss=0.5)
    assert compare(run, baseline, [], []).verdict is Verdict.BETTER
    judged = compare(run, baseline, [critical], [])
    assert judged.verdict is Verdict.UNKNOWN and "critical (label_problem" in judged.why, judged.why
