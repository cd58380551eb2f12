"""`training_stalled` and `ended_abruptly`: runs that stop moving without an exception.

The watchdog (callback/watch/stall_watchdog.py) records what it saw: a `stall` event with the phase
and where each thread was, a `resumed` event when a step finished again. Which place to name
and what to fix there is decided here, so older logs get better advice as the rules improve.
`ended_abruptly` needs the time of the diagnosis (`RunSignals.now`) and of the run's newest
write (`RunSignals.last_write`): the engine in the callback has neither and never gives it.
Its evidence is a missing end record, so a run whose event file was cut short after the fact
(a truncated copy) is not called killed (report/run_report.py): the record may be in the part
that was cut off.
"""

from __future__ import annotations

import dataclasses
import os

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract import stall
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import (
    CrashEvent,
    FitEndEvent,
    Frame,
    OomEvent,
    PartOffEvent,
    ResumedEvent,
    StallEvent,
    StallPhase,
    ThreadPlace,
)
from tb_trainhealth.contract.vocab import Part
from tb_trainhealth.findings import Evidence, Fact, Finding, Fix, Severity
from tb_trainhealth.rules.fact_text import fact
from tb_trainhealth.signals import RunSignals

# A live run's newest write can look this old to a reader: rows are flushed every 10 s
# (health_writer.FLUSH_MILLIS), TensorBoard reloads every 5 s, network filesystems (gcsfuse)
# cache listings for up to a minute. Silence shorter than this never counts, whatever the
# allowance.
MIN_SILENCE_SECONDS = 60.0
# Host memory that rose by this share over the run's last quarter points at the kernel's OOM
# killer (the same share `memory_growth` calls a leak: rules/memory.py MIN_GROWTH_FRACTION).
MEMORY_RISE_FRACTION = 0.10

_INPUT_RUNNERS = ("generator", "py_function", "PyDataset")
# Where a thread waits: library files that read from the network (a read with no timeout).
_NETWORK_FILES = ("socket.py", "ssl.py", "client.py", "connection.py", "connectionpool.py", "request.py", "response.py")
_LOCK_FILES = ("threading.py", "queue.py", "synchronize.py", "connection.py")

TIMEOUT_FIX = Fix(
    "Give every read a timeout, so a dead server raises (and the pipeline can retry or skip) instead of waiting forever.",
    "requests.get(url, timeout=30)  # or urllib.request.urlopen(url, timeout=30), socket.settimeout(30)",
)
QUEUE_FIX = Fix(
    "The thread waits on a queue or lock that nothing releases: wait with a timeout and end on a sentinel "
    "when the producer stops.",
    "item = work.get(timeout=60)  # raises queue.Empty instead of hanging\nif item is None: return  # the producer's sentinel",
)
PY_FUNCTION_FIX = Fix(
    "Run the py_function map in parallel: one blocked call then stalls one element, not the whole pipeline "
    "(and a timeout inside the function bounds it).",
    "ds = ds.map(lambda x: tf.py_function(load, [x], tf.float32),\n"
    "            num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)",
)
GENERATOR_FIX = Fix(
    "A Python generator feeds one batch at a time on one thread: move the slow reads into a parallel map "
    "over file names, so one stuck read does not stop training.",
    "ds = tf.data.Dataset.from_tensor_slices(paths).map(\n"
    "    lambda p: tf.py_function(read_with_timeout, [p], tf.float32), num_parallel_calls=tf.data.AUTOTUNE)",
)
PYDATASET_FIX = Fix(
    "A PyDataset worker is stuck in __getitem__: put a timeout on its reads; with workers > 1 one stuck "
    "batch still blocks the epoch, so skip batches that fail.",
    "class Batches(keras.utils.PyDataset):\n    def __init__(self, **kw): super().__init__(workers=4, **kw)",
)
CALLBACK_FIX = Fix(
    "A callback does slow I/O on the training thread (uploading, saving, posting metrics): every step waits for "
    "it. Do it on a background thread.",
    "def on_epoch_end(self, epoch, logs=None):\n"
    "    threading.Thread(target=upload, args=(path,), daemon=True).start()  # not upload(path)",
)
PEER_FIX = Fix(
    "Multi-worker training: a worker that died leaves the others waiting in the all-reduce forever. Look at "
    "every worker's log, and give collectives a timeout so the survivors fail instead of hanging.",
    "options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=600)\n"
    "strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)",
)
STEP_FIX = Fix(
    "Inside the step: a tf.py_function / numpy_function in the model that blocks, or a device that stopped "
    "answering. Dump every thread's stack to see where it waits.",
    "import faulthandler, signal; faulthandler.register(signal.SIGUSR1)  # then: kill -USR1 <pid>",
)
MEMORY_GROWTH_FIX = Fix(
    "On GPUs, let TensorFlow grow its memory as needed instead of reserving it all (call before any op).",
    "for gpu in tf.config.list_physical_devices('GPU'): tf.config.experimental.set_memory_growth(gpu, True)",
)
EVALUATION_FIX = Fix(
    "The hang is in validation: check the validation data the same way (a generator without timeouts, "
    "an infinite dataset needs validation_steps).",
    "model.fit(train_ds, validation_data=val_ds, validation_steps=50)",
)


