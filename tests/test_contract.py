"""The contract's typed payloads: every event kind reads back as written, bad records are
refused in one place, and records written by earlier versions (schema 1) still read."""

from __future__ import annotations

import json

import pytest

from tb_trainhealth.contract import payload
from tb_trainhealth.contract.events import (
    EVENT_TYPES,
    ActivationsEvent,
    BatchSizeEvent,
    ComparisonEvent,
    CrashEvent,
    FitEndEvent,
    LayerActivations,
    LayerWeights,
    LintEvent,
    NanOriginEvent,
    NonfiniteEvent,
    OomEvent,
    PartOffEvent,
    PipelineLintEvent,
    PreflightEvent,
    ResumedEvent,
    StallEvent,
    StallPhase,
    ThreadPlace,
    TrialResult,
    TrialsEvent,
    TrialVerdict,
    Verdict,
    WeightInitEvent,
    parse_event,
)
from tb_trainhealth.contract.events import Frame as StackFrame
from tb_trainhealth.contract.run_info import InputSource, LayerInfo, RunInfo
from tb_trainhealth.contract.vocab import FitStop, LintCheck, LossKind, NanOriginWhere, NonfiniteWhere, PipelineCheck

EXAMPLES = [
    NonfiniteEvent(38, "gradients", layers=("dense",), count=12.0, replicas=(1,)),
    NanOriginEvent(4, "input", count=1, position=(7, 5)),
    LintEvent(0, LintCheck.SINGLE_CLASS, label_class=3, share=0.995, labels=640, batches=20),
    LintEvent(0, LintCheck.TARGETS_OUT_OF_OUTPUT_RANGE, loss=LossKind.MEAN_SQUARED_ERROR, output_range=(0.0, None)),
    PipelineLintEvent(0, PipelineCheck.EXPENSIVE_MAP_NOT_CACHED, stage="ParallelMapDatasetV2", ops=("DecodeJpeg",)),
    ActivationsEvent(128, {"dense": LayerActivations("relu", 32, dead=0.75)}, epoch=2),
    CrashEvent(11, "InvalidArgumentError", "Incompatible shapes", "training", 0),
    OomEvent(9, batch_size=8192, next_batch_size=4096, memory_mb=7900.0, epoch=0),
    BatchSizeEvent(40, batch_size=6144, previous_batch_size=4096, epoch=2, peak_mb=700.0, limit_mb=4096.0),
    FitEndEvent(640, epochs_run=6, epochs_planned=50, stopped_early=True, stopped_by=("EarlyStopping",)),
    PreflightEvent(
        0,
        samples=32,
        loss=LossKind.SPARSE_CATEGORICAL_CROSSENTROPY,
        initial_loss=2.4,
        expected_loss=2.3,
        fit_steps=600,
        fit_stopped="steps",
        zero_gradient=("dense/kernel",),
        skipped=("input check: the time budget ran out",),
    ),
    StallEvent(
        12,
        seconds=301.5,
        allowance=300.0,
        phase=StallPhase.INPUT,
        epoch=0,
        threads=(
            ThreadPlace("MainThread", "training", (StackFrame("train.py", "main", 40),)),
            ThreadPlace(
                "Dummy-3", "generator", (StackFrame("data.py", "read", 7),), StackFrame("socket.py", "recv", 9)
            ),
        ),
    ),
    ResumedEvent(13, seconds=420.0),
    WeightInitEvent(
        0, {"dense": LayerWeights("relu", fan_in=10, units=32, std=0.45, mean=0.0), "dense_1": LayerWeights()}
    ),
    ComparisonEvent(400, "logs/good", Verdict.WORSE, "val_accuracy 0.3 is worse", {"code": "worse_than_baseline"}),
    ComparisonEvent(400, "logs/missing", Verdict.UNKNOWN, "the baseline is not a readable run"),
    PartOffEvent(
        7, "gradients", "AttributeError: 'Adam' object has no attribute '_trainable_variables'", True, "3.16.0"
    ),
    PartOffEvent(0, "nan origin", "the step is XLA-compiled (jit_compile=True)", error=False),
    TrialsEvent(
        180,
        (
            TrialResult(
                "learning_rate", "raise", "learning rate 1e-07 -> 0.001", TrialVerdict.HELPED, "Adam(1e-3)", 0.05, 0.3
            ),
        ),
        ("loss_plateau",),
        samples=768,
        held_out=256,
        steps=180,
        unchanged_error=1.1,
        unchanged_loss=1.49,
        seconds=2.5,
        budget_seconds=10.0,
        untried=("3x the steps at the same settings",),
    ),
    TrialsEvent(12, findings=("nonfinite",), skipped="the training data is a Python generator"),
]


def test_every_kind_has_an_example():
    assert {type(event) for event in EXAMPLES} | {EVENT_TYPES["finding"]} == set(EVENT_TYPES.values())


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.kind.value)
def test_an_event_reads_back_as_written_through_json(event):
    assert parse_event(json.loads(json.dumps(event.to_json()))) == event


