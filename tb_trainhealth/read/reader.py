"""Builds RunSignals from any TensorBoard DataProvider (the plugin's, or the CLI's over a logdir).

Runs are grouped the way Keras lays them out: `keras.callbacks.TensorBoard(log_dir=D)`
writes `D/train` and `D/validation`, HealthCallback writes `D` itself; all three are
one training run named `D`. Loss curves are taken from our own tags when present,
else from Keras' (`epoch_loss`, `batch_loss`) or plain `tf.summary.scalar` tags.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import logging
import threading
import time
from typing import Any

import numpy as np
from tensorboard import context as tb_context
from tensorboard.data import provider as tb_provider

from tb_trainhealth import step_axis
from tb_trainhealth.contract import payload, tags
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import Event, UnknownEvent, parse_event
from tb_trainhealth.contract.run_info import RunInfo
from tb_trainhealth.contract.run_settings import RunSettings
from tb_trainhealth.run_paths import MAIN, training_run_of
from tb_trainhealth.signals import LayerSeries, RunSignals, Series

logger = logging.getLogger(__name__)

# Background re-listings (one at a time per reader; a few readers, one per experiment).
_RELIST_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="tb-trainhealth-relist")
SCALARS_PLUGIN = tags.SCALARS_PLUGIN_NAME


@dataclasses.dataclass
class RunGroup:
    """One training run: its own TensorBoard run plus Keras' train/validation sub-runs."""

    name: str
    members: dict[str, str]  # role ("main", "train", "validation") -> TensorBoard run name


def group_runs(run_names: list[str], standalone: frozenset[str] = frozenset()) -> list[RunGroup]:
    """Group Keras' `train`/`validation` sub-runs under their parent; runs in `standalone`
    (written by HealthCallback, even into a directory named `train`) stay runs of their own."""
    groups: dict[str, dict[str, str]] = {}
    for run in run_names:
        group, role = training_run_of(run, standalone)
        groups.setdefault(group, {})[role] = run
    return [RunGroup(name, members) for name, members in sorted(groups.items())]


def _request_context(ctx: tb_context.RequestContext | None) -> tb_context.RequestContext:
    return ctx if ctx is not None else tb_context.RequestContext()