def allowance_of(run: RunSignals) -> float:
    """The run's stall allowance, as the watchdog computed it (contract.stall)."""
    times = run.get(sig.STEP_TIME_MS)
    median = stall.median_step_seconds(times.values.tolist()) if times is not None else None
    return stall.allowance(run.info.stall_after, median)


def _place(event: StallEvent) -> tuple[ThreadPlace | None, Frame | None]:
    """The thread to name and its innermost user frame: the input code's thread when the step
    waits for input (or is inside a py_function), else the training thread."""
    threads = [t for t in event.threads if t.frames]
    input_threads = [t for t in threads if t.runs in _INPUT_RUNNERS]
    training = [t for t in threads if t.runs == "training"]
    if event.phase in (StallPhase.INPUT, StallPhase.STEP, StallPhase.EVALUATION) and input_threads:
        chosen = input_threads[0]
    elif training:
        chosen = training[0]
    else:
        chosen = threads[0] if threads else None
    return chosen, (chosen.frames[0] if chosen is not None else None)


def _frame_text(frame: Frame) -> str:
    return f"{frame.function}() at {os.path.basename(frame.file)}:{frame.line}"


def _place_text(event: StallEvent) -> str:
    thread, frame = _place(event)
    phase = {
        StallPhase.INPUT: "waiting for its next batch",
        StallPhase.STEP: "inside the training step",
        StallPhase.CALLBACK: f"inside the callback {event.callback or '?'}",
        StallPhase.EVALUATION: "in validation",
    }[event.phase]
    if frame is None or thread is None:
        return phase
    runner = {"generator": "the dataset's generator", "py_function": "a py_function", "PyDataset": "a PyDataset"}
    where = f"{runner[thread.runs]} " if thread.runs in runner else ""
    waiting = thread.waiting_in
    waits = ""
    if waiting is not None and waiting != frame:
        waits = f", waiting in {waiting.function}() ({os.path.basename(waiting.file)})"
    return f"{phase}: {where}{_frame_text(frame)}{waits}"


def _fixes(event: StallEvent) -> tuple[Fix, ...]:
    thread, _ = _place(event)
    waiting = os.path.basename(thread.waiting_in.file) if thread and thread.waiting_in else ""
    fixes: list[Fix] = []
    if waiting in _NETWORK_FILES:
        fixes.append(TIMEOUT_FIX)
    elif waiting in _LOCK_FILES:
        fixes.append(QUEUE_FIX)
    runs = thread.runs if thread is not None else None
    if event.phase == StallPhase.CALLBACK:
        fixes.append(CALLBACK_FIX)
    elif runs == "generator":
        fixes += [TIMEOUT_FIX, GENERATOR_FIX]
    elif runs == "py_function":
        fixes += [TIMEOUT_FIX, PY_FUNCTION_FIX]
    elif runs == "PyDataset":
        fixes += [TIMEOUT_FIX, PYDATASET_FIX]
    elif event.phase == StallPhase.INPUT:
        fixes.append(TIMEOUT_FIX)
    else:
        fixes += [PEER_FIX, STEP_FIX]
    if event.phase == StallPhase.EVALUATION:
        fixes.append(EVALUATION_FIX)
    unique = list(dict.fromkeys(fixes))
    return tuple(unique)


def _pauses(run: RunSignals) -> list[tuple[StallEvent, ResumedEvent | None]]:
    """Each stall with the `resumed` event that ended it (None: never ended), in log order."""
    pauses: list[tuple[StallEvent, ResumedEvent | None]] = []
    open_stall: StallEvent | None = None
    for event in run.events:
        if isinstance(event, StallEvent):
            if open_stall is not None:
                pauses.append((open_stall, None))  # (a process that died while stalled, then a new one)
            open_stall = event
        elif isinstance(event, ResumedEvent) and open_stall is not None:
            pauses.append((open_stall, event))
            open_stall = None
    if open_stall is not None:
        pauses.append((open_stall, None))
    return pauses


