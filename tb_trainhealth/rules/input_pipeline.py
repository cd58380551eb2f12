"""`input_bound` and `input_pipeline_config`: a step that waits for its data, and why.

`input_bound` reads the measured wait per step (`input_wait_ms`, timed around the
batch fetch) against the step time, in the steady state (each epoch's first fetch,
which starts a new iterator, is left out). Its levels are XProf's input-pipeline analysis
(the TensorFlow profiler's "Input Pipeline Analyzer"): 20% or more of the step time
waiting for input is "highly input-bound", 5% or more "moderately input-bound".
`input_pipeline_config` turns the callback's tf.data lint events into the exact
change to make.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import PipelineLintEvent, StallEvent
from tb_trainhealth.contract.run_info import InputSource
from tb_trainhealth.contract.vocab import PipelineCheck
from tb_trainhealth.findings import TUNE_TF_DATA, Direction, Evidence, Fact, Finding, Fix, Intent, Severity
from tb_trainhealth.rules.fact_text import event_facts, fact
from tb_trainhealth.signals import RunSignals, Series

HIGHLY_INPUT_BOUND = 0.20  # XProf: "highly input-bound"
MODERATELY_INPUT_BOUND = 0.05  # XProf: "moderately input-bound"
# Fetching a batch that is already there costs some 0.1-0.3 ms on the 2-core CI
# machine (Keras' own numpy pipeline, tiny MLP). Below 1 ms per step the wait is that
# overhead, which no pipeline change removes (steps_per_execution does).
MIN_WAIT_MS = 1.0
MIN_STEPS = 20
# Other processes held at least this share of the machine's CPU over the run (the callback's
# per-epoch reading): the step may have waited for a free core, not for its data. There a wait
# is a warning only from CROWDED_MIN_WAIT_MS a step: a busy machine alone must not raise one.
# Measured (`python bench/healthy_sweep.py` beside two other trainings on 2 cores): healthy runs'
# waits 1.07-1.67 ms a step, 20-27% of their tiny steps; an injected 15 ms delay stays ~11-15 ms.
BUSY_MACHINE = 0.25
CROWDED_MIN_WAIT_MS = 5.0


def _epoch_first_steps(run: RunSignals, waits: Series) -> np.ndarray:
    """The first step of the run and of each epoch: its fetch also starts a new iterator
    (fills shuffle buffers, opens files), a cost paid once per epoch, not per step."""
    epochs = run.get(sig.EPOCH_LOSS)
    later = epochs.steps + 1 if epochs is not None else np.array([], np.int64)
    return np.concatenate([waits.steps[:1], later])


def input_share(run: RunSignals) -> tuple[float, float, float, int, int] | None:
    """(share of step time waiting, mean wait ms, mean step ms, first step, last step) over the
    steady-state steps with both measurements; None when there are too few."""
    waits, steps = run.get(sig.INPUT_WAIT_MS), run.get(sig.STEP_TIME_MS)
    if waits is None or steps is None or len(waits) == 0:
        return None
    common, wait_at, step_at = np.intersect1d(waits.steps, steps.steps, return_indices=True)
    wait, step = waits.values[wait_at], steps.values[step_at]
    keep = np.isfinite(wait) & np.isfinite(step) & (step > 0) & (wait >= 0)
    keep &= ~np.isin(common, _epoch_first_steps(run, waits))
    # A stalled step is one event, reported as `training_stalled`, not a steady input cost.
    keep &= ~np.isin(common, [event.step + 1 for event in run.events_of(StallEvent)])
    if keep.sum() < MIN_STEPS:
        return None
    wait, step, common = np.minimum(wait[keep], step[keep]), step[keep], common[keep]
    return float(wait.sum() / step.sum()), float(wait.mean()), float(step.mean()), int(common[0]), int(common[-1])


def others_busy(run: RunSignals) -> float | None:
    """The median share of the machine's CPU other processes took per epoch; None where unknown."""
    series = run.get(sig.OTHER_CPU_SHARE)
    return float(np.median(series.values)) if series is not None else None


