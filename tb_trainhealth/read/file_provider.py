"""A DataProvider over local runs read straight from their event files, for a one-pass reader (the CLI).

TensorBoard's Rust data server decodes every value of every record, sends each point over gRPC and
spends most of `diagnose`'s time doing it (`python bench/scale.py`). This reads a run's files with
`record_stream` (NumPy over the record stream) and keeps what the data server would show for the
plugins this package reads, with the data server's rules:

- a run's event files are read in name order; a tag's first value decides its metadata (its
  plugin, data class and content); a value without metadata is a legacy scalar when it is a
  `simple_value`; plugin "scalars" of unknown data class is a scalar (TensorBoard's `data_compat`);
- a point preempts the points of its tag with the same or a later step (a resumed run);
- a scalar is a rank-0 float32 (or a `simple_value`);
- `SAMPLES_PER_PLUGIN` points are kept per series (0: all). Where a series has more, this keeps
  evenly spaced points and the last one, where the data server keeps a random sample and the
  last one: series the data server keeps in full read the same here.

A run with anything else (a broken file, a tensor without metadata, a scalar of another type,
files over MAX_RUN_BYTES in all: they are held in memory while read) raises NotSimple: the caller reads that run with TensorBoard's own loader.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np
from tensorboard.compat.proto import summary_pb2, types_pb2
from tensorboard.data import provider as tb_provider
from tensorboard.util import tensor_util

from tb_trainhealth.contract import tags
from tb_trainhealth.read import event_files
from tb_trainhealth.read.record_stream import NotSimple, Part, read_file

__all__ = ["FileProvider", "NotSimple", "load_runs"]

_READ_PLUGINS = (tags.PLUGIN_NAME, tags.RECORDS_PLUGIN_NAME, tags.SCALARS_PLUGIN_NAME)
# A run's files are held in memory while it is read: a bigger run is left to the data server, which streams.
MAX_RUN_BYTES = 256 << 20
_FILE_ORDER = 10**15  # a value's place: file index * _FILE_ORDER + its place in its file


@dataclasses.dataclass
class _TimeSeries:
    plugin_name: str
    data_class: int
    metadata: summary_pb2.SummaryMetadata
    steps: np.ndarray
    walls: np.ndarray
    values: Any  # scalars: float64 array; tensors: a list of arrays

    def description(self, kind):
        md = self.metadata
        return kind(
            max_step=int(self.steps.max()),
            max_wall_time=float(self.walls.max()),
            plugin_content=md.plugin_data.content,
            description=md.summary_description,
            display_name=md.display_name,
        )


@dataclasses.dataclass
class _Run:
    start_time: float
    series: dict[str, _TimeSeries]


def load_runs(logdir: str, runs: list[str], samples: dict[str, int]) -> FileProvider:
    """`runs` (TensorBoard run names, directories relative to `logdir`) read in full."""
    loaded = {}
    for run in runs:
        one = load_run(os.path.join(logdir, run), samples)
        if one is not None:
            loaded[run] = one
    return FileProvider(loaded)


def load_run(directory: str, samples: dict[str, int]) -> _Run | None:
    """One run's series as the data server keeps them; None: no event in it."""
    try:
        names = sorted(n for n in os.listdir(directory) if event_files.is_event_file(n))
    except OSError as err:
        raise NotSimple(f"cannot list {directory}: {err}") from err
    parts: dict[str, list[Part]] = {}
    start_time, events, total = None, 0, 0
    for index, name in enumerate(names):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        try:
            total += os.path.getsize(path)
            if total > MAX_RUN_BYTES:
                raise NotSimple(f"{directory}'s event files are over {MAX_RUN_BYTES >> 20} MiB")
            read = read_file(path)
        except OSError as err:
            raise NotSimple(f"cannot read {path}: {err}") from err
        for tag, found in read.parts.items():
            for part in found:
                part.order = part.order + index * _FILE_ORDER
            parts.setdefault(tag, []).extend(found)
        events += read.records
        if start_time is None and read.first_wall_time is not None:
            start_time = read.first_wall_time
    if not events:
        return None
    series = {}
    for tag, found in parts.items():
        one = _time_series(found, samples)
        if one is not None:
            series[tag] = one
    return _Run(start_time or 0.0, series)