class SignalReader:
    """Reads RunSignals for run groups through one DataProvider; one listing per call of `groups`.

    Holds no request context: every call that reaches the data provider takes the caller's
    `ctx` (the plugin passes each request's `plugin_util.context(environ)`, as TensorBoard's own
    plugins do); without one (the CLI) it uses a fresh, empty `RequestContext`.
    """

    def __init__(
        self,
        data_provider: tb_provider.DataProvider,
        experiment_id: str = "",
        downsample: int = sig.MAX_POINTS,
        listing_ttl: float = 0.0,
        relist_in_background: bool = False,
    ):
        """listing_ttl: reuse the tag listing for this many seconds (the plugin's routes for one
        page refresh share it; TensorBoard itself only reloads data every few seconds).
        relist_in_background: once there is a listing, an expired one is served while a new
        one is made on another thread (TensorBoard's Python loader takes seconds to list a big
        logdir: a route must not wait for it)."""
        self._provider = data_provider
        self._listing_ttl = listing_ttl
        self._relist_in_background = relist_in_background
        self._relisting: concurrent.futures.Future | None = None
        self._relist_lock = threading.Lock()
        self._listed_at = -float("inf")
        self._groups: list[RunGroup] = []
        self._experiment_id = experiment_id
        self._downsample = downsample
        self._ours_scalars: dict[str, dict[str, Any]] = {}
        self._ours_tensors: dict[str, dict[str, Any]] = {}
        self._ours_records: dict[str, dict[str, Any]] = {}
        self._plain_scalars: dict[str, dict[str, Any]] = {}

    def groups(self, ctx: tb_context.RequestContext | None = None) -> list[RunGroup]:
        """List the runs (refreshing what is known about their tags, at most every listing_ttl s)."""
        if time.monotonic() - self._listed_at < self._listing_ttl:
            return self._groups
        ctx = _request_context(ctx)
        if self._relist_in_background and self._listed_at > -float("inf"):
            with self._relist_lock:
                if self._relisting is None or self._relisting.done():
                    self._relisting = _RELIST_POOL.submit(self._relist, ctx)
                    self._relisting.add_done_callback(_report_failed_listing)
            return self._groups
        self._relist(ctx)
        return self._groups

    def _relist(self, ctx: tb_context.RequestContext) -> None:
        """A new listing of every run's tags, swapped in when complete."""
        started = time.monotonic()
        kwargs = {"experiment_id": self._experiment_id}
        ours_scalars = self._provider.list_scalars(ctx, plugin_name=tags.PLUGIN_NAME, **kwargs)
        ours_tensors = self._provider.list_tensors(ctx, plugin_name=tags.PLUGIN_NAME, **kwargs)
        ours_records = self._provider.list_tensors(ctx, plugin_name=tags.RECORDS_PLUGIN_NAME, **kwargs)
        plain_scalars = self._provider.list_scalars(ctx, plugin_name=SCALARS_PLUGIN, **kwargs)
        ours = frozenset(ours_scalars) | frozenset(ours_tensors) | frozenset(ours_records)
        self._ours_scalars, self._ours_tensors, self._ours_records = ours_scalars, ours_tensors, ours_records
        self._plain_scalars = plain_scalars
        self._groups = [g for g in group_runs(sorted(ours | set(plain_scalars)), standalone=ours) if self._relevant(g)]
        self._listed_at = started

    def _relevant(self, group: RunGroup) -> bool:
        """Runs with our data or with a loss curve; other tools' runs are not ours to judge."""
        for run in group.members.values():
            if run in self._ours_scalars or run in self._ours_tensors or run in self._ours_records:
                return True
            if set(self._plain_scalars.get(run, {})) & set(sig.TRAIN_LOSS_TAGS):
                return True
        return False

    def last_step(self, group: RunGroup) -> tuple[int, float, int]:
        """A cheap fingerprint of how far a group's data goes: (max step, max wall time, sum of
        every tag's own max step). The last term changes when one tag gets more data while the
        run's maximum does not: TensorBoard's loaders can show a file's prefix in which the
        newest record (flushed at once) comes before rows still buffered when it was written."""
        step, wall, per_tag = -1, 0.0, 0
        for run in group.members.values():
            for listing in (self._ours_scalars, self._ours_tensors, self._ours_records, self._plain_scalars):
                for ts in listing.get(run, {}).values():
                    step, wall = max(step, ts.max_step), max(wall, ts.max_wall_time)
                    per_tag += ts.max_step + 1
        return step, wall, per_tag

    def read(self, group: RunGroup, ctx: tb_context.RequestContext | None = None) -> RunSignals:
        ctx = _request_context(ctx)
        wall = self.last_step(group)[1]
        run = RunSignals(run=group.name, last_write=wall if wall > 0 else None)
        walls: dict[str, np.ndarray] = {}  # wall times of the series that decide the run's axis
        main = group.members.get(MAIN)
        if main is not None:
            self._read_ours(main, run, ctx, walls)
        epoch_series: list[str] = []
        for role, run_name in group.members.items():
            tag_map = sig.VALIDATION_LOSS_TAGS if role == "validation" else sig.TRAIN_LOSS_TAGS
            epoch_series += self._read_plain(run_name, tag_map, run, ctx, walls)
        batch_level = next((name for name in (sig.LOSS, sig.BATCH_LOSS) if name in walls), None)
        reference = (run.series[batch_level].steps, walls[batch_level]) if batch_level else None
        step_axis.place_epoch_series(run, {name: walls[name] for name in epoch_series}, reference)
        return run

    # -- our plugin's data --------------------------------------------------------------
    def _check_versions(self, run_name: str, run: RunSignals) -> bool:
        listings = [
            ts
            for listing in (self._ours_scalars, self._ours_tensors, self._ours_records)
            for ts in listing.get(run_name, {}).values()
        ]
        for ts in listings:
            try:
                tags.parse_plugin_content(ts.plugin_content)
            except tags.SchemaError as err:
                run.errors.append(str(err))
                return False
        return bool(listings)

    def _read_ours(
        self, run_name: str, run: RunSignals, ctx: tb_context.RequestContext, walls: dict[str, np.ndarray]
    ) -> None:
        if not self._check_versions(run_name, run):
            return
        run.has_health_data = True
        scalar_tags = [t for t in self._ours_scalars.get(run_name, {}) if t in sig.OUR_SCALARS]
        columns = {
            tag: _scalar_columns(points)
            for tag, points in self._read_scalars(tags.PLUGIN_NAME, run_name, scalar_tags, ctx).items()
        }
        tensors = self._read_tensors(tags.PLUGIN_NAME, self._ours_tensors, run_name, ctx)
        for tag, row_columns in _split_rows(tensors.get(tags.TAG_ROW, [])).items():
            # Schema 1 fits (scalars) and schema 2 ones (rows) in one run directory: both.
            columns[tag] = tuple(map(np.concatenate, zip(columns[tag], row_columns))) if tag in columns else row_columns
        for tag, (steps, values, point_walls) in columns.items():
            if len(steps):
                name = sig.OUR_SCALARS[tag]
                run.series[name], point_walls = _sorted_series(steps, values, point_walls)
                if name == sig.LOSS:
                    walls[name] = point_walls
        records = self._read_tensors(tags.RECORDS_PLUGIN_NAME, self._ours_records, run_name, ctx)
        for point in records.get(tags.TAG_RUN_INFO, [])[-1:]:
            info = _json_payload(point.numpy, run)
            run.info = RunInfo.parse(info) if isinstance(info, dict) else RunInfo()
        for point in records.get(tags.TAG_RUN_SETTINGS, [])[-1:]:
            run.settings = RunSettings.parse(_json_payload(point.numpy, run))
        run.layers = list(run.info.layers)
        points = records.get(tags.TAG_PREFLIGHT, []) + records.get(tags.TAG_EVENTS, [])  # preflight first
        run.events = _parse_events([_json_payload(point.numpy, run) for point in points], run.errors)
        for tag, name in sig.OUR_LAYER_TENSORS.items():
            points = [p for p in tensors.get(tag, []) if np.shape(p.numpy) == (len(run.layers),)]
            if points and run.layers:
                run.layer_series[name] = LayerSeries.of(
                    [p.step for p in points], np.stack([p.numpy for p in points]), len(run.layers)
                )

    def _read_tensors(
        self, plugin_name: str, listing: dict[str, Any], run_name: str, ctx: tb_context.RequestContext
    ) -> dict[str, list]:
        return self._read(self._provider.read_tensors, plugin_name, run_name, list(listing.get(run_name, {})), ctx)

    def _read_scalars(
        self, plugin_name: str, run_name: str, tags: list[str], ctx: tb_context.RequestContext
    ) -> dict[str, list]:
        return self._read(self._provider.read_scalars, plugin_name, run_name, tags, ctx)

    def _read(
        self, read, plugin_name: str, run_name: str, tags: list[str], ctx: tb_context.RequestContext
    ) -> dict[str, list]:
        if not tags:
            return {}
        return read(
            ctx,
            experiment_id=self._experiment_id,
            plugin_name=plugin_name,
            downsample=self._downsample,
            run_tag_filter=tb_provider.RunTagFilter(runs=[run_name], tags=tags),
        ).get(run_name, {})

    # -- loss curves from Keras' TensorBoard callback or plain tf.summary.scalar ---------
    def _read_plain(
        self,
        run_name: str,
        tag_map: dict[str, str],
        run: RunSignals,
        ctx: tb_context.RequestContext,
        walls: dict[str, np.ndarray],
    ) -> list[str]:
        """Reads the loss curves not already known; returns those indexed by epoch (Keras' `epoch_*`)."""
        tags = [t for t in self._plain_scalars.get(run_name, {}) if t in tag_map and tag_map[t] not in run.series]
        epoch_indexed = []
        for tag, points in sorted(self._read_scalars(SCALARS_PLUGIN, run_name, tags, ctx).items()):
            name = tag_map[tag]
            if points and name not in run.series:
                run.series[name], walls[name] = _series_and_walls(points)
                if tag.startswith(sig.KERAS_EPOCH_TAG_PREFIX):
                    epoch_indexed.append(name)
        return epoch_indexed


