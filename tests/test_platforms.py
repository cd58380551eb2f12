"""macOS and Windows, simulated here (issue 38, item 4): peak memory in the platform's unit,
a callback that imports and trains without the `resource` module, and run directories whose
names hold spaces and non-ASCII letters, read back under their names by the CLI."""

from __future__ import annotations

import importlib
import json
import sys
import types

import keras
import numpy as np
import pytest
from conftest import LOAD_DEPENDENT, read_logdir, run_python

from tb_trainhealth import HealthCallback, engine
from tb_trainhealth.callback.step import memory
from tb_trainhealth.cli.diagnose import LOADER_VARIABLE, TENSORBOARD_LOADERS, diagnose_logdir
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import PartOffEvent
from tb_trainhealth.read import load_batches

MIB = 2**20


def tiny_fit(log_dir, epochs: int = 2) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
    model.compile(keras.optimizers.SGD(0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(256, 4)).astype("float32"), rng.integers(0, 3, 256).astype("int32")
    model.fit(x, y, batch_size=4, epochs=epochs, verbose=0, callbacks=[HealthCallback(str(log_dir), verbose=False)])


def fake_resource(maxrss: int) -> types.SimpleNamespace:
    usage = types.SimpleNamespace(ru_maxrss=maxrss)
    return types.SimpleNamespace(RUSAGE_SELF=0, getrusage=lambda who: usage)


@pytest.mark.parametrize(("platform", "maxrss"), [("darwin", 512 * MIB), ("linux", 512 * 1024)])
def test_peak_rss_is_read_in_bytes_on_macos_and_in_kib_on_linux(monkeypatch, platform, maxrss):
    monkeypatch.setattr(memory, "PROC_STATM", "/nonexistent/statm")  # (macOS has no /proc)
    monkeypatch.setattr(memory, "resource", fake_resource(maxrss))
    monkeypatch.setattr(sys, "platform", platform)
    assert memory.host_rss_mb() == pytest.approx(512.0)
    assert memory.host_memory_unavailable() is None


def test_linux_reads_the_current_rss_from_proc():
    assert memory.host_rss_mb() == pytest.approx(memory._proc_rss_mb()) and memory.host_rss_mb() > 1


@pytest.fixture
def windows(monkeypatch):
    """`import resource` fails (as on Windows) for a fresh import of memory.py; no /proc."""
    monkeypatch.setitem(sys.modules, "resource", None)
    importlib.reload(memory)
    monkeypatch.setattr(memory, "PROC_STATM", "/nonexistent/statm")
    monkeypatch.setattr(sys, "platform", "win32")
    yield
    monkeypatch.undo()
    importlib.reload(memory)
    assert memory.resource is not None


def test_without_the_resource_module_the_callback_trains_and_records_only_that_host_memory_is_missing(
    tmp_path, windows
):
    assert memory.resource is None and memory.host_rss_mb() is None
    tiny_fit(tmp_path / "r")
    run = read_logdir(str(tmp_path))["r"]
    (event,) = run.events_of(PartOffEvent)  # no part turned off by an error
    assert (event.part, event.error) == ("host memory", False)
    assert event.reason == "this platform (win32) has neither /nonexistent/statm nor Python's resource module"
    assert run.get(sig.HOST_MEMORY_MB) is None and run.get(sig.GRAD_NORM) is not None
    findings = [f for f in engine.diagnose(run) if f.code not in LOAD_DEPENDENT]
    assert [(f.code, f.evidence.check) for f in findings] == [("part_not_recorded", "host memory")]
    assert "memory_growth of host memory is unavailable" in findings[0].detail


def test_host_memory_is_recorded_where_resource_is_there(tmp_path):
    tiny_fit(tmp_path / "r", epochs=1)
    run = read_logdir(str(tmp_path))["r"]
    assert run.get(sig.HOST_MEMORY_MB) is not None and run.events_of(PartOffEvent) == []


@pytest.fixture(scope="module")
def spaced_logdir(tmp_path_factory) -> str:
    """A logdir and a run whose names hold spaces and non-ASCII letters."""
    logdir = tmp_path_factory.mktemp("platforms") / "my runs"
    tiny_fit(logdir / "lauf ü 1")
    return str(logdir)


def test_a_run_under_a_path_with_spaces_and_non_ascii_letters_is_diagnosed_by_the_cli_under_its_name(spaced_logdir):
    proc = run_python("-m", "tb_trainhealth.cli", "diagnose", spaced_logdir, "--json")
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert (run["run"], run["errors"], run["file_errors"]) == ("lauf ü 1", [], [])
    assert {f["code"] for f in run["findings"]} <= LOAD_DEPENDENT  # a healthy run (a busy machine may wait)
    text = run_python("-m", "tb_trainhealth.cli", "diagnose", spaced_logdir)
    assert text.returncode == 0 and "lauf ü 1" in text.stdout, text.stderr


def test_where_no_symlink_can_be_made_the_same_run_is_read_the_other_way_under_its_name(spaced_logdir, monkeypatch):
    """Windows without developer mode: the data server's scratch directory of links cannot be made."""

    def no_symlinks(*args, **kwargs):
        raise OSError(1314, "A required privilege is not held by the client")

    monkeypatch.setenv(LOADER_VARIABLE, TENSORBOARD_LOADERS)  # the files' reader needs no links at all
    linked = diagnose_logdir(spaced_logdir)
    monkeypatch.setattr(load_batches.os, "symlink", no_symlinks)
    (run,) = diagnose_logdir(spaced_logdir)
    assert run.run == "lauf ü 1" and run.errors == []
    assert [f.code for f in run.findings] == [f.code for f in linked[0].findings]
