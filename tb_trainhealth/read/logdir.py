"""A DataProvider over a logdir on disk, built from TensorBoard's own event-file loading code."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator

from tensorboard import context as tb_context
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.compat import tf as tb_tf
from tensorboard.data import provider as tb_provider

from tb_trainhealth import storage
from tb_trainhealth.contract import series, tags
from tb_trainhealth.read import data_server
from tb_trainhealth.read.reader import SCALARS_PLUGIN
from tb_trainhealth.run_paths import is_local

logger = logging.getLogger(__name__)

# Points kept per series while loading, for both loaders: what the rules see (0 = keep all).
SAMPLES_PER_PLUGIN = {
    tags.PLUGIN_NAME: series.MAX_POINTS,
    SCALARS_PLUGIN: series.MAX_POINTS,
    tags.RECORDS_PLUGIN_NAME: 0,
}


class LogdirError(Exception):
    """The logdir itself cannot be read."""


class NoRunsError(LogdirError):
    """TensorBoard's loader found no run (no event file, or none it could read) under the logdir."""

    @classmethod
    def under(cls, logdir: str) -> NoRunsError:
        return cls(
            f"no TensorBoard event files under {logdir}; record a run with "
            'model.fit(..., callbacks=[HealthCallback(log_dir="logs/run1")])'
        )


class LiveLogdir:
    """Every run under `logdir`, re-read on `reload()` (new runs, new data in growing runs).

    Keeps every record (events) and a reservoir sample of series.MAX_POINTS points per dense
    series, so memory stays bounded however long the runs (the tab's rules see as many points).
    """

    def __init__(self, logdir: str):
        _require_directory(logdir)
        self.logdir = logdir
        self.multiplexer = plugin_event_multiplexer.EventMultiplexer(
            tensor_size_guidance=SAMPLES_PER_PLUGIN,
            max_reload_threads=1,
        )
        self.provider = data_provider.MultiplexerDataProvider(self.multiplexer, logdir)
        self.reload()

    def reload(self) -> None:
        closed = None if is_local(self.logdir) else storage.endpoint_closed(storage.scheme(self.logdir))
        if closed is not None:  # said at once (a client retries a refused connection for seconds)
            raise LogdirError(f"cannot read {self.logdir}: {closed}")
        try:
            self.multiplexer.AddRunsFromDirectory(self.logdir)
            self.multiplexer.Reload()
        except (OSError, tb_tf.errors.OpError) as err:
            why = None if is_local(self.logdir) else storage.refusal(self.logdir, err)
            raise LogdirError(f"cannot read {self.logdir}: {why or err}") from err
        except Exception as err:  # a store's own error (botocore's are no OSError)
            why = None if is_local(self.logdir) else storage.refusal(self.logdir, err)
            if why is None:
                raise
            raise LogdirError(f"cannot read {self.logdir}: {why}") from err


def open_logdir(logdir: str) -> data_provider.MultiplexerDataProvider:
    """Load every run under `logdir` once, in this process; no event files at all is an error."""
    return _require_runs(LiveLogdir(logdir).provider, logdir)


@contextlib.contextmanager
def loaded_logdir(logdir: str) -> Iterator[tb_provider.DataProvider]:
    """Load every run under `logdir` once, fast: local logdirs through TensorBoard's Rust data
    server where it is installed, anything else (gs://, s3://, no server) in this process."""
    with followed_logdir(logdir, reload_seconds=None) as (provider, _):
        yield _require_runs(provider, logdir)


@contextlib.contextmanager
def followed_logdir(
    logdir: str, reload_seconds: int | None
) -> Iterator[tuple[tb_provider.DataProvider, Callable[[], None]]]:
    """(provider, reload) over every run under `logdir`, loaded once before this yields.

    reload_seconds: how often the data server re-reads the logdir by itself (None: never);
    `reload()` re-reads it now where the Python loader is used instead, and does nothing
    for the data server."""
    _require_directory(logdir)
    with contextlib.ExitStack() as stack:
        provider = None
        if is_local(logdir):
            try:
                provider = stack.enter_context(data_server.loaded_once(logdir, SAMPLES_PER_PLUGIN, reload_seconds))
            except data_server.DataServerUnavailable as err:
                logger.info("reading %s without the data server: %s", logdir, err)
        if provider is not None:
            yield provider, lambda: None
        else:
            live = LiveLogdir(logdir)
            yield live.provider, live.reload


def _require_directory(logdir: str) -> None:
    """A bucket no installed library reads is said with what to install, not "not a directory"."""
    closed = None if is_local(logdir) else storage.endpoint_closed(storage.scheme(logdir))
    if closed is not None:  # said at once (a client retries a refused connection for a minute)
        raise LogdirError(f"cannot read {logdir}: {closed}")
    problem = storage.reader_problem(logdir, tb_tf)
    if problem:
        raise LogdirError(problem.replace("TensorBoard cannot", "cannot", 1))
    try:
        found = tb_tf.io.gfile.isdir(logdir)
    except Exception as err:  # a store that refuses or does not answer: one line, not a traceback
        why = None if is_local(logdir) else storage.refusal(logdir, err)
        if why is None:
            raise
        raise LogdirError(f"cannot read {logdir}: {why}") from err
    if not found:
        # A bucket reads as "not a directory" where its listing fails too: ask the store why.
        why = None if is_local(logdir) else storage.probe_listing(logdir)
        raise LogdirError(f"cannot read {logdir}: {why}" if why else f"not a directory: {logdir}")


def unreadable_directories(logdir: str) -> list[tuple[str, str]]:
    """(directory relative to `logdir`, why) for each directory under a local logdir that
    cannot be listed: the data server skips those without a word, and a run nobody can read
    must not pass a CI check as "nothing found". The logdir itself unreadable: LogdirError."""
    if not is_local(logdir):
        return []
    failures: list[OSError] = []
    for _ in os.walk(logdir, onerror=failures.append):
        pass
    unreadable = []
    for err in failures:
        path = os.path.relpath(str(err.filename), logdir) if err.filename else "?"
        if path == ".":
            raise LogdirError(f"cannot read {logdir}: {err.strerror or err}")
        unreadable.append((path.replace(os.sep, "/"), err.strerror or str(err)))
    return unreadable


def _require_runs(provider: tb_provider.DataProvider, logdir: str) -> tb_provider.DataProvider:
    if not has_runs(provider):
        raise NoRunsError.under(logdir)
    return provider


def has_runs(provider: tb_provider.DataProvider) -> bool:
    return bool(provider.list_runs(tb_context.RequestContext(), experiment_id=""))
