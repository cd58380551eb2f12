"""Versioned schema: older logs read, newer logs refused per run with a clear message."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

from tb_trainhealth.contract import tags


def test_parse_plugin_content_versions():
    assert tags.parse_plugin_content(tags.plugin_content()) == tags.SCHEMA_VERSION
    with pytest.raises(tags.SchemaTooNewError, match="newer tb-trainhealth"):
        tags.parse_plugin_content(json.dumps({"version": tags.SCHEMA_VERSION + 1}).encode())
    for bad in (b"", b"\xff\xfe", b"[]", b'{"version": "1"}', b'{"version": 0}'):
        with pytest.raises(tags.SchemaError):
            tags.parse_plugin_content(bad)


def write_loss_run(path, version: int) -> None:
    writer = EventFileWriter(str(path))
    metadata = tags.scalar_metadata()
    metadata.plugin_data.content = json.dumps({"version": version}).encode()
    for step in range(1, 30):
        value = summary_pb2.Summary.Value(
            tag=tags.TAG_LOSS, metadata=metadata, tensor=tensor_util.make_tensor_proto(1.0 / step)
        )
        writer.add_event(event_pb2.Event(step=step, wall_time=step, summary=summary_pb2.Summary(value=[value])))
    writer.close()


def test_too_new_run_reports_an_error_and_others_still_diagnosed(tmp_path):
    from conftest import read_logdir

    write_loss_run(tmp_path / "old", 1)
    write_loss_run(tmp_path / "future", tags.SCHEMA_VERSION + 1)
    runs = read_logdir(str(tmp_path))
    assert "newer tb-trainhealth" in " ".join(runs["future"].errors)
    assert runs["future"].series == {}
    assert runs["old"].errors == [] and len(runs["old"].series["loss"]) == 29


def write_rows(path, steps, rows) -> None:
    """Schema-2 rows (`tags.TAG_ROW`) as HealthCallback writes them."""
    writer = EventFileWriter(str(path))
    for step, row in zip(steps, rows):
        value = summary_pb2.Summary.Value(
            tag=tags.TAG_ROW, metadata=tags.tensor_metadata(), tensor=tensor_util.make_tensor_proto(row, "float32")
        )
        writer.add_event(event_pb2.Event(step=step, wall_time=step, summary=summary_pb2.Summary(value=[value])))
    writer.close()


def test_a_run_of_schema_1_fits_then_schema_2_fits_reads_as_one_series(tmp_path):
    """A log dir reused across an upgrade: scalars up to step 29, rows after; the columns of a
    row are the loss, gradient norm, step time and input wait (NaN: not measured), or without
    the loss where it was not captured."""
    from conftest import read_logdir

    write_loss_run(tmp_path / "run", 1)
    write_rows(tmp_path / "run", [30, 31], [[0.5, 2.0, 10.0, np.nan], [np.nan, np.inf, np.nan, 1.5]])
    write_rows(tmp_path / "run", [32], [[3.0, 11.0, 0.5]])
    run = read_logdir(str(tmp_path))["run"]
    assert run.errors == []
    loss = run.series["loss"]
    assert loss.steps.tolist() == [*range(1, 32)] and loss.values[-2] == 0.5 and np.isnan(loss.values[-1])
    assert run.series["grad_norm"].steps.tolist() == [30, 31, 32]
    assert run.series["grad_norm"].values.tolist() == [2.0, np.inf, 3.0]  # a non-finite norm is kept
    assert run.series["step_time_ms"].steps.tolist() == [30, 32]  # not measured on step 31
    assert run.series["input_wait_ms"].values.tolist() == [1.5, 0.5]
