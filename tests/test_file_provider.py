"""Runs read straight from their event files (`read.file_provider`, `read.record_stream`) answer as
TensorBoard's Rust data server does, for every series the data server keeps in full."""

from __future__ import annotations

import os

import numpy as np
import pytest
from tensorboard import context as tb_context
from tensorboard.compat.proto import event_pb2, summary_pb2

from bench.synthetic_logs import RecordFile, _event, _value, write_run
from tb_trainhealth.contract import tags
from tb_trainhealth.read import data_server, file_provider, record_stream
from tb_trainhealth.read.load_batches import run_directories
from tb_trainhealth.read.logdir import SAMPLES_PER_PLUGIN

PLUGINS = (tags.PLUGIN_NAME, tags.RECORDS_PLUGIN_NAME, tags.SCALARS_PLUGIN_NAME)


def legacy_scalar(step: int, tag: str, value: float) -> event_pb2.Event:
    """A TF1-style `simple_value` without metadata (TensorBoard shows it as a scalar)."""
    return event_pb2.Event(
        step=step,
        wall_time=1.7e9 + step,
        summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]),
    )


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("file_provider")
    for index in range(3):
        write_run(str(root / f"run_{index}"), steps=900, layers=3, seed=index, events=12, diverge_at=400 if index else None,
                  event_kinds=("nonfinite", "oom", "activations"))  # fmt: skip
    # Keras' layout with a legacy scalar, and a resumed run: a second file going back to step 50.
    legacy = RecordFile(str(root / "keras" / "train"))
    for step in range(1, 120):
        legacy.write(legacy_scalar(step, "batch_loss", 1.0 / step))
    legacy.close()
    write_run(str(root / "resumed"), steps=100, layers=2, seed=7)
    again = RecordFile(str(root / "resumed"))
    md = tags.tensor_metadata()
    for step in range(50, 80):
        again.write(_event(step, [_value(tags.TAG_ROW, md, np.array([0.5, 1.0, 10.0, 0.1], np.float32))]))
    again.close()
    return str(root)


def everything(provider) -> dict:
    """What a DataProvider lists and reads for the plugins this package reads (NaN-safe, comparable)."""
    ctx, out = tb_context.RequestContext(), {}
    for plugin in PLUGINS:
        kwargs = {"experiment_id": "", "plugin_name": plugin}
        for name, listing in (
            ("scalars", provider.list_scalars(ctx, **kwargs)),
            ("tensors", provider.list_tensors(ctx, **kwargs)),
        ):
            out[plugin, name] = {r: {t: (s.max_step, s.max_wall_time, s.plugin_content) for t, s in d.items()} for r, d in listing.items()}  # fmt: skip
        scalars = provider.read_scalars(ctx, downsample=5000, **kwargs)
        out[plugin, "read_scalars"] = {
            r: {t: [(p.step, p.wall_time, repr(p.value)) for p in points] for t, points in d.items()}
            for r, d in scalars.items()
        }
        tensors = provider.read_tensors(ctx, downsample=5000, **kwargs)
        out[plugin, "read_tensors"] = {
            r: {t: [(p.step, p.wall_time, repr(np.asarray(p.numpy).tolist())) for p in points] for t, points in d.items()}
            for r, d in tensors.items()
        }  # fmt: skip
    out["runs"] = sorted(run.run_name for run in provider.list_runs(ctx, experiment_id=""))
    return out


def test_runs_read_from_their_files_are_what_the_data_server_shows(logdir):
    ours = everything(file_provider.load_runs(logdir, run_directories(logdir), SAMPLES_PER_PLUGIN))
    with data_server.loaded_once(logdir, SAMPLES_PER_PLUGIN) as provider:
        theirs = everything(provider)
    assert ours == theirs
    assert ours["runs"] == ["keras/train", "resumed", "run_0", "run_1", "run_2"]
    assert ours[tags.SCALARS_PLUGIN_NAME, "scalars"]["keras/train"]["batch_loss"][0] == 119
    resumed = ours[tags.PLUGIN_NAME, "read_tensors"]["resumed"][tags.TAG_ROW]
    assert [step for step, _, _ in resumed] == [*range(1, 50), *range(50, 80)]  # preempted from step 50 on


def test_a_series_longer_than_its_samples_keeps_evenly_spaced_points_and_the_last(tmp_path):
    write_run(str(tmp_path / "long"), steps=3000, layers=2)
    provider = file_provider.load_runs(str(tmp_path), ["long"], {**SAMPLES_PER_PLUGIN, tags.PLUGIN_NAME: 1000})
    ctx = tb_context.RequestContext()
    rows = provider.read_tensors(ctx, experiment_id="", plugin_name=tags.PLUGIN_NAME, downsample=5000)["long"][
        tags.TAG_ROW
    ]
    steps = [point.step for point in rows]
    assert len(steps) == 1000 and steps[0] == 1 and steps[-1] == 3000
    assert max(np.diff(steps)) <= 4


def test_what_the_reader_leaves_to_tensorboard_is_said(tmp_path):
    write_run(str(tmp_path / "cut"), steps=50, layers=2)
    (path,) = [os.path.join(tmp_path, "cut", name) for name in os.listdir(tmp_path / "cut")]
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 3)
    with pytest.raises(file_provider.NotSimple, match="ends inside a record"):
        file_provider.load_runs(str(tmp_path), ["cut"], SAMPLES_PER_PLUGIN)
    with open(path, "r+b") as f:
        f.write(b"\x00" * 12)  # a length that fails its checksum
    with pytest.raises(record_stream.NotSimple, match="checksum"):
        record_stream.read_file(path)


def test_a_run_too_big_to_hold_in_memory_is_left_to_the_data_server(tmp_path, monkeypatch):
    write_run(str(tmp_path / "big"), steps=50, layers=2)
    monkeypatch.setattr(file_provider, "MAX_RUN_BYTES", 1000)
    with pytest.raises(file_provider.NotSimple, match="over"):
        file_provider.load_runs(str(tmp_path), ["big"], SAMPLES_PER_PLUGIN)