def _time_series(parts: list[Part], samples: dict[str, int]) -> _TimeSeries | None:
    parts.sort(key=lambda part: int(part.order[0]))
    first = parts[0].first_value
    if first.HasField("metadata"):
        metadata = first.metadata
        plugin, data_class = metadata.plugin_data.plugin_name, metadata.data_class
        if plugin == tags.SCALARS_PLUGIN_NAME and data_class == summary_pb2.DATA_CLASS_UNKNOWN:
            data_class = summary_pb2.DATA_CLASS_SCALAR
    elif first.WhichOneof("value") == "simple_value":
        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=tags.SCALARS_PLUGIN_NAME)
        )
        plugin, data_class = tags.SCALARS_PLUGIN_NAME, summary_pb2.DATA_CLASS_SCALAR
    else:
        raise NotSimple(f"tag {first.tag!r} starts without metadata")
    if plugin not in _READ_PLUGINS:
        return None  # not read by this package
    if data_class not in (summary_pb2.DATA_CLASS_SCALAR, summary_pb2.DATA_CLASS_TENSOR):
        return None  # the data server shows it nowhere this package looks
    order = np.concatenate([part.order for part in parts])
    steps = np.concatenate([part.steps for part in parts])
    walls = np.concatenate([part.walls for part in parts])
    owner = np.concatenate([np.full(len(part.order), i) for i, part in enumerate(parts)])
    within = np.concatenate([np.arange(len(part.order)) for part in parts])
    sort = np.argsort(order, kind="stable")
    steps, walls, owner, within = steps[sort], walls[sort], owner[sort], within[sort]
    keep = _not_preempted(steps)
    capacity = samples.get(plugin, 0)
    if capacity and keep.sum() > capacity:
        kept = np.flatnonzero(keep)
        keep = kept[np.unique(np.linspace(0, len(kept) - 1, capacity).round().astype(np.int64))]
    else:
        keep = np.flatnonzero(keep)
    steps, walls, owner, within = steps[keep], walls[keep], owner[keep], within[keep]
    if data_class == summary_pb2.DATA_CLASS_SCALAR:
        values = _scalars(parts, owner, within)
    else:
        values = _tensors(parts, owner, within)
    return _TimeSeries(plugin, data_class, metadata, steps, walls, values)


def _not_preempted(steps: np.ndarray) -> np.ndarray:
    """Points no later point preempts (a later point at the same or an earlier step drops them)."""
    if len(steps) == 0:
        return np.zeros(0, bool)
    later_min = np.minimum.accumulate(steps[::-1])[::-1]
    return np.append(steps[:-1] < later_min[1:], True)