def _allowance_text(event: StallEvent) -> str:
    return f"the allowance is {event.allowance:.0f} s" + (" (first step: tracing)" if event.first_step else "")


def _stall_facts(stalled: StallEvent, resumed: ResumedEvent | None) -> tuple[Fact, ...]:
    thread, frame = _place(stalled)
    lasted = f"{resumed.seconds:.0f} s" if resumed is not None else f"{stalled.seconds:.0f} s and counting"
    return (
        fact("no step finished for", lasted)
        + fact("allowance", f"{stalled.allowance:.0f} s" + (" (first step: tracing)" if stalled.first_step else ""))
        + fact("doing", stalled.phase)
        + fact("callback", stalled.callback)
        + fact("thread", thread.thread if thread is not None else None)
        + fact("where", _frame_text(frame) if frame is not None else None)
        + fact("ended by", None if resumed is None else ("the fit's end" if resumed.ended else f"step {resumed.step}"))
    )


def check_training_stalled(run: RunSignals) -> list[Finding]:
    pauses = _pauses(run)
    if not pauses:
        return []
    others = f" ({len(pauses) - 1} earlier pause(s) in this run.)" if len(pauses) > 1 else ""
    stalled, resumed = pauses[-1]
    # Still stalled: never resumed, and no step recorded past it (a process that died stalled
    # and a new one that trained on in the same run directory is a pause, not a hang).
    if resumed is None and _last_series_step(run) <= stalled.step:
        where = _place_text(stalled)
        return [
            Finding(
                code=Code.TRAINING_STALLED,
                severity=Severity.CRITICAL,
                step=stalled.step,
                title=f"Training stalled after step {stalled.step}: {where}",
                detail=(
                    f"No training step finished for {stalled.seconds:.0f} s ({_allowance_text(stalled)}) and none "
                    f"has since: {where}. The process is still waiting, or was killed while it waited.{others}"
                ),
                evidence=Evidence((), stalled.step, stalled.step, facts=_stall_facts(stalled, None)),
                fixes=_fixes(stalled),
            )
        ]
    # The longest pause (one that never resumed lasted at least until the watchdog saw it).
    stalled, resumed = max(pauses, key=lambda pause: pause[1].seconds if pause[1] else pause[0].seconds)
    seconds = resumed.seconds if resumed is not None else stalled.seconds
    where = _place_text(stalled)
    if resumed is None:
        ended = " The process ended during it; a later one trained on."
    elif resumed.ended:
        ended = " The fit ended during it."
    else:
        ended = " Then training went on."
    raise_it = Fix(
        "If such a pause is expected (a big checkpoint, a slow first epoch), raise the allowance.",
        f"HealthCallback(log_dir, stall_after={max(60, int(seconds * 2))})",
    )
    return [
        Finding(
            code=Code.TRAINING_STALLED,
            severity=Severity.WARNING,
            step=stalled.step,
            title=f"Training paused {seconds:.0f} s after step {stalled.step}: {where}",
            detail=(
                f"No training step finished for {seconds:.0f} s ({_allowance_text(stalled)}): {where}.{ended}"
                f"{others} A pause this long wastes the machine and often turns into a hang next time."
            ),
            evidence=Evidence(
                (),
                stalled.step,
                resumed.step if resumed is not None else stalled.step,
                facts=_stall_facts(stalled, resumed),
            ),
            fixes=(*_fixes(stalled), raise_it),
        )
    ]


def _last_series_step(run: RunSignals) -> int:
    return max((int(s.steps[-1]) for s in run.series.values() if len(s)), default=-1)


def _last_step(run: RunSignals) -> int:
    steps = [int(s.steps[-1]) for s in run.series.values() if len(s)]
    steps += [event.step for event in run.events if not event.measurement]
    return max(steps, default=run.info.start_step)


def _ended(run: RunSignals) -> bool:
    """The last fit has an end: a fit-end, crash or given-up OOM record after its start.
    A record at its very start step ends it only when no step of it was recorded (it could be
    the previous fit's end)."""
    start, last = run.info.start_step, _last_step(run)
    ends = [*run.events_of(FitEndEvent), *run.events_of(CrashEvent)]
    ends += [event for event in run.events_of(OomEvent) if event.next_batch_size is None]
    return any(event.step > start or (event.step == start and last <= start) for event in ends)


def _watchdog_went_off(run: RunSignals) -> bool:
    """The last fit's watchdog failed after the run info said it was armed: no heartbeats since."""
    return any(e.part == Part.WATCHDOG and e.step >= run.info.start_step for e in run.events_of(PartOffEvent))