def _report_failed_listing(done: concurrent.futures.Future) -> None:
    if done.exception() is not None:
        logger.warning("tb-trainhealth: could not list the runs (the last listing is shown): %s", done.exception())


Columns = tuple[np.ndarray, np.ndarray, np.ndarray]  # steps, values, wall times


def _scalar_columns(points: list) -> Columns:
    steps = np.fromiter((p.step for p in points), np.int64, len(points))
    values = np.fromiter((p.value for p in points), np.float64, len(points))
    return steps, values, np.fromiter((p.wall_time for p in points), np.float64, len(points))


def _split_rows(points: list) -> dict[str, Columns]:
    """The `tags.TAG_ROW` vectors by column tag (`tags.ROW_COLUMNS`; a row of 3 has no loss);
    step time and input wait only where they were measured."""
    columns: dict[str, list[Columns]] = {}
    for names in (tags.ROW_COLUMNS, tags.ROW_COLUMNS_WITHOUT_LOSS):
        rows = [p for p in points if np.size(p.numpy) == len(names)]
        if not rows:
            continue
        steps = np.fromiter((p.step for p in rows), np.int64, len(rows))
        point_walls = np.fromiter((p.wall_time for p in rows), np.float64, len(rows))
        values = np.stack([np.ravel(p.numpy) for p in rows]).astype(np.float64)
        for index, tag in enumerate(names):
            keep = np.isfinite(values[:, index]) if tag in tags.ROW_MEASURED_COLUMNS else slice(None)
            columns.setdefault(tag, []).append((steps[keep], values[keep, index], point_walls[keep]))
    return {tag: tuple(map(np.concatenate, zip(*parts))) for tag, parts in columns.items()}


