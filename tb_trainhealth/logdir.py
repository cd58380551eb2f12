"""A DataProvider over a logdir on disk, built from TensorBoard's own event-file loading code."""

from __future__ import annotations

from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.compat import tf as tb_tf

from tb_trainhealth import schema
from tb_trainhealth.reader import DEFAULT_DOWNSAMPLE, SCALARS_PLUGIN


class LogdirError(Exception):
    """The logdir itself cannot be read."""


def open_logdir(logdir: str) -> data_provider.MultiplexerDataProvider:
    """Load every run under `logdir`: every record (events), and a reservoir sample of
    DEFAULT_DOWNSAMPLE points per dense series, so memory stays bounded however long the
    run (the rules see the same number of points in the tab)."""
    if not tb_tf.io.gfile.isdir(logdir):
        raise LogdirError(f"not a directory: {logdir}")
    multiplexer = plugin_event_multiplexer.EventMultiplexer(
        tensor_size_guidance={
            schema.PLUGIN_NAME: DEFAULT_DOWNSAMPLE,
            SCALARS_PLUGIN: DEFAULT_DOWNSAMPLE,
            schema.RECORDS_PLUGIN_NAME: 0,  # 0 = keep all
        },
        max_reload_threads=1,
    )
    try:
        multiplexer.AddRunsFromDirectory(logdir)
        multiplexer.Reload()
    except (OSError, tb_tf.errors.OpError) as err:
        raise LogdirError(f"cannot read {logdir}: {err}") from err
    if not multiplexer.Runs():
        raise LogdirError(
            f"no TensorBoard event files under {logdir}; record a run with "
            'model.fit(..., callbacks=[HealthCallback(log_dir="logs/run1")])'
        )
    return data_provider.MultiplexerDataProvider(multiplexer, logdir)
