"""Tags: what the callback writes into event files, and how readers check its version.

Everything tb-trainhealth writes lives under one TensorBoard plugin name. Each
tag's ``plugin_data.content`` is a small JSON object carrying the schema
version, so a newer reader can read older logs and an older reader can say
clearly that a log is too new. This module is read-side safe: no TensorFlow.
"""

from __future__ import annotations

import json

from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.scalar import metadata as scalar_metadata

PLUGIN_NAME = "trainhealth"
# Discrete records (run info, events) live under a second plugin name so readers can
# keep every one of them (samples_per_plugin=0) while sampling the dense series.
RECORDS_PLUGIN_NAME = "trainhealth_records"

# Bump when the meaning of a tag changes; readers accept every version up to it.
# 2: the per-step loss, gradient norm, step time and input wait as one row vector (TAG_ROW).
SCHEMA_VERSION = 2


# Per-step scalars (rank-0 float32, data class SCALAR). Since schema 2 those in ROW_COLUMNS
# are written as the columns of TAG_ROW; readers still read them as scalars from older logs.
TAG_LOSS = "health/loss"
TAG_GRAD_NORM = "health/grad_norm"
TAG_LEARNING_RATE = "health/learning_rate"
TAG_STEP_TIME_MS = "health/step_time_ms"
# Of each step's time, how long it waited for its batch (fetched on the host and timed).
TAG_INPUT_WAIT_MS = "health/input_wait_ms"
TAG_NONFINITE_COUNT = "health/nonfinite_count"
TAG_LOSS_SCALE = "health/loss_scale"  # mixed precision: where the dynamic scale changes
# Sampled every few dozen steps (scalars): host RSS, and device memory where a GPU is present.
TAG_HOST_MEMORY_MB = "health/memory/host_mb"
TAG_DEVICE_MEMORY_MB = "health/memory/device_mb"
# Per epoch: the share of the machine's CPU other processes took meanwhile (0-1, Linux only).
TAG_OTHER_CPU_SHARE = "health/machine/other_cpu_share"
# Written by the stall watchdog when nothing else was for a while (compiling, a long
# validation, a stall): the run's newest write time says the process is alive. Value:
# seconds since the last finished step. No rule reads its values.
TAG_ALIVE = "health/alive"
# Per-epoch Keras logs (loss, val_loss, accuracy, ...) go to "health/epoch/<key>".
EPOCH_TAG_PREFIX = "health/epoch/"

# One float32 vector a step (data class TENSOR) holding the step's ROW_COLUMNS: TensorBoard's
# loaders pay per value, not per byte, so one value a step instead of four loads a long run
# faster. A row of 3 is a step whose loss the probe could not capture (ROW_COLUMNS_WITHOUT_LOSS).
# Step time and input wait are NaN where they were not measured; a NaN loss or gradient norm is real.
TAG_ROW = "health/row"
ROW_COLUMNS = (TAG_LOSS, TAG_GRAD_NORM, TAG_STEP_TIME_MS, TAG_INPUT_WAIT_MS)
ROW_COLUMNS_WITHOUT_LOSS = ROW_COLUMNS[1:]
ROW_MEASURED_COLUMNS = (TAG_STEP_TIME_MS, TAG_INPUT_WAIT_MS)  # NaN: not measured on that step

# Per-step vectors, one value per layer (rank-1 float32, data class TENSOR).
TAG_LAYER_GRAD_NORM = "health/layer/grad_norm"
TAG_LAYER_WEIGHT_NORM = "health/layer/weight_norm"
TAG_LAYER_GRAD_NONFINITE = "health/layer/grad_nonfinite"
# ||w_after - w_before|| / ||w_after|| per layer, on sampled steps (every 20th, later every 100th).
TAG_LAYER_UPDATE_RATIO = "health/layer/update_ratio"

# Discrete records (rank-0 string tensor holding JSON, data class TENSOR, RECORDS_PLUGIN_NAME).
TAG_RUN_INFO = "health/run_info"  # model description, once per fit()
TAG_RUN_SETTINGS = "health/run_settings"  # every setting a comparison needs, once per fit (run_settings.py)
TAG_EVENTS = "health/events"  # a JSON list of events: never sampled away
# A preflight's events (a JSON list, like TAG_EVENTS): a tag of their own, so a preflight written
# before a fit never shares a step with that fit's events (the Rust loader keeps one per step).
TAG_PREFLIGHT = "health/preflight"


