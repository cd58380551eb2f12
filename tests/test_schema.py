"""Versioned schema: older logs read, newer logs refused per run with a clear message."""

from __future__ import annotations

import json

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

    write_loss_run(tmp_path / "old", tags.SCHEMA_VERSION)
    write_loss_run(tmp_path / "future", tags.SCHEMA_VERSION + 1)
    runs = read_logdir(str(tmp_path))
    assert "newer tb-trainhealth" in " ".join(runs["future"].errors)
    assert runs["future"].series == {}
    assert runs["old"].errors == [] and len(runs["old"].series["loss"]) == 29
