"""HealthCallback: records training health into TensorBoard event files and diagnoses it live.

A thin shell over two objects: a `FitSession` per fit (made in `on_train_begin`, dropped when the
fit is over: the probes and their state) and the `RunRecord` that outlives fits (the event file,
the step count, the stall watchdog, the diagnoses). The callback answers Keras' hooks (either
Keras' protocol), routes them to those two, and keeps the public API: its arguments, `findings`,
`record_crash` and `record_oom` (for `tb_trainhealth.fit`).
"""

from __future__ import annotations

import atexit
import sys
import time
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from tb_trainhealth.callback import read_side
from tb_trainhealth.callback.fit_session import FitSession
from tb_trainhealth.callback.frameworks.which_keras import TfKerasCallbackProtocol
from tb_trainhealth.callback.live_diagnosis import LiveDiagnosis
from tb_trainhealth.callback.probe_guard import ProbeGuard
from tb_trainhealth.callback.record import bucket_mirror
from tb_trainhealth.callback.run_record import RunRecord
from tb_trainhealth.callback.trials.at_fit_end import TrialSetup, codes_to_try, try_changes
from tb_trainhealth.callback.watch import crash_guard
from tb_trainhealth.contract.events import BatchSizeEvent, OomEvent, TrialsEvent
from tb_trainhealth.contract.vocab import Part
from tb_trainhealth.findings import Finding, Severity