def _is_highly_input_bound(run: RunSignals) -> bool:
    """What lifts a speed lint to a warning: a moderate wait does not (a healthy two-worker run on
    a busy machine waited 9% of its step, and its in-memory pipeline's missing prefetch was called
    a warning), nor a wait on a machine other processes kept busy."""
    measured = input_share(run)
    return measured is not None and measured[0] >= HIGHLY_INPUT_BOUND and measured[1] >= _min_wait_ms(run)


def _min_wait_ms(run: RunSignals) -> float:
    """The wait a step must show to be called input-bound: more on a machine others keep busy."""
    busy = others_busy(run)
    return CROWDED_MIN_WAIT_MS if busy is not None and busy >= BUSY_MACHINE else MIN_WAIT_MS


# -- input_pipeline_config: one explanation and fix per lint check ----------------------------

PREFETCH_FIX = Fix(
    "End the pipeline with prefetch, so the next batch is prepared while this one trains.",
    "dataset = dataset.prefetch(tf.data.AUTOTUNE)  # the last line of the pipeline",
    intents=(TUNE_TF_DATA,),
)
PARALLEL_FIX = Fix(
    "Run map (and interleave) in parallel.",
    "dataset = dataset.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE)\n"
    "files.interleave(tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE)",
    intents=(TUNE_TF_DATA,),
)
CACHE_FIX = Fix(
    "Cache after the expensive deterministic work (decode, parse, resize) and before random augmentation; "
    "to a file if it does not fit in memory.",
    "dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()  # or .cache('/tmp/ds.cache')\n"
    "dataset = dataset.shuffle(10_000).map(augment, num_parallel_calls=tf.data.AUTOTUNE)",
    intents=(TUNE_TF_DATA,),
)

SPEED, CORRECTNESS, SHUFFLING = "speed", "correctness", "shuffling"

_LINT: dict[PipelineCheck, tuple[str, str, Fix, str]] = {
    # check: (title, why, fix, what it costs: speed (a warning when the run waits for input,
    # else info), correctness (always a warning), shuffling quality (info: it depends on
    # whether the data is ordered, which the graph does not say))
    PipelineCheck.NO_PREFETCH: (
        "tf.data pipeline does not end with prefetch",
        "Without prefetch the pipeline starts preparing batch N+1 only when step N asks for it, "
        "so the accelerator waits for every batch.",
        PREFETCH_FIX,
        SPEED,
    ),
    PipelineCheck.SEQUENTIAL_MAP: (
        "tf.data {method} runs sequentially",
        "`{method}` without num_parallel_calls processes one element at a time on one core.",
        PARALLEL_FIX,
        SPEED,
    ),
    PipelineCheck.CACHE_AFTER_AUGMENTATION: (
        "cache() comes after random augmentation: the augmentation is frozen",
        "cache() stores the first epoch's augmented images and replays them every epoch, so the model "
        "sees the same 'random' crops and flips forever (it overfits as if there were no augmentation).",
        Fix(
            "Cache before the random augmentation, augment after it.",
            "dataset = dataset.map(decode).cache().shuffle(10_000)\n"
            "dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(32).prefetch(tf.data.AUTOTUNE)",
            intents=(TUNE_TF_DATA,),
        ),
        CORRECTNESS,
    ),
    PipelineCheck.EXPENSIVE_MAP_NOT_CACHED: (
        "Expensive map ({ops}) is redone every epoch",
        "The map runs {ops} again on the same data in every epoch; nothing caches its result.",
        CACHE_FIX,
        SPEED,
    ),
    PipelineCheck.SHUFFLE_AFTER_BATCH: (
        "shuffle() comes after batch(): whole batches are shuffled, not samples",
        "Shuffling after batch() shuffles the order of fixed batches: the same samples always train "
        "together, and sorted data stays sorted within each batch.",
        Fix(
            "Shuffle samples before batching.",
            "dataset = dataset.shuffle(buffer_size=10_000).batch(32).prefetch(tf.data.AUTOTUNE)",
            intents=(TUNE_TF_DATA,),
        ),
        CORRECTNESS,
    ),
    PipelineCheck.SMALL_SHUFFLE_BUFFER: (
        "Shuffle buffer ({buffer_size}) is much smaller than the data ({elements} elements)",
        "A buffer of {buffer_size} only mixes neighbouring samples; if the data is ordered (by class, by "
        "file, by time) batches stay ordered. A buffer as large as the dataset shuffles it fully.",
        Fix(
            "Shuffle with a buffer as large as the data when it fits in memory (or shuffle the file list too).",
            "dataset = dataset.shuffle(buffer_size={elements}, reshuffle_each_iteration=True)",
            intents=(TUNE_TF_DATA,),
        ),
        SHUFFLING,
    ),
    PipelineCheck.PER_ELEMENT_MAP: (
        "Cheap per-element map before batch() could run on whole batches",
        "Each call of a map function has a fixed cost; element-wise math (casts, scaling) does the same "
        "work on a whole batch in one call.",
        Fix(
            "Batch first, then map the same function over the batch.",
            "dataset = dataset.batch(32).map(normalize, num_parallel_calls=tf.data.AUTOTUNE)",
            intents=(TUNE_TF_DATA,),
        ),
        SPEED,
    ),
}


