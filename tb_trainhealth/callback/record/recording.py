"""Everything the callback records goes through here once, to two sinks: the event file
(`HealthWriter`) and the in-memory copy the online engine diagnoses (`SignalMemory`).

The copy holds exactly what a reader of the file would build: the same tag -> series
map (`contract.series`), the same point budget (`series.MAX_POINTS`), and events as
they read back from their JSON (NaN becomes null on disk, and so here).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from typing import Any

import numpy as np

from tb_trainhealth.callback.record.health_writer import HealthWriter, finite_json
from tb_trainhealth.callback.step.row_layout import Rows
from tb_trainhealth.contract import payload, tags
from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import Event, parse_event
from tb_trainhealth.contract.run_info import RunInfo
from tb_trainhealth.contract.run_settings import RunSettings
from tb_trainhealth.signals import LayerSeries, RunSignals, Series

logger = logging.getLogger(__name__)

CLOSE_IDLE_SECONDS = 2.0


class SignalMemory:
    """The in-memory sink: bounded series, every event, the latest run info."""

    def __init__(self, run: str):
        self._run = run
        self._info = RunInfo()
        self.settings = RunSettings()  # the latest fit's (a comparison at the end of fit reads them)
        self._series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._layer_series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._events: list[Event] = []

    def set_info(self, info: RunInfo) -> None:
        """A new fit may train another set of layers (unfrozen, rebuilt): restart the per-layer series."""
        if [layer.name for layer in info.layers] != [layer.name for layer in self._info.layers]:
            self._layer_series.clear()
        self._info = info

    def add(self, store: dict, name: str, steps: np.ndarray, values: np.ndarray) -> None:
        old_steps, old_values = store.get(name, (steps[:0], values[:0]))
        store[name] = sig.decimate(np.concatenate([old_steps, steps]), np.concatenate([old_values, values]))

    def add_series(self, name: str, steps: Any, values: Any) -> None:
        self.add(self._series, name, np.asarray(steps, np.int64), np.asarray(values, np.float64))

    def add_layer_series(self, name: str, steps: Any, rows: Any) -> None:
        self.add(self._layer_series, name, np.asarray(steps, np.int64), np.asarray(rows, np.float64))

    def add_event(self, event: Event) -> None:
        self._events.append(event)

    def signals(self) -> RunSignals:
        return RunSignals(
            run=self._run,
            series={name: Series(s, v) for name, (s, v) in self._series.items()},
            layer_series={name: LayerSeries(s, v) for name, (s, v) in self._layer_series.items()},
            layers=list(self._info.layers),
            events=list(self._events),
            info=self._info,
            settings=self.settings,
            has_health_data=True,
        )


class Recording:
    """One call per record; both sinks get it. Events wait in `pending` until `write_events`.

    One per run: the memory lasts as long as the callback (a second fit is the same run).
    The event file is closed when a fit ends, as Keras' own TensorBoard callback does, but
    only once no new fit has started for CLOSE_IDLE_SECONDS: TensorFlow names event files by
    the second they were opened plus an unpadded counter, so two files opened within one
    second can sort out of order (`....10.v2` before `....9.v2`), and TensorBoard would read
    the later fit first and drop it as orphaned data. A fit that follows at once (a loop of
    short fits, an OOM retry) goes on in the same file, without re-tracing its row writer."""

    def __init__(self, log_dir: str, on_disk: bool = True):
        """`on_disk=False`: records are kept in memory only until `keep_on_disk` (a worker
        that is not the chief writes nothing unless it crashes: see `multi_worker`)."""
        self._log_dir = log_dir
        self._on_disk = on_disk
        self._info: tuple[int, RunInfo] | None = None  # the latest run info, for keep_on_disk
        self._settings: tuple[int, RunSettings] | None = None  # the latest run settings, alike
        self._writer: HealthWriter | _NoWriter | None = None
        self._lock = threading.Lock()
        self._closing: threading.Timer | None = None
        self.memory = SignalMemory(log_dir)
        self.pending: list[Event] = []
        self._last_event_step = -1
        self._events_lock = threading.Lock()  # event records come from the watchdog's thread too
        # Also written as plain scalars for TensorBoard's Scalars dashboard (`plain_scalars`).
        self._plain_step: dict[str, str] = dict(tags.SCALARS_STEP_TAGS)
        self._plain_epoch = True

    def plain_scalars(self, step_tags: dict[str, str], epoch: bool) -> None:
        """Which values also go to TensorBoard's Scalars dashboard from now on: {our per-step
        tag: plain tag}, and whether the epoch logs do (not what Keras' TensorBoard callback
        already writes into the same run)."""
        self._plain_step, self._plain_epoch = dict(step_tags), epoch

    def open(self) -> HealthWriter:
        """The event file's writer: the one still open if the previous fit ended just now
        (its pending close is called off), else a new one."""
        with self._lock:
            if self._closing is not None:
                self._closing.cancel()
                self._closing = None
            if self._writer is None:
                self._writer = HealthWriter(self._log_dir) if self._on_disk else _NoWriter()
            return self._writer

    def keep_on_disk(self) -> None:
        """From now on, write to the log dir (with the latest run info first)."""
        with self._lock:
            if self._on_disk:
                return
            self._on_disk, self._writer = True, None
        if self._info is not None:
            self.open().write_json(tags.TAG_RUN_INFO, self._info[0], self._info[1].to_json())
        if self._settings is not None:
            self.open().write_json(tags.TAG_RUN_SETTINGS, self._settings[0], self._settings[1].to_json())

    def run_info(self, step: int, info: RunInfo) -> None:
        self.open().write_json(tags.TAG_RUN_INFO, step, info.to_json())
        self.memory.set_info(info)
        self._info = (step, info)

    def run_settings(self, step: int, settings: RunSettings) -> None:
        """Once per fit, at its first step: what a comparison with another run reads (the online
        rules do not judge settings; `HealthCallback(baseline=...)` compares with them)."""
        self.open().write_json(tags.TAG_RUN_SETTINGS, step, settings.to_json())
        self._settings = (step, settings)
        self.memory.settings = settings

    def rows(
        self,
        rows: Rows,
        dense: dict[str, np.ndarray],
        sparse: dict[str, np.ndarray],
        sparse_layer_vectors: dict[str, tuple[np.ndarray, np.ndarray]],
    ) -> None:
        """A window of the step probe's rows: `dense` tags on every row, `sparse` ones where
        finite; per-layer gradient norms on every row, weight norms on the sampled rows, and
        `sparse_layer_vectors` {tag: (per-layer values [rows, layers], the rows that have one)}
        (update ratios, non-finite counts): all of a step in its one event."""
        steps, weight_rows = rows.steps, rows.weight_rows
        plain = {tag: self._plain_step[tag] for tag in (*dense, *sparse) if tag in self._plain_step}
        layer_vectors = {
            tags.TAG_LAYER_GRAD_NORM: (rows.layer_grad_norm, None),
            tags.TAG_LAYER_WEIGHT_NORM: (rows.layer_weight_norm, weight_rows),
            **sparse_layer_vectors,
        }
        self.open().write_rows(steps, dense, sparse, layer_vectors, plain)
        for tag, values in {**dense, **sparse}.items():
            keep = np.isfinite(values) if tag in sparse else slice(None)
            self.memory.add_series(sig.OUR_SCALARS[tag], steps[keep], values[keep])
        self.memory.add_layer_series(sig.LAYER_GRAD_NORM, steps, rows.layer_grad_norm)
        self.memory.add_layer_series(sig.LAYER_WEIGHT_NORM, steps[weight_rows], rows.layer_weight_norm[weight_rows])
        for tag, (values, present) in sparse_layer_vectors.items():
            if present.any():
                self.memory.add_layer_series(sig.OUR_LAYER_TENSORS[tag], steps[present], values[present])

    def epoch(self, step: int, epoch: int, logs: dict[str, float]) -> None:
        """Keras' epoch logs (loss, metrics, validation) as `health/epoch/<key>`, and as
        `epoch/<key>` for TensorBoard's Scalars dashboard."""
        values = {tags.epoch_tag(key): value for key, value in logs.items()}
        self.open().write_scalars(step, {**values, tags.epoch_tag("epoch"): float(epoch + 1)})
        if self._plain_epoch:
            plain = {tags.SCALARS_EPOCH_PREFIX + key: value for key, value in logs.items()}
            self.open().write_scalars(step, plain, plain=True)
        for tag, value in values.items():
            if tag in sig.OUR_SCALARS:
                self.memory.add_series(sig.OUR_SCALARS[tag], [step], [value])

    def machine_load(self, step: int, other_cpu_share: float) -> None:
        """How busy other processes kept the machine over the epoch that ended at `step`."""
        self.open().write_scalars(step, {tags.TAG_OTHER_CPU_SHARE: other_cpu_share})
        self.memory.add_series(sig.OTHER_CPU_SHARE, [step], [other_cpu_share])

    def event(self, event: Event) -> None:
        """An event for the log (at the next `write_events`) and, as a reader will see it, for the
        engine; from any thread (a part the watchdog's thread turns off)."""
        with self._events_lock:  # (not lost between writing `pending` and emptying it)
            self.pending.append(event)
        self._add_to_memory(event)

    def _add_to_memory(self, event: Event) -> None:
        try:
            self.memory.add_event(parse_event(json.loads(json.dumps(finite_json(event.to_json())))))
        except payload.Invalid:  # a reader would drop it too
            logger.debug("tb-trainhealth: event %r does not read back", event)

    def write_events(self, step: int) -> None:
        """The pending events as one record, flushed. One record per step, steps strictly
        increasing: TensorBoard's Rust loader keeps only the last record of a repeated step
        (each event carries its own true step)."""
        if not self.pending:
            return
        with self._events_lock:
            self._write_record(step, self.pending)
            self.pending = []

    def write_now(self, event: Event) -> None:
        """One event written and flushed at once, from any thread (the stall watchdog's: the
        training thread that would write `pending` is the one that hangs). Records kept in
        memory only go to disk from here on: a worker other than the chief that hangs says
        where, in its own run."""
        self.keep_on_disk()
        self._add_to_memory(event)
        with self._events_lock:
            self._write_record(event.step, [event])

    def _write_record(self, step: int, events: list[Event]) -> None:
        step = max(step, self._last_event_step + 1)
        self.open().write_json(tags.TAG_EVENTS, step, [event.to_json() for event in events])
        self._last_event_step = step

    def alive(self, step: int, seconds_since_step: float) -> None:
        """The watchdog's heartbeat: the file's newest write says the process is alive."""
        self.open().write_alive(step, seconds_since_step)

    def seconds_since_write(self) -> float:
        """perf_counter() seconds since the event file was last written to (inf when closed)."""
        writer = self._writer
        return math.inf if writer is None else time.perf_counter() - writer.last_write

    def signals(self) -> RunSignals:
        return self.memory.signals()

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close_when_idle(self) -> None:
        """Flush now; close the event file unless another fit starts within CLOSE_IDLE_SECONDS."""
        self.flush()
        with self._lock:
            if self._writer is None or self._closing is not None:
                return
            self._closing = threading.Timer(CLOSE_IDLE_SECONDS, self._close_if_idle)
            self._closing.daemon = True
            self._closing.start()

    def _close_if_idle(self) -> None:
        with self._lock:
            if self._closing is None or self._closing is not threading.current_thread():
                return  # a new fit took the writer meanwhile
            writer, self._writer, self._closing = self._writer, None, None
        if writer is not None:
            try:
                writer.close()
            except Exception:  # (flushed already; on a background thread: nothing to break)
                logger.warning("tb-trainhealth: could not close the event file in %s", self._log_dir, exc_info=True)


class _NoWriter:
    """The writer of records kept in memory only: every write is dropped."""

    def __init__(self) -> None:
        self.last_write = time.perf_counter()

    def __getattr__(self, name: str) -> Any:
        return _drop


def _drop(*args: Any, **kwargs: Any) -> None:
    return None
