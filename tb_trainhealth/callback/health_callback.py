"""HealthCallback: records training health into TensorBoard event files and diagnoses it live."""

from __future__ import annotations

import atexit
import functools
import logging
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tb_trainhealth import engine, schema
from tb_trainhealth import signals as sig
from tb_trainhealth.callback.activation_probe import ActivationProbe
from tb_trainhealth.callback.data_lint import BatchLint
from tb_trainhealth.callback.health_writer import HealthWriter
from tb_trainhealth.callback.input_probe import InputProbe
from tb_trainhealth.callback.model_lint import lint_layers, lint_model
from tb_trainhealth.callback.pipeline_lint import describe_input, lint_dataset, training_data_adapter, user_dataset
from tb_trainhealth.callback.step_probe import (
    COL_GRAD_NONFINITE,
    COL_GRAD_NORM,
    COL_LOSS,
    COL_LOSS_SCALE,
    COL_LR,
    COL_NONFINITE_REPLICAS,
    Rows,
    StepProbe,
)
from tb_trainhealth.callback.time_budget import TimeBudget
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.memory import device_memory_mb, host_rss_mb
from tb_trainhealth.reader import OUR_SCALARS as SERIES_OF_TAG
from tb_trainhealth.recorder import SignalRecorder
from tb_trainhealth.rules import ALL_RULES
from tb_trainhealth.rules.undertrained import check_undertrained
from tb_trainhealth.signals import Layer

logger = logging.getLogger(__name__)

# Rows are read back once per READ_SECONDS, or sooner when MAX_UNREAD steps wait (the ring
# buffer holds twice as many): one device->host copy and one background write per window, so
# a read-back (~1 ms) costs ~0.1% of the time however short the steps, and a live reader
# lags by about a second.
READ_SECONDS = 1.0
MAX_UNREAD = 128
# Mid-run diagnoses take at most this share of the wall time: on a long run's capped series
# the rules take ~13 ms, which every 200 steps of 1 ms would make 6%.
DIAGNOSIS_TIME_SHARE = 0.005
# Host (and device) memory is read every this many steps (a /proc read): a leak shows as a
# steady climb, which needs points, and reads are independent of the read-back windows.
MEMORY_EVERY = 32
# Crash messages (TensorFlow's can carry whole graphs) are cut to this length.
MAX_MESSAGE_CHARS = 4000


def _guarded(probe: str):
    """Run a hook; on an internal error, report once, disable that probe, keep training."""

    def decorate(method):
        @functools.wraps(method)
        def wrapper(self: HealthCallback, *args, **kwargs):
            if probe in self._disabled:
                return None
            try:
                return method(self, *args, **kwargs)
            except Exception as err:
                self._disable(probe, err)
                return None

        return wrapper

    return decorate