def _lint_events(run: RunSignals) -> list[PipelineLintEvent]:
    return run.first_of_each_check(PipelineLintEvent, _LINT)


def _fields(event: PipelineLintEvent) -> dict[str, Any]:
    return {
        "method": event.method or "map",
        "ops": ", ".join(event.ops) if event.ops else "decode/parse",
        "buffer_size": "?" if event.buffer_size is None else event.buffer_size,
        "elements": "?" if event.elements is None else event.elements,
    }


def check_input_pipeline_config(run: RunSignals) -> list[Finding]:
    events = _lint_events(run)
    if not events:
        return []
    input_bound = _is_highly_input_bound(run)
    speed_cost = _speed_cost(run, input_bound)
    findings = []
    for event in events:
        title, why, fix, cost_kind = _LINT[event.check]
        fields = _fields(event)
        severity = Severity.INFO
        cost = ""
        if cost_kind == CORRECTNESS:
            severity = Severity.WARNING
        elif cost_kind == SPEED:
            severity, cost = (Severity.WARNING if input_bound else Severity.INFO), speed_cost
        findings.append(
            Finding(
                code=Code.INPUT_PIPELINE_CONFIG,
                severity=severity,
                step=event.step,  # the fit() it was found at
                title=title.format(**fields),
                detail=why.format(**fields) + cost + f" (tf.data op: {event.stage or '?'})",
                evidence=Evidence(
                    _series_in(run, sig.INPUT_WAIT_MS, sig.STEP_TIME_MS),
                    facts=event_facts(event, ("step",), {"stage": "tf.data op", "ops": "pipeline ops"})
                    + _measured_wait(run),
                    check=event.check.value,
                ),
                fixes=(Fix(fix.text.format(**fields), fix.code.format(**fields), fix.intents),),
            )
        )
    return findings


def _speed_cost(run: RunSignals, input_bound: bool) -> str:
    """What a speed lint costs this run, in the words `input_bound` judges the wait with (one story
    per run: a wait measured on a crowded machine is not "little", nor yet the pipeline's)."""
    measured = input_share(run)
    if measured is None:
        return " The run's wait for input was not measured, so what this costs it is not known."
    share, wait_ms = measured[0], measured[1]
    if input_bound:
        return f" This run waits for its input {share:.0%} of its step time (see input_bound)."
    if share >= HIGHLY_INPUT_BOUND and wait_ms >= MIN_WAIT_MS:  # (crowded: see check_input_bound)
        return (
            f" This run waited for its input {share:.0%} of its step time while other processes kept the machine "
            "busy: measure again on an idle machine to know what this costs (see input_bound)."
        )
    return f" This run waits little for its input ({share:.0%} of its step time), so it costs little now."


# -- input_bound ---------------------------------------------------------------------------------


def _series_in(run: RunSignals, *names: str) -> tuple[str, ...]:
    return tuple(name for name in names if run.get(name) is not None)


def _measured_wait(run: RunSignals) -> tuple[Fact, ...]:
    measured = input_share(run)
    if measured is None:
        return fact("measured input wait", "not recorded (measure_input=False, or too few steps)")
    share, wait_ms, step_ms, first, last = measured
    return fact(
        "measured input wait", f"{wait_ms:.1f} ms of a {step_ms:.1f} ms step ({share:.0%}), steps {first}-{last}"
    )


