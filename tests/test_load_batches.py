"""The CLI's one-pass load: each training run read from its files in a process per core; runs left to
TensorBoard a few at a time, each batch by a data server of its own."""

from __future__ import annotations

import glob
import os
import tempfile
import time

import pytest

from bench.synthetic_logs import write_run
from tb_trainhealth import cli
from tb_trainhealth.cli.diagnose import LOADER_VARIABLE, TENSORBOARD_LOADERS
from tb_trainhealth.read import load_batches


def touch_events(path) -> None:
    os.makedirs(path, exist_ok=True)
    open(os.path.join(path, "events.out.tfevents.1.host"), "wb").close()


def test_run_directories_are_named_as_tensorboard_names_runs_and_symlinks_are_followed_without_looping(tmp_path):
    for run in ("", "a", "a/train", "a/validation", "c/d"):
        touch_events(tmp_path / run)
    (tmp_path / "empty").mkdir()
    (tmp_path / "b").mkdir()
    touch_events(tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", tmp_path / "b" / "linked")  # followed, under its link's name
    os.symlink(tmp_path / "c", tmp_path / "c" / "d" / "loop")  # back up: not followed
    assert load_batches.run_directories(str(tmp_path)) == [
        ".",
        "a",
        "a/train",
        "a/validation",
        "b/linked",
        "c/d",
        "elsewhere",
    ]


def test_a_training_run_and_its_keras_sub_runs_stay_in_one_batch():
    runs = [".", "a", "a/train", "a/validation", "b/train", "c", "train"]
    groups = load_batches.training_runs(runs)
    assert groups == [[".", "train"], ["a", "a/train", "a/validation"], ["b/train"], ["c"]]
    assert load_batches.batches(groups, 2) == [[".", "train", "a", "a/train", "a/validation"], ["b/train", "c"]]
    assert load_batches.batches([], 2) == []


@pytest.fixture(scope="module")
def five_runs(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("five_runs")
    for index in range(5):
        diverge = {"diverge_at": 600} if index % 2 else {}
        write_run(str(root / f"run_{index}"), steps=1200, layers=3, seed=index, **diverge)
    return str(root)


def tensorboard_loaders_only(monkeypatch) -> None:
    """Every run left to TensorBoard's loaders, as for a run whose files `file_provider` does not read."""
    monkeypatch.setenv(LOADER_VARIABLE, TENSORBOARD_LOADERS)


def test_diagnoses_read_from_the_files_are_those_of_the_data_server_in_batches(five_runs, monkeypatch):
    whole = cli.diagnose_logdir(five_runs)  # read from the files, in a process per core
    tensorboard_loaders_only(monkeypatch)
    monkeypatch.setattr(load_batches, "RUNS_PER_BATCH", 2)
    servers = []
    loaded_once = load_batches.data_server.loaded_once
    monkeypatch.setattr(load_batches.data_server, "loaded_once", lambda *a: servers.append(a) or loaded_once(*a))
    assert cli.diagnose_logdir(five_runs) == whole
    assert len(servers) == 3  # 2 + 2 + 1 runs
    assert {r.run for r in whole} == {f"run_{i}" for i in range(5)}
    diverging = {r.run for r in whole if any(f.code == "loss_divergence" for f in r.findings)}
    assert diverging == {"run_1", "run_3"}


def test_a_reader_that_stops_early_leaves_no_server_or_scratch_directory_behind(five_runs, tmp_path, monkeypatch):
    # Its own temporary directory: in the shared one, another copy of the suite makes and removes these too.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def scratch() -> set[str]:
        return set(glob.glob(os.path.join(tempfile.gettempdir(), "tb_trainhealth_runs_*")))

    before = scratch()
    batches = load_batches.loaded_in_batches(five_runs, runs_per_batch=2)
    next(batches)  # the first batch is read while the second loads
    deadline = time.monotonic() + 30
    while len(scratch() - before) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(scratch() - before) == 2
    batches.close()
    assert scratch() == before


def test_without_the_data_server_every_run_is_read_at_once_in_this_process(five_runs, monkeypatch):
    tensorboard_loaders_only(monkeypatch)
    monkeypatch.setenv("TENSORBOARD_DATA_SERVER_BINARY", "/nonexistent")
    providers = list(load_batches.loaded_run_batches(five_runs))
    assert len(providers) == 1
    assert cli.diagnose_logdir(five_runs)[0].diagnosed


def test_a_logdir_without_runs_says_so(tmp_path):
    from tb_trainhealth.read.logdir import NoRunsError

    (tmp_path / "nothing").mkdir()
    with pytest.raises(NoRunsError, match="no TensorBoard event files"):
        list(load_batches.loaded_run_batches(str(tmp_path)))


def test_runs_that_cannot_be_linked_are_read_without_the_data_server(five_runs, monkeypatch):
    """No symlinks (Windows without developer mode), no scratch space: the whole logdir is read
    the other way, as when there is no data server."""

    def no_symlinks(*args, **kwargs):
        raise OSError(1314, "A required privilege is not held by the client")

    whole = cli.diagnose_logdir(five_runs)
    tensorboard_loaders_only(monkeypatch)
    monkeypatch.setattr(load_batches.os, "symlink", no_symlinks)
    assert cli.diagnose_logdir(five_runs) == whole