class HealthCallback(keras.callbacks.Callback):
    """Records health signals of the real training step and diagnoses them as training runs.

    Per step: batch loss, learning rate, global and per-layer gradient norms (from the
    gradients the optimizer applies, reduced inside the compiled step), per-layer weight
    norms, NaN/Inf counts in loss/gradients/weights, and wall time. Per epoch: every
    value in Keras' logs (loss, metrics, validation). Diagnoses run every
    `diagnose_every` steps and at epoch ends with the same rules as `tb-trainhealth
    diagnose`; each new warning or critical finding prints one line.

    Example:

    ```python
    from tb_trainhealth import HealthCallback

    model.fit(x, y, epochs=10, callbacks=[HealthCallback(log_dir="logs/run1")])
    # then: tensorboard --logdir logs   (Health tab)   or   tb-trainhealth diagnose logs
    ```

    Args:
        log_dir: run directory for the event files (any `tf.io.gfile` path, e.g. gs://).
            Use the same `log_dir` as `keras.callbacks.TensorBoard`: it writes to
            `log_dir/train` and `log_dir/validation`, this callback to `log_dir` itself.
        diagnose_every: run the rule engine at most every this many steps, and within 0.5% of
            the training time (at once on a NaN/Inf; always when training ends).
        stop_on: "warning" or "critical" to stop training (after recording the diagnosis)
            when a finding of that severity or worse appears; None never stops.
        on_finding: called with each new `Finding` (warning or worse), e.g. to page yourself.
        verbose: print one line per new warning/critical finding.
        measure_input: time each step's wait for its batch (see `input_probe`); False
            leaves Keras' in-graph batch fetch untouched.
    """

    def __init__(
        self,
        log_dir: str,
        *,
        diagnose_every: int = 200,
        stop_on: str | None = None,
        on_finding: Callable[[Finding], Any] | None = None,
        verbose: bool = True,
        measure_input: bool = True,
    ):
        super().__init__()
        if diagnose_every < 1:
            raise ValueError(f"diagnose_every must be >= 1, got {diagnose_every}")
        self.log_dir = str(log_dir)
        self.diagnose_every = diagnose_every
        self.stop_on = Severity.parse(stop_on) if stop_on is not None else None
        self.on_finding = on_finding
        self.verbose = verbose
        self.measure_input = measure_input
        self._disabled: set[str] = set()
        self._writer: HealthWriter | None = None
        self._recorder: SignalRecorder | None = None
        self._probe: StepProbe | None = None
        self._reported: set[tuple[str, str | None]] = set()
        self._nonfinite_seen: set[str] = set()
        self._pending_events: list[dict[str, Any]] = []
        self._last_event_step = -1
        self._step = 0
        self._last_diagnosed_step = 0
        self._diagnosis_budget = TimeBudget(DIAGNOSIS_TIME_SHARE)
        self._calls_since_read = 0
        self._last_read = 0.0  # perf_counter() of the last read-back
        self._no_rows_yet = True  # in this fit
        # Per host call since the last read-back: (step time ms, host MiB, device MiB); NaN: unknown.
        self._per_call: list[tuple[float, float, float]] = []
        self._steps_since_memory = MEMORY_EVERY
        self._last_begin: float | None = None
        self._compiling = True
        self._crashed = False
        self._epoch = 0
        self._steps_per_call = 1
        self._base_step = 0
        self._input = InputProbe(steps_per_execution=0)
        self._batch_lint: BatchLint | None = None
        self._activations: ActivationProbe | None = None
        self.findings: list[Finding] = []
        self.oom_handled_by_caller = False
        self._retrying = False

    # -- Keras hooks ----------------------------------------------------------------
    def on_train_begin(self, logs=None):
        self._start()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._last_begin = None  # the first interval of an epoch starts at its first batch

    def on_train_batch_begin(self, batch, logs=None):
        self._time_call()
        self._calls_since_read += 1
        if self._read_due():
            self._drain()
            self._maybe_diagnose()
            self._write_events()

    def on_epoch_end(self, epoch, logs=None):
        if self._last_begin is not None:
            # The last call's end is hidden behind validation: its memory, not its time, is known.
            self._per_call.append((math.nan, *self._read_memory(force=True)))
        self._last_begin = None
        if self._read_due():
            self._drain()
        else:  # short epochs end more often than rows are due: only the step count is read
            self._count_steps()
        self._record_epoch(epoch, logs or {})
        self._measure_activations(epoch)
        self._maybe_diagnose()
        self._write_events()

    def on_train_end(self, logs=None):
        self._measure_activations(self._epoch, final=True)
        self._finish()

    # -- set-up and tear-down -------------------------------------------------------
    @_guarded("writer")
    def _start(self) -> None:
        model = self.model
        self._steps_per_call = int(getattr(model, "steps_per_execution", 1) or 1)
        self._input = InputProbe(self._steps_per_call if self.measure_input else 0)
        self._batch_lint = BatchLint(model)
        self._input.inspect = self._inspect_batch
        self._activations = _quietly(lambda: ActivationProbe(model))
        # Steps continue across fits, even when a new optimizer (iterations back at 0) is compiled
        # in between, e.g. freeze / fit / unfreeze / compile / fit.
        iterations = int(tf.convert_to_tensor(model.optimizer.iterations).numpy())
        # After an OOM retry, the failed attempt may have advanced `iterations` without
        # completing a step (the counter does not wait for every update): go on from ours.
        self._base_step = self._step if self._retrying else max(iterations, self._step)
        self._retrying = False
        self._step = self._base_step
        self._install_probe()
        self._wrap_step_functions()
        layers = [Layer(n, p) for n, p in zip(self._layout_names(), self._layout_params())]
        adapter = _quietly(training_data_adapter)
        info = {
            "schema": schema.SCHEMA_VERSION,
            "model": model.name,
            "optimizer": type(model.optimizer).__name__,
            "loss": _describe(getattr(model, "loss", None)),
            "loss_scale": self._probe.uses_loss_scale if self._probe else False,
            "layers": [{"name": layer.name, "params": layer.num_params} for layer in layers],
            "steps_per_execution": self._steps_per_call,
            "input_wait_measured": self._input.enabled,
            "input": describe_input(adapter) if adapter is not None else None,
            "start_step": self._base_step,
        }
        if self._writer is None:
            self._writer = HealthWriter(self.log_dir)
        if self._recorder is None:
            self._recorder = SignalRecorder(self.log_dir, layers, info)
        self._recorder.set_layers(layers, info)
        self._writer.write_json(schema.TAG_RUN_INFO, self._base_step, info)
        self._lint()
        self._lint_pipeline(adapter)
        self._per_call, self._last_begin, self._compiling, self._crashed = [], None, True, False
        self._last_read, self._no_rows_yet = time.perf_counter(), True
        atexit.register(self._finish)

    @_guarded("lint")
    def _lint(self) -> None:
        """Once per fit: does the last layer fit the loss, are layer settings sane? Findings come
        at the first diagnosis."""
        for event in lint_model(self.model) + lint_layers(self.model):
            event["step"] = self._base_step
            if event not in self._pending_events:
                self._record_event(event)

    @_guarded("pipeline lint")
    def _lint_pipeline(self, adapter: Any) -> None:
        """Once per fit: is the user's tf.data pipeline built in a known-slow or wrong way?"""
        dataset = user_dataset(adapter) if adapter is not None else None
        if dataset is None:
            return
        for event in lint_dataset(dataset):
            event["step"] = self._base_step
            if event not in self._pending_events:
                self._record_event(event)

    def _inspect_batch(self, batch: Any) -> None:
        """First batches of a fit, on the host before their step: labels vs loss, input scale."""
        try:
            for event in self._batch_lint.inspect(batch):
                self._record_event({**event, "step": self._base_step})
        except Exception as err:
            self._input.inspect = None
            self._disable("batch lint", err)
            return
        if self._batch_lint.done:
            self._input.inspect = None

    @_guarded("activations")
    def _measure_activations(self, epoch: int, final: bool = False) -> None:
        """Dead ReLU / saturated sigmoid-tanh shares on the first batches, at sampled epoch ends
        and when training ends (`final`: the state the last diagnosis judges)."""
        probe_x = self._batch_lint.first_inputs if self._batch_lint is not None else None
        probe = self._activations
        if probe is None or not probe.available or probe_x is None or not probe.due(self._step, final):
            return
        if not all(tf.is_tensor(t) for t in tf.nest.flatten(probe_x)):
            return  # per-replica values under a distribution strategy: no single batch to probe
        layers = probe.measure(probe_x, self._step)
        if layers:
            self._record_event({"kind": "activations", "step": self._step, "epoch": epoch, "layers": layers})

    @_guarded("batch lint")
    def _finish_batch_lint(self) -> None:
        if self._batch_lint is None or self._recorder is None:
            return
        for event in self._batch_lint.finish():
            self._record_event({**event, "step": self._base_step})

    @_guarded("crashes")
    def _wrap_step_functions(self) -> None:
        """Wrap the compiled train/test functions so an exception that ends training is
        recorded (and flushed) before it propagates unchanged. Keras has no exception hook."""
        for attribute, phase in (("train_function", "training"), ("test_function", "validation")):
            original = getattr(self.model, attribute, None)
            if original is None or getattr(original, "_trainhealth_crash_guard", False):
                continue

            def guarded(iterator, _original=original, _phase=phase):
                try:
                    if _phase == "training":
                        return self._input.call(_original, iterator)
                    return _original(iterator)
                except (StopIteration, tf.errors.OutOfRangeError):
                    raise  # the normal end of an epoch
                except Exception as err:
                    self.record_crash(err, phase=_phase)
                    raise

            guarded._trainhealth_crash_guard = True
            guarded.__wrapped__ = original
            setattr(self.model, attribute, guarded)

    def _unwrap_step_functions(self) -> None:
        for attribute in ("train_function", "test_function"):
            function = getattr(self.model, attribute, None)
            if getattr(function, "_trainhealth_crash_guard", False):
                setattr(self.model, attribute, function.__wrapped__)

    def record_crash(self, error: BaseException, phase: str = "training") -> None:
        """Record an exception that ends training (type, message, step), flushed at once."""
        if self._crashed:
            return
        if self._writer is None:  # crashed before training started (e.g. while adapting the data)
            self._writer = HealthWriter(self.log_dir)
            self._recorder = SignalRecorder(self.log_dir, [], {"schema": schema.SCHEMA_VERSION})
        if self.oom_handled_by_caller and isinstance(error, tf.errors.ResourceExhaustedError):
            self._finish()  # tb_trainhealth.fit records this one as an `oom` event and retries
            return
        self._crashed = True
        try:
            self._drain()
            event = {
                "kind": "crash",
                "step": self._step + 1,
                "epoch": self._epoch,
                "phase": phase,
                "error_type": type(error).__name__,
                "message": str(error)[:MAX_MESSAGE_CHARS],
            }
            self._record_event(event)
            self._finish()  # diagnose, write, flush, and give the model back its own step
        except Exception as err:  # recording must never mask the user's real exception
            self._disable("crashes", err)

    def record_oom(
        self, epoch: int, batch_size: int | None, next_batch_size: int | None, memory_mb: float | None
    ) -> None:
        """Record one out-of-memory error (used by tb_trainhealth.fit before it retries or gives up)."""
        if self._writer is None:
            return
        self._retrying = next_batch_size is not None
        event = {
            "kind": "oom",
            "step": self._step + 1,
            "epoch": epoch,
            "batch_size": batch_size,
            "next_batch_size": next_batch_size,
            "memory_mb": memory_mb,
        }
        self._record_event(event)
        self._diagnose()
        self._write_events()
        self._flush()

    @_guarded("gradients")
    def _install_probe(self) -> None:
        capacity = 2 * (MAX_UNREAD + self._steps_per_call)
        self._probe = StepProbe(self.model, capacity)
        self._probe.install()

    def _layout_names(self) -> list[str]:
        return self._probe.layout.names if self._probe else []

    def _layout_params(self) -> list[int]:
        return self._probe.layout.num_params if self._probe else []

    def _finish(self) -> None:
        atexit.unregister(self._finish)
        self._finish_batch_lint()
        self._drain()
        self._diagnose(final=True)
        self._write_events()
        self._uninstall_probe()
        if self.model is not None:
            self._unwrap_step_functions()
        self._flush()

    @_guarded("writer")
    def _flush(self) -> None:
        """Wait for the background writes and flush; a failed write (disk full) surfaces here."""
        if self._writer is not None:
            self._writer.flush()

    @_guarded("gradients")
    def _uninstall_probe(self) -> None:
        if self._probe is not None:
            self._probe.uninstall()
            self._probe = None

    def _disable(self, probe: str, err: Exception) -> None:
        self._disabled.add(probe)
        logger.warning("tb-trainhealth: %s probe disabled after an internal error: %r", probe, err, exc_info=True)
        print(f"tb-trainhealth: {probe} probe disabled after an internal error: {err!r}", file=sys.stderr)
        if probe == "gradients" and self._probe is not None:
            try:
                self._probe.uninstall()
            finally:
                self._probe = None
                self._wrap_step_functions()  # uninstalling rebuilt the train function

    # -- per step ---------------------------------------------------------------------
    def _time_call(self) -> None:
        now = time.perf_counter()
        if self._last_begin is not None:
            # The first call of a fit traces and compiles the step: not a step time.
            call_ms = math.nan if self._compiling else (now - self._last_begin) * 1000.0
            self._per_call.append((call_ms, *self._read_memory()))
            self._compiling = False
        self._last_begin = now

    def _read_due(self) -> bool:
        """Rows are due (see READ_SECONDS); or the first NaN was just replayed: its finding
        (and `stop_on`) must not wait; or none were read in this fit yet: the first rows trace
        the row writer (~0.3 s), best paid along with the first step's own tracing."""
        unread = self._calls_since_read * self._steps_per_call
        urgent = self._probe is not None and (self._no_rows_yet or bool(self._probe.nan_origins))
        return urgent or unread >= MAX_UNREAD or time.perf_counter() - self._last_read >= READ_SECONDS

    @_guarded("gradients")
    def _count_steps(self) -> None:
        """The current step, without reading the rows back (the next read-back writes them)."""
        if self._probe is not None:
            self._step = self._base_step + self._probe.rows_written()

    @_guarded("gradients")
    def _drain(self) -> None:
        self._last_read, self._calls_since_read = time.perf_counter(), 0
        if self._probe is None or self._writer is None:
            return
        rows = self._probe.read_new_rows(self._base_step)
        if self._probe.lost_rows and "lost rows" not in self._disabled:
            self._disabled.add("lost rows")  # say it once
            print(
                f"tb-trainhealth: {self._probe.lost_rows} steps overflowed the read-back buffer and were not recorded.",
                file=sys.stderr,
            )
        if rows is None:
            return
        self._no_rows_yet = False
        per_call = np.array(self._per_call, np.float64).reshape(-1, 3)
        self._per_call = []
        step_ms = self._per_step(per_call[:, 0], len(rows.steps), spread=self._steps_per_call)
        host_mb, device_mb = (
            self._per_step(per_call[:, i], len(rows.steps), spread=self._steps_per_call, split=False) for i in (1, 2)
        )
        wait_ms = self._per_step(self._input.take_waits(), len(rows.steps))
        self._step = int(rows.steps[-1])
        dense = {schema.TAG_GRAD_NORM: rows.column(COL_GRAD_NORM)}
        if self._probe.loss_captured:
            dense[schema.TAG_LOSS] = rows.column(COL_LOSS)
        lr = rows.column(COL_LR).copy()
        lr[1:][lr[1:] == lr[:-1]] = np.nan  # only where it changes (and once per window)
        counts = self._nonfinite_counts(rows)
        loss_scale = rows.column(COL_LOSS_SCALE).copy() if self._probe.uses_loss_scale else np.full(len(lr), np.nan)
        loss_scale[1:][loss_scale[1:] == loss_scale[:-1]] = np.nan  # where it changes (and once per window)
        sparse = {
            schema.TAG_LEARNING_RATE: lr,
            schema.TAG_NONFINITE_COUNT: np.where(counts > 0, counts, np.nan),
            schema.TAG_LOSS_SCALE: loss_scale,
            schema.TAG_STEP_TIME_MS: step_ms,
            schema.TAG_INPUT_WAIT_MS: wait_ms,
            schema.TAG_HOST_MEMORY_MB: host_mb,
            schema.TAG_DEVICE_MEMORY_MB: device_mb,
        }
        weight_rows = rows.weight_rows
        self._writer.write_rows(rows.steps, dense, sparse, rows.layer_grad_norm, rows.layer_weight_norm, weight_rows)
        for tag, values in {**dense, **sparse}.items():
            keep = np.isfinite(values) if tag in sparse else slice(None)
            self._recorder.add_series(SERIES_OF_TAG[tag], rows.steps[keep], values[keep])
        self._recorder.add_layer_series(sig.LAYER_GRAD_NORM, rows.steps, rows.layer_grad_norm)
        self._recorder.add_layer_series(
            sig.LAYER_WEIGHT_NORM, rows.steps[weight_rows], rows.layer_weight_norm[weight_rows]
        )
        self._find_nonfinite(rows)
        self._record_update_ratios(rows)
        for origin in self._probe.nan_origins:  # replayed inside the failing step
            self._record_event({"kind": "nan_origin", "step": self._base_step + origin.pop("row") + 1, **origin})
        self._probe.nan_origins.clear()

    def _record_update_ratios(self, rows: Rows) -> None:
        """||dw|| / ||w|| per layer on the sampled rows (update norms are NaN on the others)."""
        sampled = np.flatnonzero(np.isfinite(rows.layer_update_norm).any(axis=1))
        if sampled.size == 0:
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = rows.layer_update_norm[sampled] / rows.layer_weight_norm[sampled]
        for index, ratio in zip(sampled, ratios):
            self._writer.write_vector(schema.TAG_LAYER_UPDATE_RATIO, int(rows.steps[index]), ratio)
        self._recorder.add_layer_series(sig.LAYER_UPDATE_RATIO, rows.steps[sampled], ratios)

    def _read_memory(self, force: bool = False) -> tuple[float, float]:
        """(host RSS, device memory) in MiB after the call that just ended, every MEMORY_EVERY
        steps (or when `force`d: an epoch's end); NaN where not read or unknown."""
        self._steps_since_memory += self._steps_per_call
        if "memory" in self._disabled or not (force or self._steps_since_memory >= MEMORY_EVERY):
            return math.nan, math.nan
        self._steps_since_memory = 0
        try:
            host, device = host_rss_mb(), device_memory_mb()
        except Exception as err:
            self._disable("memory", err)
            return math.nan, math.nan
        return (math.nan if host is None else host), (math.nan if device is None else device)

    def _nonfinite_counts(self, rows: Rows) -> np.ndarray:
        """Non-finite gradient elements, plus one for a non-finite loss and per layer with non-finite weights."""
        counts = rows.column(COL_GRAD_NONFINITE) + (~np.isfinite(rows.layer_weight_norm)).sum(axis=1)
        if self._probe.loss_captured:
            counts = counts + ~np.isfinite(rows.column(COL_LOSS))
        return counts

    @staticmethod
    def _per_step(per_call: Any, num_rows: int, spread: int = 1, split: bool = True) -> np.ndarray:
        """Per-call values (one per host call of `spread` steps) aligned to the newest rows;
        NaN where unknown. `split`: a call's value (a time) is split evenly over its steps;
        otherwise (a reading) it goes to the call's last step."""
        values = np.asarray(per_call, np.float64)
        if split:
            per_step = np.repeat(values / spread, spread)
        else:
            per_step = np.full(len(values) * spread, np.nan)
            per_step[spread - 1 :: spread] = values
        out = np.full(num_rows, np.nan)
        # The first rows of a fit were traced and compiled: their time is not a step time.
        count = min(num_rows, len(per_step))
        out[num_rows - count :] = per_step[len(per_step) - count :]
        return out

    def _find_nonfinite(self, rows: Rows) -> None:
        names = self._probe.layout.names
        nonfinite_layers = (rows.layer_grad_nonfinite > 0) | ~np.isfinite(rows.layer_grad_norm)
        hits = {
            "loss": ~np.isfinite(rows.column(COL_LOSS)) if self._probe.loss_captured else None,
            "gradients": ~np.isfinite(rows.column(COL_GRAD_NORM)) | nonfinite_layers.any(axis=1),
            "weights": ~np.isfinite(rows.layer_weight_norm).all(axis=1),
        }
        hit_rows = np.flatnonzero(rows.column(COL_GRAD_NONFINITE) > 0)
        for index in hit_rows:
            self._writer.write_vector(
                schema.TAG_LAYER_GRAD_NONFINITE, int(rows.steps[index]), rows.layer_grad_nonfinite[index]
            )
        if hit_rows.size:
            self._recorder.add_layer_series(
                sig.LAYER_GRAD_NONFINITE, rows.steps[hit_rows], rows.layer_grad_nonfinite[hit_rows]
            )
        for where, bad in hits.items():
            if bad is None or not bad.any() or where in self._nonfinite_seen:
                continue
            self._nonfinite_seen.add(where)
            index = int(np.argmax(bad))
            if where == "weights":
                layers = [names[i] for i in np.flatnonzero(~np.isfinite(rows.layer_weight_norm[index]))]
            else:
                layers = [names[i] for i in np.flatnonzero(nonfinite_layers[index])]
            event = {
                "kind": "nonfinite",
                "where": where,
                "step": int(rows.steps[index]),
                "layers": layers,
                "count": float(rows.layer_grad_nonfinite[index].sum()) if where == "gradients" else None,
            }
            mask = int(rows.column(COL_NONFINITE_REPLICAS)[index])
            if where == "gradients" and mask:
                event["replicas"] = [r for r in range(self._probe.replicas) if mask >> r & 1]
            self._record_event(event)

    # -- per epoch ----------------------------------------------------------------------
    @_guarded("epoch")
    def _record_epoch(self, epoch: int, logs: dict[str, Any]) -> None:
        values = {key: float(v) for key, v in logs.items() if _is_number(v)}
        if not values or self._writer is None:
            return
        step = self._step
        epoch_values = {schema.epoch_tag(key): v for key, v in values.items()}
        self._writer.write_scalars(step, {**epoch_values, schema.epoch_tag("epoch"): float(epoch + 1)})
        for key, value in values.items():
            name = SERIES_OF_TAG.get(schema.epoch_tag(key))
            if name is not None:
                self._recorder.add_series(name, np.array([step]), np.array([value]))

    # -- online diagnosis ---------------------------------------------------------------
    def _record_event(self, event: dict[str, Any]) -> None:
        """An event goes to the log (next write) and to the online engine's copy alike."""
        self._pending_events.append(event)
        self._recorder.add_event(event)

    def _maybe_diagnose(self) -> None:
        """At most every diagnose_every steps and within DIAGNOSIS_TIME_SHARE of the time (epochs
        can be a handful of steps: the rules must not show in the step time), and at once when
        a NaN/Inf or a lint finding was just recorded."""
        urgent = any(e["kind"] in ("nonfinite", "lint") for e in self._pending_events)
        due = self._step - self._last_diagnosed_step >= self.diagnose_every and self._diagnosis_budget.allows()
        if urgent or due:
            with self._diagnosis_budget.spend():
                self._diagnose()

    @_guarded("diagnosis")
    def _diagnose(self, final: bool = False) -> None:
        if self._recorder is None:
            return
        self._last_diagnosed_step = self._step
        # Mid-run, a run that is still improving is just training: `undertrained` judges only
        # the end (stop_on="warning" must not stop a healthy run for making progress).
        rules = ALL_RULES if final else tuple(r for r in ALL_RULES if r is not check_undertrained)
        self.findings = engine.diagnose(self._recorder.signals(), rules)
        for finding in self.findings:
            if finding.severity < Severity.WARNING or finding.key in self._reported:
                continue
            self._reported.add(finding.key)
            self._pending_events.append({"kind": "finding", "step": self._step, "finding": finding.to_dict()})
            if self.verbose:
                at = f" at step {finding.step}" if finding.step is not None else ""
                print(
                    f"\ntb-trainhealth [{finding.severity.label}] {finding.code}{at}: {finding.title}  ({self.log_dir})"
                )
            self._notify(finding)
            if self.stop_on is not None and finding.severity >= self.stop_on:
                self.model.stop_training = True
                if self.verbose:
                    print(f"tb-trainhealth: stopping training (stop_on={self.stop_on.label!r}).")

    def _notify(self, finding: Finding) -> None:
        if self.on_finding is None:
            return
        try:
            self.on_finding(finding)
        except Exception as err:  # the user's hook must not end their training either
            print(f"tb-trainhealth: on_finding raised {err!r}; continuing.", file=sys.stderr)

    @_guarded("writer")
    def _write_events(self) -> None:
        if not self._pending_events or self._writer is None:
            return
        # One record per step, steps strictly increasing: TensorBoard's Rust loader keeps
        # only the last record of a repeated step. Each event carries its own true step.
        step = max(self._step, self._last_event_step + 1)
        self._writer.write_json(schema.TAG_EVENTS, step, self._pending_events)
        self._last_event_step = step
        self._pending_events = []


def _quietly(function: Callable[[], Any]) -> Any:
    """Best-effort context for the log: None rather than an error."""
    try:
        return function()
    except Exception:
        logger.debug("tb-trainhealth: %s failed", function.__name__, exc_info=True)
        return None


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return np.ndim(value) == 0


def _describe(loss: Any) -> str | None:
    if loss is None:
        return None
    if isinstance(loss, str):
        return loss
    return getattr(loss, "name", None) or type(loss).__name__