def _gathered(parts: list[Part], owner: np.ndarray, within: np.ndarray) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(part index, positions in the output, positions in the part) for each part with values kept."""
    out = []
    for i in np.unique(owner).tolist():
        where = np.flatnonzero(owner == i)
        out.append((i, where, within[where]))
    return out


def _scalars(parts: list[Part], owner: np.ndarray, within: np.ndarray) -> np.ndarray:
    values = np.empty(len(owner), np.float64)
    for i, where, positions in _gathered(parts, owner, within):
        part = parts[i]
        if part.dtype != np.float32 or part.shape != ():
            raise NotSimple(f"scalar {part.first_value.tag!r} is not a rank-0 float32")
        values[where] = part.numbers(positions).astype(np.float64)
    return values


def _tensors(parts: list[Part], owner: np.ndarray, within: np.ndarray) -> list[np.ndarray]:
    values: list[Any] = [None] * len(owner)
    for i, where, positions in _gathered(parts, owner, within):
        part = parts[i]
        if part.dtype is None:
            arrays = [_ndarray(part.protos[p]) for p in positions.tolist()]
        else:
            arrays = list(part.numbers(positions))
        for at, array in zip(where.tolist(), arrays):
            values[at] = array
    return values


def _ndarray(tensor) -> np.ndarray:
    """`tensor_util.make_ndarray`, without its dtype bookkeeping for a string tensor holding every
    element (the JSON records: a thousand of them in a long run)."""
    if tensor.dtype == types_pb2.DT_STRING:
        shape = [d.size for d in tensor.tensor_shape.dim]
        if len(tensor.string_val) == int(np.prod(shape, dtype=np.int64)):
            return np.array(list(tensor.string_val), dtype=object).reshape(shape)
    return tensor_util.make_ndarray(tensor)


class FileProvider(tb_provider.DataProvider):
    """The DataProvider interface (what `SignalReader` calls) over runs loaded by `load_runs`."""

    def __init__(self, runs: dict[str, _Run]):
        self._runs = runs

    def list_runs(self, ctx=None, *, experiment_id):
        return [
            tb_provider.Run(run_id=name, run_name=name, start_time=run.start_time) for name, run in self._runs.items()
        ]

    def _series(self, plugin_name, data_class, run_tag_filter):
        runs = run_tag_filter.runs if run_tag_filter is not None else None
        wanted_tags = run_tag_filter.tags if run_tag_filter is not None else None
        for name, run in self._runs.items():
            if runs is not None and name not in runs:
                continue
            for tag, series in run.series.items():
                if series.plugin_name != plugin_name or series.data_class != data_class:
                    continue
                if wanted_tags is not None and tag not in wanted_tags:
                    continue
                yield name, tag, series

    def _list(self, plugin_name, data_class, run_tag_filter, kind):
        out: dict[str, dict[str, Any]] = {}
        for run, tag, series in self._series(plugin_name, data_class, run_tag_filter):
            out.setdefault(run, {})[tag] = series.description(kind)
        return out

    def list_scalars(self, ctx=None, *, experiment_id, plugin_name, run_tag_filter=None):
        return self._list(plugin_name, summary_pb2.DATA_CLASS_SCALAR, run_tag_filter, tb_provider.ScalarTimeSeries)

    def list_tensors(self, ctx=None, *, experiment_id, plugin_name, run_tag_filter=None):
        return self._list(plugin_name, summary_pb2.DATA_CLASS_TENSOR, run_tag_filter, tb_provider.TensorTimeSeries)

    def read_scalars(self, ctx=None, *, experiment_id, plugin_name, downsample=None, run_tag_filter=None):
        out: dict[str, dict[str, list]] = {}
        for run, tag, series in self._series(plugin_name, summary_pb2.DATA_CLASS_SCALAR, run_tag_filter):
            take = _downsampled(len(series.steps), downsample)
            out.setdefault(run, {})[tag] = [
                tb_provider.ScalarDatum(step=s, wall_time=w, value=v)
                for s, w, v in zip(
                    series.steps[take].tolist(), series.walls[take].tolist(), series.values[take].tolist()
                )
            ]
        return out

    def read_last_scalars(self, ctx=None, *, experiment_id, plugin_name, run_tag_filter=None):
        out: dict[str, dict[str, Any]] = {}
        for run, tag, series in self._series(plugin_name, summary_pb2.DATA_CLASS_SCALAR, run_tag_filter):
            out.setdefault(run, {})[tag] = tb_provider.ScalarDatum(
                step=int(series.steps[-1]), wall_time=float(series.walls[-1]), value=float(series.values[-1])
            )
        return out

    def read_tensors(self, ctx=None, *, experiment_id, plugin_name, downsample=None, run_tag_filter=None):
        out: dict[str, dict[str, list]] = {}
        for run, tag, series in self._series(plugin_name, summary_pb2.DATA_CLASS_TENSOR, run_tag_filter):
            take = _downsampled(len(series.steps), downsample).tolist()
            steps, walls = series.steps.tolist(), series.walls.tolist()
            out.setdefault(run, {})[tag] = [
                tb_provider.TensorDatum(step=steps[i], wall_time=walls[i], numpy=series.values[i]) for i in take
            ]
        return out


def _downsampled(n: int, downsample: int | None) -> np.ndarray:
    """Positions of at most `downsample` of n points, evenly spread, the last always kept."""
    if downsample is None or n <= downsample:
        return np.arange(n)
    if downsample <= 0:
        return np.arange(0)
    return np.unique(np.linspace(0, n - 1, downsample).round().astype(np.int64))