def _input_fixes(run: RunSignals) -> tuple[Fix, ...]:
    """Fixes for this pipeline first (its lint findings, its input type), then the general ones."""
    fixes = [_LINT[e.check][2] for e in _lint_events(run) if _LINT[e.check][3] == SPEED]
    source = run.info.input or InputSource()
    if source.type == "PyDataset":
        fixes.append(
            Fix(
                f"Load batches in parallel: this PyDataset runs with workers={1 if source.workers is None else source.workers}, "
                f"use_multiprocessing={bool(source.use_multiprocessing)}.",
                "class MyData(keras.utils.PyDataset):\n"
                "    def __init__(self, ..., **kwargs):\n"
                "        super().__init__(workers=8, use_multiprocessing=True, max_queue_size=16, **kwargs)",
            )
        )
    elif source.type == "generator":
        fixes.append(
            Fix(
                "A Python generator runs on one thread under the GIL: turn it into a keras.utils.PyDataset "
                "with workers, or a tf.data pipeline with parallel map.",
                "dataset = tf.data.Dataset.from_tensor_slices(paths).map(load, num_parallel_calls=tf.data.AUTOTUNE)",
            )
        )
    elif source.type == "arrays":  # fit's own pipeline over in-memory arrays: only a tf.data one of yours can prefetch
        fixes.append(
            Fix(
                "The data is in-memory arrays, which fit slices on one thread: feed them as a tf.data pipeline that "
                "prefetches the next batch while this one trains.",
                "ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(len(x_train))"
                ".batch(32).prefetch(tf.data.AUTOTUNE)\nmodel.fit(ds, epochs=...)",
                (Intent("input_pipeline", Direction.CHANGE),),
            )
        )
    if source.type in ("tf.data", "?"):
        for general in (PREFETCH_FIX, PARALLEL_FIX, CACHE_FIX):
            if general not in fixes:
                fixes.append(general)
    fixes.append(
        Fix(
            "Check it with the profiler's Input Pipeline Analyzer for the slowest stage.",
            "tf.profiler.experimental.start('logs/profile'); model.fit(ds, steps_per_epoch=50); "
            "tf.profiler.experimental.stop()",
        )
    )
    return tuple(fixes)


def check_input_bound(run: RunSignals) -> list[Finding]:
    measured = input_share(run)
    if measured is None:
        return []
    share, wait_ms, step_ms, first, last = measured
    if share < MODERATELY_INPUT_BOUND or wait_ms < MIN_WAIT_MS:
        return []
    highly = share >= HIGHLY_INPUT_BOUND
    level = "highly" if highly else "moderately"
    busy = others_busy(run)
    crowded = wait_ms < _min_wait_ms(run)  # (only where other processes kept the machine busy)
    return [
        Finding(
            code=Code.INPUT_BOUND,
            severity=Severity.WARNING if highly and not crowded else Severity.INFO,
            step=first,
            title=f"Training waits for input {share:.0%} of the time ({level} input-bound)",
            detail=(
                f"Steps {first}-{last}: each step waited {wait_ms:.1f} ms for its batch and computed "
                f"{step_ms - wait_ms:.1f} ms (mean step {step_ms:.1f} ms), so {share:.0%} of the step time "
                f"is spent waiting for the input pipeline. Levels as in the TensorFlow profiler's input-"
                f"pipeline analysis: 5% or more is moderately, 20% or more highly input-bound. A faster "
                f"pipeline could make training up to {1 / (1 - share):.1f}x faster."
                + (
                    f" Other processes used {busy or 0:.0%} of this machine's CPU meanwhile, and a wait under "
                    f"{CROWDED_MIN_WAIT_MS:g} ms a step is then mostly the step waiting for a free core, not for its "
                    "data: measure again on an idle machine before changing the pipeline."
                    if crowded
                    else ""
                )
            ),
            evidence=Evidence((sig.INPUT_WAIT_MS, sig.STEP_TIME_MS), first, last),
            fixes=_input_fixes(run),
        )
    ]
