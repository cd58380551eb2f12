"""rules/batch_order.py on runs built in memory: batches that hold one class where shuffled ones of
the run's class mix would hold several; the harm the run shows decides warning or note. A real
tf.data run: tests/test_common_mistakes.py; a real PyDataset one: bench/real_bug_zoo.py."""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.run_info import InputSource, RunInfo
from tb_trainhealth.contract.vocab import LintCheck, LossKind
from tb_trainhealth.findings import Severity
from tb_trainhealth.rules.batch_order import batches_in_class_order
from tb_trainhealth.signals import RunSignals, Series


def run_of(batch_classes, counts=(320.0, 320.0, 0.0, 0.0), jumps: float = 0.05, source: str = "PyDataset"):
    steps = np.arange(1, 121)
    wiggle = np.random.default_rng(0).normal(0, jumps, len(steps))
    loss = np.exp(np.log(1.1) - steps / 200 + wiggle)
    stats = LintEvent(
        0,
        LintCheck.LABEL_STATISTICS,
        loss=LossKind.SPARSE_CATEGORICAL_CROSSENTROPY,
        class_counts=counts,
        batch_classes=tuple(batch_classes),
        batch_rows=(32,) * len(batch_classes),
    )
    return RunSignals(
        "r",
        series={sig.LOSS: Series.of(steps, loss)},
        events=[stats],
        info=RunInfo(input=InputSource(source)),
        has_health_data=True,
    )


def test_one_class_per_batch_with_a_jumping_loss_is_a_warning_with_the_fix_for_the_source():
    (found,) = batches_in_class_order(run_of([1] * 20, jumps=0.4))
    assert found.code == "label_problem" and found.severity == Severity.WARNING
    assert "20 of 20 sampled batches hold a single class" in found.title and "on_epoch_end" in found.fixes[0].code


def test_a_smooth_loss_makes_it_a_note_and_mixed_batches_say_nothing():
    (found,) = batches_in_class_order(run_of([1] * 20, jumps=0.05, source="tf.data"))
    assert found.severity == Severity.INFO and "dataset.shuffle(" in found.fixes[0].code
    assert batches_in_class_order(run_of([2] * 20, jumps=0.4)) == []
    assert batches_in_class_order(run_of([1] * 9 + [2] * 11, jumps=0.4)) == []  # under half hold one class


def test_a_class_mix_where_shuffled_batches_hold_one_class_anyway_says_nothing():
    # 98% one class: a shuffled batch of 32 holds only it with probability 0.98**32 = 52%.
    assert batches_in_class_order(run_of([1] * 20, counts=(627.0, 13.0), jumps=0.4)) == []
    assert batches_in_class_order(run_of([1] * 20, counts=(640.0,), jumps=0.4)) == []  # single_class's to say
    assert batches_in_class_order(run_of([1] * 5, jumps=0.4)) == []  # too few batches sampled