def test_records_of_schema_1_as_the_first_release_wrote_them_still_read():
    written = [  # verbatim shapes from tb-trainhealth 0.1.0 event files
        {"kind": "nonfinite", "where": "gradients", "step": 38, "layers": ["dense"], "count": 12.0},
        {"kind": "lint", "step": 0, "check": "label_statistics", "loss": "sparse_categorical_crossentropy",
         "units": 10, "batches": 20, "class_counts": [64.0, 70.0]},
        {"kind": "lint", "step": 0, "check": "single_class", "class": 3, "share": 1.0, "labels": 640, "batches": 20},
        {"kind": "crash", "step": 3, "epoch": 0, "phase": "training", "error_type": "ValueError", "message": "m"},
        {"kind": "activations", "step": 64, "epoch": 1, "layers": {"d": {"activation": "relu", "units": 8, "dead": 1.0}}},
    ]  # fmt: skip
    events = [parse_event(raw) for raw in written]
    assert events[1].class_counts == (64.0, 70.0) and events[1].loss == LossKind.SPARSE_CATEGORICAL_CROSSENTROPY
    assert events[2].label_class == 3 and events[4].layers["d"].dead == 1.0
    info = RunInfo.parse({"schema": 1, "model": "m", "loss_scale": True, "layers": [{"name": "d", "params": 40}],
                          "input": {"type": "PyDataset", "workers": 4, "use_multiprocessing": False}})  # fmt: skip
    assert info.layers == (LayerInfo("d", 40),) and info.input == InputSource("PyDataset", 4, False) and info.loss_scale


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "nonfinite", "where": "loss"},  # no step
        {"kind": "nonfinite", "where": "loss", "step": True},  # a bool is not a step
        {"kind": "nonfinite", "where": "loss", "step": -1},
        {"kind": "nonfinite", "where": "loss", "step": 2.0},
        {"kind": "nonfinite", "step": 2},  # required field missing
        {"kind": "lint", "step": 0, "check": ["x"]},  # unhashable check
        {"kind": "lint", "step": 0, "check": "not_a_check"},
        {"kind": "pipeline_lint", "step": 0, "check": {}},
        {"kind": "from_the_future", "step": 0},
        {"step": 0},
        ["kind", "lint"],
        "nonfinite",
        None,
    ],
)
def test_a_record_that_is_no_valid_event_is_refused(raw):
    with pytest.raises(payload.Invalid):
        parse_event(raw)


def test_an_odd_optional_field_costs_that_field_not_the_event():
    event = parse_event({"kind": "oom", "step": 5, "batch_size": "big", "memory_mb": [1], "next_batch_size": 16})
    assert event == OomEvent(5, batch_size=None, next_batch_size=16, memory_mb=None)
    shares = parse_event({"kind": "activations", "step": 1, "layers": {"a": {"dead": "x"}, "b": 3}})
    assert shares.layers == {"a": LayerActivations()}


def test_names_print_and_serialize_as_their_values():
    assert f"{LintCheck.SINGLE_CLASS}" == "single_class" == json.loads(json.dumps(LintCheck.SINGLE_CLASS))
    assert LossKind.named("MSE") == LossKind.MEAN_SQUARED_ERROR and LossKind.named("my_loss") is None
    assert LossKind.of_class("BinaryCrossentropy") == LossKind.BINARY_CROSSENTROPY


def test_events_of_a_newer_writer_are_skipped_quietly_and_malformed_ones_counted():
    from tb_trainhealth.contract.events import UnknownEvent
    from tb_trainhealth.read.reader import _parse_events

    with pytest.raises(UnknownEvent):
        parse_event({"kind": "from_a_newer_writer", "step": 3})
    with pytest.raises(UnknownEvent):
        parse_event({"kind": "lint", "step": 0, "check": "a_check_from_the_future"})
    errors: list[str] = []
    record = [{"kind": "from_a_newer_writer", "step": 3}, {"kind": "oom", "step": -2}, {"kind": "oom", "step": 4}]
    events = _parse_events([record, record], errors)  # written twice: counted once
    assert events == [OomEvent(4)] and errors == ["1 unreadable tb-trainhealth event(s) ignored"]


def test_a_place_a_newer_writer_names_reads_as_unknown_and_keeps_its_event():
    nonfinite = parse_event({"kind": "nonfinite", "step": 9, "where": "optimizer_state", "layers": ["d"]})
    origin = parse_event({"kind": "nan_origin", "step": 9, "where": "a_new_place"})
    assert (nonfinite.where, nonfinite.layers) == (NonfiniteWhere.UNKNOWN, ("d",))
    assert origin.where is NanOriginWhere.UNKNOWN and not origin.where.in_batch
    assert parse_event({"kind": "nan_origin", "step": 9, "where": "labels"}).where.in_batch
    # An optional word this reader does not know costs that field, not the event.
    assert parse_event({"kind": "preflight", "step": 0, "fit_stopped": "a_new_reason"}).fit_stopped is None
    assert parse_event({"kind": "preflight", "step": 0, "fit_stopped": "stalled"}).fit_stopped is FitStop.STALLED


def test_fields_at_their_default_are_not_written():
    assert NonfiniteEvent(3, "loss").to_json() == {"kind": "nonfinite", "step": 3, "where": "loss"}
    assert RunInfo().to_json() == {}