class HealthCallback(TfKerasCallbackProtocol, keras.callbacks.Callback):
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

    Works with Keras 3 and with legacy Keras 2 (`tf_keras`, `TF_USE_LEGACY_KERAS=1`): which one
    is read from the model's class (`which_keras`), and this object answers either Keras'
    callback protocol. Under tf_keras' MultiWorkerMirroredStrategy only the chief writes the run
    (`multi_worker`).

    Args:
        log_dir: run directory for the event files: a local path, or a bucket (s3://, gs://:
            uploaded through fsspec, see docs/object-storage.md; a scheme nothing here can
            write raises ValueError with the package to install).
            Use the same `log_dir` as `keras.callbacks.TensorBoard`: it writes to
            `log_dir/train` and `log_dir/validation`, this callback to `log_dir` itself.
        diagnose_every: run the rule engine at most every this many steps, and within 0.5% of
            the training time (at once on a NaN/Inf; always when training ends).
        stop_on: "warning" or "critical" to stop training (after recording the diagnosis)
            when a finding of that severity or worse appears; None never stops. Findings
            about speed only (`input_bound`, `input_pipeline_config`) never stop a run.
        on_finding: called with each new `Finding` (warning or worse; again if it gets
            worse), e.g. to page yourself.
        verbose: print one line per new warning/critical finding.
        measure_input: time each step's wait for its batch (see `input_probe`); False
            leaves Keras' in-graph batch fetch untouched.
        preflight: at train start, run `tb_trainhealth.preflight` on the fit's first batches
            (a clone of the model; seconds) and record its findings before the first step.
        stall_after: seconds without a finished training step before the run counts as
            stalled (a hang: recorded at once with where each thread is, see
            `stall_watchdog`). None: the larger of 5 minutes and 20x the median step time;
            the fit's first step and each evaluation's first batch get 10 times as long.
        baseline: the log_dir of a known-good run. At the end of each fit this run is compared
            with it (as `tb-trainhealth compare` does: changed settings, noise-aware verdict,
            likely culprit); where it is worse, that is a `worse_than_baseline` finding like any
            other (printed, `on_finding`, `stop_on`, the Health tab and `diagnose` see it).
            During the fit, each epoch end compares the run so far with the baseline at the same
            step, and says "behind baseline ... since step N" as soon as it is clearly behind
            (the baseline is read once per fit, at its first epoch end: ~0.3 s, which the end of
            the fit no longer spends; each check then takes ~0.4 ms, an epoch end 4.1 ms against
            3.5 ms without a baseline: `python bench/baseline_per_epoch.py`, 2 shared CPU cores).
            The end-of-fit verdict is the final word: a run that caught up is not worse.
        trials: where a fit ends judged failing (a warning or critical of the learning kind:
            worse than a constant, a plateau, NaN, divergence, dead units...), try the candidate
            changes on a clone of the model from the fit's starting weights, on a sample of its own
            data, before telling them: the run's plan puts what helped first and never advises what
            made things worse (`callback/trials/`; at most 10% of the fit's time or 10 s, whichever is
            larger, never over 60 s; never on a healthy run). A number: the trials' time in seconds
            instead. False: the plan rests on the rules alone.
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
        preflight: bool = False,
        stall_after: float | None = None,
        baseline: str | None = None,
        trials: bool | float = True,
    ):
        super().__init__()
        if diagnose_every < 1:
            raise ValueError(f"diagnose_every must be >= 1, got {diagnose_every}")
        self.log_dir = str(log_dir)
        problem = bucket_mirror.writable_problem(self.log_dir)
        if problem:  # said now, not as a failed write inside fit
            raise ValueError(problem)
        self.measure_input = measure_input
        self.preflight = preflight
        self.baseline = None if baseline is None else str(baseline)
        self.trials = trials
        self.guard = ProbeGuard(on_disable=self._on_disable, on_off=self._record_part_off)
        self.live = LiveDiagnosis(
            self.log_dir, diagnose_every, Severity.parse(stop_on) if stop_on else None, on_finding, verbose
        )
        self.oom_handled_by_caller = False  # set by tb_trainhealth.fit, which records OOMs itself
        self._run = RunRecord(self.log_dir, self.guard, self.live, stall_after)
        self._watch = self._run.watch  # (one per callback: it watches every fit)
        self._fit: FitSession | None = None  # the fit under way
        self._crashed = False

    @property
    def findings(self) -> list[Finding]:
        """The latest diagnosis of this run (all severities), worst first."""
        return self.live.findings

    # The settings live with the live diagnosis; they stay settable on the callback.
    diagnose_every = property(
        lambda self: self.live.diagnose_every, lambda self, v: setattr(self.live, "diagnose_every", v)
    )
    stop_on = property(lambda self: self.live.stop_on, lambda self, v: setattr(self.live, "stop_on", v))
    on_finding = property(lambda self: self.live.on_finding, lambda self, v: setattr(self.live, "on_finding", v))
    verbose = property(lambda self: self.live.verbose, lambda self, v: setattr(self.live, "verbose", v))

    # -- Keras hooks ----------------------------------------------------------------
    def on_train_begin(self, logs=None):
        self._crashed = False
        self._fit = FitSession(
            self.model,
            self.params or {},
            self._run,
            self.guard,
            owner=self,
            measure_input=self.measure_input,
            preflight=self.preflight,
            on_crash=self.record_crash,
            baseline=self.baseline,
            trials=self.trials is not False,
        )
        if self.guard.run(Part.WRITER, self._fit.start):
            atexit.register(self._finish)

    def on_epoch_begin(self, epoch, logs=None):
        if self._fit is not None:
            self._fit.epoch_begin(epoch)

    def on_train_batch_begin(self, batch, logs=None):
        fit = self._fit
        if fit is not None:
            fit.batch_begin(batch)

    def on_test_begin(self, logs=None):
        if self._fit is not None:
            self._fit.count_steps()  # (a stall in validation is at the epoch's last step)
        self._watch.at_step(self._run.step)
        self._watch.test_begin()

    def on_test_batch_begin(self, batch, logs=None):
        watch = self._watch
        watch.test_batch, watch.last = batch, time.perf_counter()

    def on_test_end(self, logs=None):
        self._watch.test_end()

    def on_epoch_end(self, epoch, logs=None):
        if self._fit is not None:
            self._fit.epoch_end(epoch, logs or {})

    def on_train_end(self, logs=None):
        if self._fit is not None:
            self._fit.end()
        self._finish(ended=True)

    # -- the end of a fit, however it ends ------------------------------------------------
    def record_crash(self, error: BaseException, phase: str = "training") -> None:
        """Record an exception that ends training (type, message, step), flushed at once."""
        if self._crashed:
            return
        recording = self._run.opened(self.model)  # (it may crash before training started: adapting the data)
        if self.oom_handled_by_caller and isinstance(error, tf.errors.ResourceExhaustedError):
            self._finish()  # tb_trainhealth.fit records this one as an `oom` event and retries
            return
        self._crashed = True
        try:
            recording.keep_on_disk()  # (a worker other than the chief records its own crash)
            if self._fit is not None:
                self._fit.read_back_rows()
            recording.event(crash_guard.crash_event(error, self._run.step + 1, self._run.epoch, phase))
            self._finish()  # diagnose, write, flush, and give the model back its own step
        except Exception as err:  # recording must never mask the user's real exception
            self.guard.disable(Part.CRASHES, err)

    def record_oom(
        self, epoch: int, batch_size: int | None, next_batch_size: int | None, memory_mb: float | None
    ) -> None:
        """Record one out-of-memory error (used by tb_trainhealth.fit before it retries or gives up)."""
        run = self._run
        if run.recording is None:
            return
        run.retrying = next_batch_size is not None
        run.recording.event(OomEvent(run.step + 1, batch_size, next_batch_size, memory_mb, epoch))
        run.diagnose(self.model, final=False)
        run.close_when_idle()

    def record_batch_size(
        self, epoch: int, batch_size: int, previous: int, peak_mb: float | None, limit_mb: float | None
    ) -> None:
        """Record the batch size growing back after an OOM (tb_trainhealth.fit, before the next fit)."""
        run = self._run
        if run.recording is None:
            return
        run.retrying = True
        run.recording.event(BatchSizeEvent(run.step + 1, batch_size, previous, epoch, peak_mb, limit_mb))
        run.close_when_idle()

    def _finish(self, ended: bool = False) -> None:
        """The fit is over: the session's last rows and tidy-up, the final diagnosis, the changes
        tried where a fit that `ended` (not crashed, not cut at exit) failed, the file flushed."""
        atexit.unregister(self._finish)
        self.guard.run(Part.WATCHDOG, self._watch.stop)  # (a stall under way ends here)
        setup, ruled_out = None, None
        if self._fit is not None:
            setup, ruled_out = self._fit.trial_setup, self._fit.trials_ruled_out
            try:
                self._fit.close()
            finally:
                self._fit = None
        self._run.diagnose(self.model, final=True)
        if ended and not self._crashed and (setup is not None or ruled_out is not None):
            self.guard.run(Part.TRIALS, self._try_changes, setup, ruled_out)
        self._run.close_when_idle()

    def _try_changes(self, setup: TrialSetup | None, ruled_out: str | None) -> None:
        recording, findings = self._run.recording, self.live.findings
        if recording is None:
            return
        if setup is None:
            codes = codes_to_try(findings)
            if codes and ruled_out:
                recording.event(TrialsEvent(step=self._run.step, findings=tuple(sorted(codes)), skipped=ruled_out))
                self._run.write_events()
            return
        seconds = None if isinstance(self.trials, bool) else float(self.trials)
        event = try_changes(self.model, setup, findings, self._run.step, recording, self.verbose, seconds)
        if event is None:
            return
        self._run.write_events()
        if self.verbose:
            lines = read_side.plan_in_words(recording.signals(), findings)
            if lines:
                print("\n".join(["tb-trainhealth: plan:", *lines]), file=sys.stderr)

    # -- a part that goes off (`ProbeGuard`) ----------------------------------------------
    def _on_disable(self, part: str) -> None:
        if part == Part.GRADIENTS and self._fit is not None:
            self._fit.drop_probe()  # a probe that failed is not kept for the next fit

    def _record_part_off(self, part: str, reason: str, error: bool) -> None:
        self._run.part_off(part, reason, error, self.model)