# The same values again as plain scalars (plugin "scalars"), for TensorBoard's own Scalars and
# Time Series dashboards: a run recorded only with HealthCallback shows its loss curve where
# users always look. Written from the rows the callback already reads back (no op in the step).
# Readers never read them (ours above hold the same values): no name here is one that
# `series.TRAIN_LOSS_TAGS` maps, so they are never taken for a loss curve of their own.
# Per-step values are written on every step up to SCALARS_DENSE_STEPS, then on every
# SCALARS_EVERY-th (the writer keeps non-finite ones and a window's newest too): those dashboards
# keep 1000 points a series, and values no one sees cost every reader of the logdir a load
# (2 of the 4 values a step a long run would hold).
SCALARS_PLUGIN_NAME = scalar_metadata.PLUGIN_NAME  # TensorBoard's own: "scalars"
SCALARS_STEP_TAGS = {
    TAG_LOSS: "step/loss",
    TAG_GRAD_NORM: "step/grad_norm",
    TAG_LEARNING_RATE: "step/learning_rate",
}
SCALARS_DENSE_STEPS = 1000
SCALARS_EVERY = 10
# Keras' epoch logs as "epoch/<key>" (epoch/loss, epoch/val_loss, epoch/accuracy, ...).
SCALARS_EPOCH_PREFIX = "epoch/"


class SchemaError(ValueError):
    """Plugin data this reader cannot interpret."""


class SchemaTooNewError(SchemaError):
    """The log was written by a newer tb-trainhealth than this reader."""


def plain_scalar_steps(steps):
    """Which of `steps` (a step, or a numpy array of them) get their per-step values as plain scalars too."""
    return (steps <= SCALARS_DENSE_STEPS) | (steps % SCALARS_EVERY == 0)


def epoch_tag(log_key: str) -> str:
    return EPOCH_TAG_PREFIX + log_key


def plugin_content(**fields: object) -> bytes:
    return json.dumps({"version": SCHEMA_VERSION, **fields}, sort_keys=True).encode()


def summary_metadata(data_class: int, plugin_name: str = PLUGIN_NAME) -> summary_pb2.SummaryMetadata:
    """Metadata for one of our tags; data_class is explicit (TensorBoard drops UNKNOWN)."""
    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin_name, content=plugin_content()),
        data_class=data_class,
    )


def scalar_metadata() -> summary_pb2.SummaryMetadata:
    return summary_metadata(summary_pb2.DATA_CLASS_SCALAR)


def plain_scalar_metadata() -> summary_pb2.SummaryMetadata:
    """What `tf.summary.scalar` writes: TensorBoard's Scalars and Time Series dashboards show it."""
    return summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=SCALARS_PLUGIN_NAME),
        data_class=summary_pb2.DATA_CLASS_SCALAR,
    )


def tensor_metadata() -> summary_pb2.SummaryMetadata:
    return summary_metadata(summary_pb2.DATA_CLASS_TENSOR)


def record_metadata() -> summary_pb2.SummaryMetadata:
    return summary_metadata(summary_pb2.DATA_CLASS_TENSOR, RECORDS_PLUGIN_NAME)


def parse_plugin_content(content: bytes) -> int:
    """Return the schema version of a tag's plugin content, or raise SchemaError."""
    try:
        version = json.loads(content.decode("utf-8"))["version"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as err:
        raise SchemaError(f"malformed tb-trainhealth plugin data: {content[:80]!r}") from err
    if not isinstance(version, int) or version < 1:
        raise SchemaError(f"invalid tb-trainhealth schema version: {version!r}")
    if version > SCHEMA_VERSION:
        raise SchemaTooNewError(
            f"written by a newer tb-trainhealth (schema v{version}; this reader knows "
            f"up to v{SCHEMA_VERSION}): pip install -U tb-trainhealth"
        )
    return version
