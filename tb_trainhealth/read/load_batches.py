"""Loads a local logdir a few training runs at a time, for a one-pass reader (the CLI).

The data server keeps every run it has loaded in memory (~11 MB for a 100,000-step run of
a 100-layer model: its reservoirs of 5,000 points a series) until it exits, while a one-pass
reader needs one run at a time. So runs are loaded RUNS_PER_BATCH at a time by a data server
of their own, over a scratch directory of symlinks to their event files (run names stay those
TensorBoard shows), and the next batch loads while this one is read: memory stays that of
two batches however many runs the logdir holds, and loading overlaps diagnosing.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator

from tensorboard.data import provider as tb_provider

from tb_trainhealth.read import data_server, event_files
from tb_trainhealth.read.logdir import SAMPLES_PER_PLUGIN, NoRunsError, has_runs, loaded_logdir
from tb_trainhealth.run_paths import is_local, training_run_of

logger = logging.getLogger(__name__)

# A batch keeps both cores busy (the data server loads runs in parallel) and holds ~110 MB.
RUNS_PER_BATCH = 10


def run_directories(logdir: str) -> list[str]:
    """The directories under `logdir` that hold event files, relative to it ("." for itself) and
    "/"-separated, as TensorBoard names runs. Symlinked directories are followed, as the data
    server follows them, except a link back to a directory above it (a loop)."""
    runs, real_parents = [], {logdir: {os.path.realpath(logdir)}}
    for directory, subdirectories, names in os.walk(logdir, followlinks=True):
        parents = real_parents.pop(directory)
        for name in list(subdirectories):
            path = os.path.join(directory, name)
            real = os.path.realpath(path)
            if real in parents:  # a symlink back to a directory above it: a loop
                subdirectories.remove(name)
            else:
                real_parents[path] = parents | {real}
        if any(event_files.is_event_file(name) for name in names):
            runs.append(os.path.relpath(directory, logdir).replace(os.sep, "/"))
    return sorted(runs)


def training_runs(runs: list[str]) -> list[list[str]]:
    """Runs grouped as one training run each: a directory with Keras' train/validation under it."""
    groups: dict[str, list[str]] = {}
    for run in runs:
        groups.setdefault(training_run_of(run)[0], []).append(run)
    return list(groups.values())


def batches(groups: list[list[str]], size: int) -> list[list[str]]:
    """Whole training runs packed in order into batches of about `size` training runs."""
    return [[run for group in groups[i : i + size] for run in group] for i in range(0, len(groups), size)]


@contextlib.contextmanager
def linked_runs(logdir: str, runs: list[str]) -> Iterator[str]:
    """A scratch directory holding `runs` (their event files, as symlinks) under their own names."""
    with tempfile.TemporaryDirectory(prefix="tb_trainhealth_runs_") as root:
        for run in runs:
            source, target = os.path.join(logdir, run), os.path.join(root, run)
            os.makedirs(target, exist_ok=True)
            try:
                names = os.listdir(source)
            except OSError:  # gone or locked since the walk: reported by the file checks
                continue
            for name in names:
                path = os.path.join(source, name)
                if event_files.is_event_file(name) and os.path.isfile(path):
                    os.symlink(os.path.abspath(path), os.path.join(target, name))
        yield root


def loaded_run_batches(logdir: str, runs: list[str] | None = None) -> Iterator[tb_provider.DataProvider]:
    """Every run under `logdir` for one pass over them: a batch at a time through the data
    server (`loaded_in_batches`) where it runs, else all at once with `logdir.loaded_logdir`
    (remote logdirs, no data server, runs that cannot be linked; after a batch failed to load,
    runs already yielded come again: skip those already read). Raises NoRunsError when no
    loader lists a run. runs: only these (TensorBoard run names) where batches are loaded."""
    listed = False
    if is_local(logdir):
        try:
            for provider in loaded_in_batches(logdir, runs=runs):
                listed = listed or has_runs(provider)
                yield provider
        except data_server.DataServerUnavailable as err:
            logger.info("reading %s without the data server: %s", logdir, err)
        else:
            if not listed:
                raise NoRunsError.under(logdir)
            return
    with loaded_logdir(logdir) as provider:
        yield provider


def loaded_in_batches(
    logdir: str, runs_per_batch: int | None = None, runs: list[str] | None = None
) -> Iterator[tb_provider.DataProvider]:
    """A DataProvider per batch of training runs under a local `logdir`, each loaded in full by
    a data server of its own and valid until the next is asked for; the next batch loads
    meanwhile. Raises DataServerUnavailable where a batch cannot be loaded (no server for this
    platform: at the first; a server that died: at any)."""
    work = batches(training_runs(run_directories(logdir) if runs is None else runs), runs_per_batch or RUNS_PER_BATCH)
    loads: list[concurrent.futures.Future] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tb-trainhealth-load") as loader:
        try:
            for index, runs in enumerate(work):
                if index == 0:
                    loads.append(loader.submit(_load, logdir, runs))
                if index + 1 < len(work):
                    loads.append(loader.submit(_load, logdir, work[index + 1]))
                stack, provider = loads[index].result()
                with stack:
                    yield provider
        finally:
            for load in loads:  # loaded ahead but not read (the caller stopped early): stopped here
                with contextlib.suppress(Exception):
                    if not load.cancel():
                        load.result()[0].close()  # (closing a closed stack does nothing)


def _load(logdir: str, runs: list[str]) -> tuple[contextlib.ExitStack, tb_provider.DataProvider]:
    """On the loader thread: `runs` linked and loaded; closing the stack stops their server."""
    stack = contextlib.ExitStack()
    try:
        root = stack.enter_context(linked_runs(logdir, runs))
        provider = stack.enter_context(data_server.loaded_once(root, SAMPLES_PER_PLUGIN))
    except OSError as err:  # no symlinks (Windows without developer mode), no scratch space
        stack.close()
        raise data_server.DataServerUnavailable(f"cannot link the runs for the data server: {err}") from err
    except BaseException:
        stack.close()
        raise
    return stack, provider