def _sorted_series(steps: np.ndarray, values: np.ndarray, point_walls: np.ndarray) -> tuple[Series, np.ndarray]:
    """A series in step order, and its points' wall times in the same order."""
    order = np.argsort(steps, kind="stable")
    return Series(steps[order], values[order]), point_walls[order]


def _series_and_walls(points: list) -> tuple[Series, np.ndarray]:
    """A series from data-provider points, and its points' wall times in the same (step) order."""
    return _sorted_series(*_scalar_columns(points))


def _parse_events(records: list[Any], errors: list[str]) -> list[Event]:
    """The events of a run's records (each a JSON list), in log order. An event written twice
    (a resumed writer) counts once; events that are not valid are counted in `errors`."""
    seen: set[str] = set()
    events, invalid = [], 0
    for record in records:
        for raw in record if isinstance(record, list) else []:
            key = json.dumps(raw, sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            try:
                events.append(parse_event(raw))
            except UnknownEvent:
                continue  # written by a newer tb-trainhealth: not ours to judge
            except payload.Invalid:
                invalid += 1
    if invalid:
        errors.append(f"{invalid} unreadable tb-trainhealth event(s) ignored")
    return events


def _json_payload(value: Any, run: RunSignals) -> Any:
    try:
        raw = value.item() if hasattr(value, "item") else value
        return json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
    except (ValueError, AttributeError, UnicodeDecodeError) as err:
        run.errors.append(f"unreadable tb-trainhealth record: {err}")
        return None
