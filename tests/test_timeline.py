"""A run's timeline: its events in step order, one line each; measurements left out."""

from __future__ import annotations

from tb_trainhealth.contract.events import (
    ActivationsEvent,
    CrashEvent,
    LayerActivations,
    LayerWeights,
    LintEvent,
    OomEvent,
    Verdict,
    WeightInitEvent,
)
from tb_trainhealth.contract.vocab import LintCheck
from tb_trainhealth.report.timeline import timeline
from tb_trainhealth.signals import RunSignals


def test_events_in_step_order_without_measurements():
    run = RunSignals(
        "run",
        events=[
            CrashEvent(7, error_type="ValueError", phase="training"),
            OomEvent(2, batch_size=512, next_batch_size=256),
            WeightInitEvent(0, layers={"dense": LayerWeights(std=0.1)}),
            LintEvent(0, LintCheck.LABEL_STATISTICS, class_counts=(10.0, 20.0)),
            ActivationsEvent(5, layers={"dense": LayerActivations(activation="relu", dead=0.1)}),
            LintEvent(0, LintCheck.HIGH_DROPOUT, layer="drop", rate=0.8),
        ],
    )
    entries = timeline(run)
    assert [(e.step, e.kind) for e in entries] == [(0, "lint"), (2, "oom"), (7, "crash")]
    assert entries[0].text == "check failed: high dropout (drop)"
    assert entries[1].text == "out of memory at batch size 512, retried at 256"
    assert entries[2].text == "crashed: ValueError in training"


def test_a_comparison_with_the_baseline_is_one_line():
    from tb_trainhealth.contract.events import ComparisonEvent

    (entry,) = timeline(RunSignals("run", events=[ComparisonEvent(90, "logs/good", Verdict.WORSE)]))
    assert (entry.step, entry.text) == (90, "compared with baseline logs/good: worse")