def silence_limit(run: RunSignals) -> float | None:
    """Seconds of silence after which the run counts as ended abruptly; None: it never does
    (not written by a HealthCallback with the watchdog, or its last fit ended)."""
    if not run.has_health_data or not run.info.watchdog or _watchdog_went_off(run) or _ended(run):
        return None
    return max(allowance_of(run), MIN_SILENCE_SECONDS)


def judged_again_at(run: RunSignals) -> float | None:
    """Wall time at which the run's diagnosis changes without new data (it would end abruptly then)."""
    limit = silence_limit(run)
    if limit is None or run.last_write is None:
        return None
    return run.last_write + limit


def _memory(run: RunSignals) -> tuple[str, bool, Evidence | None]:
    """(what the last memory readings say, whether host memory was rising, evidence)."""
    parts, rising, evidence = [], False, None
    for name, label in ((sig.HOST_MEMORY_MB, "host memory"), (sig.DEVICE_MEMORY_MB, "device memory")):
        series = run.get(name)
        if series is None:
            continue
        last_step, last = int(series.steps[-1]), float(series.values[-1])
        start = len(series) * 3 // 4 if len(series) >= 4 else 0
        first_step, first = int(series.steps[start]), float(series.values[start])
        change = last - first
        trend = f"{change:+.0f} MiB since step {first_step}" if last_step > first_step else "a single reading"
        parts.append(f"{label} {last:.0f} MiB at step {last_step} ({trend})")
        if name == sig.HOST_MEMORY_MB and first > 0 and change > MEMORY_RISE_FRACTION * first:
            rising = True
        if evidence is None:
            evidence = Evidence((name,), first_step, last_step)
    text = f"Last memory readings: {'; '.join(parts)}." if parts else "No memory reading was recorded."
    return text, rising, evidence


def check_ended_abruptly(run: RunSignals) -> list[Finding]:
    limit = silence_limit(run)
    if limit is None or run.now is None or run.last_write is None:
        return []
    silent = run.now - run.last_write
    if silent <= limit:
        return []
    step = _last_step(run)
    memory, rising, evidence = _memory(run)
    pauses = _pauses(run)
    if pauses and pauses[-1][1] is None:
        cause = (
            f" It had been stalled since step {pauses[-1][0].step} (see training_stalled): a job time limit or a "
            "scheduler's hang detector probably ended it."
        )
    elif rising:
        cause = " Host memory was climbing: the kernel's OOM killer is the likely cause."
    else:
        cause = " Likely causes: the host's OOM killer, a preempted machine, a job's time limit, or Ctrl-C."
    quiet = f"{silent:.0f} s" if silent < 120 else f"{silent / 60:.0f} min"
    checkpoint = Fix(
        "Checkpoint so that a killed run resumes where it stopped (rerun the same script).",
        'callbacks=[keras.callbacks.BackupAndRestore(backup_dir="backup/run1"), HealthCallback(log_dir="logs/run1")]',
    )
    find_out = Fix(
        "Find out what ended it: the OOM killer logs to the kernel log; schedulers record a job's exit reason.",
        'dmesg -T | grep -i -E "killed process|out of memory"   # Kubernetes: kubectl describe pod  (OOMKilled)',
    )
    smaller = Fix(
        "Use less host memory: a smaller batch and bounded tf.data buffers (shuffle, prefetch, cache in RAM).",
        "ds = ds.shuffle(10_000).batch(64).prefetch(tf.data.AUTOTUNE)  # smaller batch, bounded shuffle buffer",
    )
    fixes = (find_out, smaller, MEMORY_GROWTH_FIX, checkpoint) if rising else (find_out, checkpoint, smaller)
    return [
        Finding(
            code=Code.ENDED_ABRUPTLY,
            severity=Severity.CRITICAL,
            step=step,
            title=f"Training ended abruptly at step {step}: no end and no crash record",
            detail=(
                f"Nothing was written for {quiet} (its stall allowance, at least {MIN_SILENCE_SECONDS:.0f} s: "
                f"{limit:.0f} s; a live run writes a heartbeat well within it), and the run has "
                f"neither a fit-end nor a crash record: the process was killed without an exception.{cause} "
                f"{memory}"
            ),
            evidence=dataclasses.replace(
                evidence or Evidence((), step, step),
                facts=fact("last step recorded", step)
                + fact("silent for", f"{silent:.0f} s (allowance {limit:.0f} s)")
                + fact("end or crash record", "none"),
            ),
            fixes=fixes,
        )
    ]
