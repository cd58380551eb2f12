"""Bad data, one run at a time: the bad run gets an error or a partial diagnosis, the others are untouched."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util

from tb_trainhealth.contract import tags


def write_events(path, values_by_step, version=tags.SCHEMA_VERSION, tag=tags.TAG_LOSS, plugin=tags.PLUGIN_NAME):
    os.makedirs(path, exist_ok=True)
    writer = EventFileWriter(str(path))
    metadata = tags.summary_metadata(summary_pb2.DATA_CLASS_SCALAR, plugin)
    metadata.plugin_data.content = json.dumps({"version": version}).encode() if version is not None else b"\xff garbage"
    for step, value in values_by_step:
        summary = summary_pb2.Summary(
            value=[
                summary_pb2.Summary.Value(
                    tag=tag, metadata=metadata, tensor=tensor_util.make_tensor_proto(np.float32(value))
                )
            ]
        )
        writer.add_event(event_pb2.Event(step=step, wall_time=float(step), summary=summary))
    writer.close()
    return max((os.path.join(path, f) for f in os.listdir(path) if "tfevents" in f), key=os.path.getmtime)


def diverging(n=200):
    return [(s, 0.3 * np.exp(s / 40) if s > 100 else 2.0 * np.exp(-s / 20) + 0.3) for s in range(1, n + 1)]


@pytest.fixture()
def logdir(tmp_path, scenario_logdir):
    shutil.copytree(os.path.join(scenario_logdir, "nan_input"), tmp_path / "good_nan")
    shutil.copytree(os.path.join(scenario_logdir, "healthy_mlp"), tmp_path / "good_healthy")
    return tmp_path


def diagnose(logdir) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", str(logdir), "--json"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.returncode, {r["run"]: r for r in json.loads(proc.stdout)["runs"]}


def assert_good_runs_untouched(runs):
    assert runs["good_nan"]["status"] == "critical" and runs["good_nan"]["findings"][0]["code"] == "nonfinite"
    assert runs["good_healthy"]["status"] == "ok" and runs["good_healthy"]["errors"] == []


def test_truncated_event_file_keeps_what_was_written(logdir):
    event_file = write_events(logdir / "killed", diverging())
    with open(event_file, "rb+") as f:
        f.truncate(os.path.getsize(event_file) - 7)  # the process died mid-record
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)
    assert "loss_divergence" in [f["code"] for f in runs["killed"]["findings"]]


def test_record_with_a_bad_checksum(logdir):
    event_file = write_events(logdir / "corrupt", diverging())
    data = bytearray(Path(event_file).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(event_file).write_bytes(bytes(data))
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)


def test_garbage_file_named_like_an_event_file(logdir):
    os.makedirs(logdir / "garbage")
    (logdir / "garbage" / "events.out.tfevents.123.host").write_bytes(os.urandom(4096))
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)


@pytest.mark.parametrize("version", [None, tags.SCHEMA_VERSION + 1], ids=["malformed", "unknown-version"])
def test_bad_plugin_payload_is_an_error_for_that_run_only(logdir, version):
    write_events(logdir / "bad_payload", diverging(), version=version)
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)
    assert runs["bad_payload"]["errors"] and runs["bad_payload"]["findings"] == []


def test_run_with_nan_inf_and_huge_values_everywhere(logdir):
    values = [(s, [np.nan, np.inf, -np.inf, 3e38, -3e38][s % 5]) for s in range(1, 300)]
    write_events(logdir / "garbage_values", values)
    write_events(logdir / "garbage_values_keras/train", values, tag="epoch_loss", plugin="scalars", version=0)
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)
    assert runs["garbage_values"]["findings"][0]["code"] == "nonfinite"


def test_restarted_run_with_steps_going_back(logdir):
    write_events(logdir / "restarted", diverging(150))
    write_events(logdir / "restarted", [(s, 2.0 * np.exp(-s / 20) + 0.3) for s in range(1, 120)])
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)
    assert runs["restarted"]["status"] in ("ok", "warning", "critical")
    assert runs["restarted"]["errors"] == []  # read as data, not as a broken run


def test_run_with_tags_but_no_steps(logdir):
    write_events(logdir / "empty_run", [])
    os.makedirs(logdir / "no_events_at_all")
    _, runs = diagnose(logdir)
    assert_good_runs_untouched(runs)


def _without_root_override(command: list[str]) -> list[str]:
    """As root, drop the capabilities that read any directory, so chmod 000 means unreadable."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a directory unreadable")
    return [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", *command]


def test_an_unreadable_run_directory_is_listed_with_its_error(logdir):
    write_events(logdir / "locked", diverging())
    os.chmod(logdir / "locked", 0)
    try:
        command = [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", str(logdir), "--json"]
        proc = subprocess.run(_without_root_override(command), capture_output=True, text=True, timeout=120, cwd=ROOT)
        unreadable = subprocess.run(
            _without_root_override([*command[:-2], str(logdir / "locked")]),
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
    finally:
        os.chmod(logdir / "locked", 0o755)
    assert proc.returncode == 1, proc.stderr  # good_nan is critical: the others are diagnosed as usual
    runs = {r["run"]: r for r in json.loads(proc.stdout)["runs"]}
    assert_good_runs_untouched(runs)
    assert runs["locked"]["errors"] == ["cannot read this directory: Permission denied"]
    assert (
        unreadable.returncode == 2 and "cannot read" in unreadable.stderr and "Permission denied" in unreadable.stderr
    )
