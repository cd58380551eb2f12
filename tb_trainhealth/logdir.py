"""A DataProvider over a logdir on disk, built from TensorBoard's own event-file loading code."""

from __future__ import annotations

from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.compat import tf as tb_tf

from tb_trainhealth import schema
from tb_trainhealth.reader import DEFAULT_DOWNSAMPLE, SCALARS_PLUGIN


class LogdirError(Exception):
    """The logdir itself cannot be read."""


class LiveLogdir:
    """Every run under `logdir`, re-read on `reload()` (new runs, new data in growing runs).

    Keeps every record (events) and a reservoir sample of DEFAULT_DOWNSAMPLE points per dense
    series, so memory stays bounded however long the runs (the tab's rules see as many points).
    """

    def __init__(self, logdir: str):
        if not tb_tf.io.gfile.isdir(logdir):
            raise LogdirError(f"not a directory: {logdir}")
        self.logdir = logdir
        self.multiplexer = plugin_event_multiplexer.EventMultiplexer(
            tensor_size_guidance={
                schema.PLUGIN_NAME: DEFAULT_DOWNSAMPLE,
                SCALARS_PLUGIN: DEFAULT_DOWNSAMPLE,
                schema.RECORDS_PLUGIN_NAME: 0,  # 0 = keep all
            },
            max_reload_threads=1,
        )
        self.provider = data_provider.MultiplexerDataProvider(self.multiplexer, logdir)
        self.reload()

    def reload(self) -> None:
        try:
            self.multiplexer.AddRunsFromDirectory(self.logdir)
            self.multiplexer.Reload()
        except (OSError, tb_tf.errors.OpError) as err:
            raise LogdirError(f"cannot read {self.logdir}: {err}") from err


def open_logdir(logdir: str) -> data_provider.MultiplexerDataProvider:
    """Load every run under `logdir` once; a logdir with no event files at all is an error."""
    live = LiveLogdir(logdir)
    if not live.multiplexer.Runs():
        raise LogdirError(
            f"no TensorBoard event files under {logdir}; record a run with "
            'model.fit(..., callbacks=[HealthCallback(log_dir="logs/run1")])'
        )
    return live.provider
