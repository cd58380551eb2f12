"""`memory_growth`: host or device memory climbing steadily through training (a leak).

A leak is judged by its shape and slope, not by whether this run happened to end before the
memory ran out: memory that keeps climbing at a steady rate through the last part of the run is
a warning where that rate would fill what the process may hold within a plausible long run of
the same training (a day at the run's own step time, or ten times its planned steps, whichever
is shorter); memory that rose and then levelled off (a cache filling, allocator pools warming
up) is info. Every memory number a finding says is a reading its chart shows (the chart draws
the same series), or a slope and projection computed from them.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.fact_text import fact
from tb_trainhealth.rules.run_setup import steps_per_epoch
from tb_trainhealth.series_math import finite_part, rank_correlation
from tb_trainhealth.signals import RunSignals, Series

MIN_SAMPLES = 8
# The first part of a run allocates for good (graph tracing, optimizer slots,
# prefetch buffers): growth is measured after it.
WARMUP_FRACTION = 0.25
# A leak: at least this much growth after warm-up, both in MiB and relative to the level...
MIN_GROWTH_MB = 100.0
MIN_GROWTH_FRACTION = 0.10
# ...and steady: memory keeps rising with the step (Spearman rank correlation), not a
# one-off allocation followed by a flat line.
MIN_RANK_CORRELATION = 0.9
# The shape: the slope of the last LAST_FRACTION of the post-warm-up readings against the slope
# of them all. A leak keeps its rate to the end: 0.86-1.08 on bench/memory_zoo.py's seven steady
# leaks (0.86 the one that grows at epoch ends); growth that levelled off has a flat tail: 0.00 on
# its bounded deque and its first-epoch memo (its tf.data cache and saturating growth level off
# within warm-up: no finding). Below LEVELLED_OFF_RATIO, midway, it has levelled off: info.
LAST_FRACTION = 1 / 3
LEVELLED_OFF_RATIO = 0.35
# Where it levels off: the first reading within this share of the whole growth of the last one.
LEVEL_SHARE = 0.9
# A plausible long run of the same training: a day at the run's own step time, or this many
# times its planned steps (the run's own steps where the plan is unknown), whichever is shorter.
# A steady leak that fills the process within it is a warning (bench/memory_zoo.py: a callback keeping every
# batch's outputs grew 2.2 GiB in a few hundred steps and was info because that run ended first).
LONG_RUN_S = 24 * 3600
LONG_RUN_TIMES_PLANNED = 10
# What the process may hold (RAM, a container's allowance, an rlimit), with this share of it
# kept free for what else the run allocates.
LIMIT_SHARE = 0.9
# Growth per epoch rather than per step: this share of the growth or more happens in the
# readings' intervals that cross an epoch boundary (a per-step leak grows in proportion to the
# steps an interval spans). Said only where those intervals span at most EPOCH_STEP_SHARE of the
# steps: with epochs not much longer than the readings' interval nothing tells the two apart.
EPOCH_GROWTH_SHARE = 0.7
EPOCH_STEP_SHARE = 0.35


class _Shape:
    """The post-warm-up readings of one memory series, and what their shape says."""

    def __init__(self, steps: np.ndarray, values: np.ndarray):
        self.steps, self.values = steps, values
        # Medians of three are readings the chart shows (an odd count's median is one of them).
        self.first_at = int(np.argsort(values[:3])[1])
        self.last_at = len(values) - 3 + int(np.argsort(values[-3:])[1])
        self.first, self.last = float(values[self.first_at]), float(values[self.last_at])
        self.grown = self.last - self.first
        self.correlation = rank_correlation(values)
        self.slope, self.r2 = _line(steps, values)  # MiB per step
        tail = max(len(values) - round(len(values) * LAST_FRACTION), 0)
        tail = min(tail, len(values) - 3)
        self.tail_start = int(steps[tail])
        self.tail_slope, _ = _line(steps[tail:], values[tail:])
        self.tail_ratio = self.tail_slope / self.slope if self.slope > 0 else 0.0
        self.levelled = self.tail_ratio < LEVELLED_OFF_RATIO
        reached = np.flatnonzero(values >= self.first + LEVEL_SHARE * self.grown)
        self.level_at = int(reached[0]) if len(reached) else len(values) - 1

    @property
    def start_step(self) -> int:
        return int(self.steps[0])

    @property
    def end_step(self) -> int:
        return int(self.steps[-1])


def _line(steps: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """(slope, R^2) of the least-squares line through the readings."""
    x = steps.astype(np.float64)
    if len(x) < 2 or np.ptp(x) == 0:
        return 0.0, 0.0
    slope, intercept = np.polyfit(x, values.astype(np.float64), 1)
    residual = values - (slope * x + intercept)
    total = float(np.sum((values - values.mean()) ** 2))
    return float(slope), (1.0 - float(np.sum(residual**2)) / total) if total > 0 else 0.0


def _shape(series: Series) -> _Shape | None:
    series = finite_part(series)
    if len(series) < MIN_SAMPLES:
        return None
    start = int(len(series) * WARMUP_FRACTION)
    steps, values = series.steps[start:], series.values[start:]
    if len(values) < MIN_SAMPLES // 2:
        return None
    return _Shape(steps, values)


def _step_ms(run: RunSignals) -> float | None:
    times = run.get(sig.STEP_TIME_MS)
    if times is None:
        return None
    finite = times.values[np.isfinite(times.values) & (times.values > 0)]
    return float(np.median(finite)) if len(finite) else None


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def long_run_steps(run: RunSignals, end_step: int) -> tuple[int, str]:
    """(the last step of a plausible long run of this training, how it was chosen)."""
    planned = run.info.planned_end_step
    base = planned if planned else end_step
    steps, why = LONG_RUN_TIMES_PLANNED * base, f"{LONG_RUN_TIMES_PLANNED}x the {base} planned steps"
    if not planned:
        why = f"{LONG_RUN_TIMES_PLANNED}x this run's {base} steps"
    step_ms = _step_ms(run)
    if step_ms is not None:
        a_day = int(LONG_RUN_S * 1000 / step_ms)
        if a_day < steps:
            steps, why = a_day, f"a day at this run's {step_ms:.0f} ms per step"
    return steps, why


def _outlook(run: RunSignals, shape: _Shape, limit: float | None) -> tuple[bool, str]:
    """(urgent, what the climb means)."""
    if shape.levelled:
        return False, (
            f"It levelled off from step {int(shape.steps[shape.level_at])} near "
            f"{shape.values[shape.level_at]:.0f} MiB (the last third grew at {shape.tail_slope * 1000:.0f} MiB per "
            "1000 steps), so it is not a leak that will exhaust memory."
        )
    if limit is None:
        return True, "It keeps climbing to the end: at this rate the run will run out of memory."
    horizon, why = long_run_steps(run, shape.end_step)
    room = LIMIT_SHARE * limit
    steps_to_limit = (room - shape.last) / shape.slope if shape.slope > 0 else float("inf")
    reach = shape.end_step + max(steps_to_limit, 0)
    step_ms = _step_ms(run)
    when = f" (about {_duration(reach * step_ms / 1000)} of training)" if step_ms and np.isfinite(reach) else ""
    if reach <= horizon:
        return True, (
            f"It keeps climbing to the end: at this rate it fills the {room:.0f} MiB this process may use "
            f"({LIMIT_SHARE:.0%} of {limit:.0f} MiB) by step {reach:.0f}{when}, within a long run of this training "
            f"({horizon} steps: {why}). The run will run out of memory."
        )
    return False, (
        f"It keeps climbing to the end, but slowly: at this rate it would fill the {room:.0f} MiB this process may "
        f"use only at step {reach:.0f}{when}, beyond a long run of this training ({horizon} steps: {why}), so this "
        f"run is not at risk; it would reach that about {max(steps_to_limit, 0):.0f} steps after this point."
    )


def _source(run: RunSignals, shape: _Shape) -> str | None:
    """Where the growth likely comes from, where the run shows it: per epoch or per step, a
    cache filling in the first epoch."""
    per_epoch = steps_per_epoch(run)
    if not per_epoch or per_epoch < 2:
        return None
    start = run.info.start_step
    epoch_of = (shape.steps - start - 1) // per_epoch
    if shape.levelled:
        if epoch_of[shape.level_at] == 0 and epoch_of[-1] > 0:
            source = run.info.input.type if run.info.input is not None else None
            cache = "a tf.data cache or shuffle buffer filling" if source == "tf.data" else "buffers filling"
            return f"It grew during the first epoch and stayed flat after it: likely {cache}, not a leak."
        return None
    rises = np.diff(shape.values)
    crossing = np.diff(epoch_of) > 0
    if not crossing.any() or shape.grown <= 0:
        return None
    step_share = float(np.diff(shape.steps)[crossing].sum() / max(np.ptp(shape.steps), 1))
    if step_share > EPOCH_STEP_SHARE:
        return None  # readings as far apart as epochs: they cannot tell the two apart
    growth_share = float(np.clip(rises[crossing], 0, None).sum() / max(np.clip(rises, 0, None).sum(), 1e-9))
    if growth_share >= EPOCH_GROWTH_SHARE and step_share <= EPOCH_STEP_SHARE:
        return (
            f"It grows at epoch ends ({growth_share:.0%} of the growth in the readings around them): something kept "
            "once per epoch, e.g. a callback's on_epoch_end or validation outputs kept in a list."
        )
    if growth_share <= step_share + 0.25:
        return (
            "It grows with every step, not at epoch ends: something kept once per batch, e.g. a callback's "
            "on_train_batch_end keeping outputs or tensors in a list."
        )
    return None


FIXES = (
    Fix(
        "Don't keep tensors (or losses) from every step in Python lists; keep floats.",
        "losses.append(float(logs['loss']))  # not the tensor",
    ),
    Fix(
        "Building models in a loop? Free the old graphs between them.",
        "keras.backend.clear_session(); gc.collect()",
    ),
    Fix(
        "Don't create new tf.function/tf.Variable objects per step (each traces a new graph).",
        "step_fn = tf.function(step)  # once, outside the loop",
    ),
    Fix(
        "On GPUs, let TensorFlow grow its memory pool instead of reserving it all.",
        "for gpu in tf.config.list_physical_devices('GPU'): tf.config.experimental.set_memory_growth(gpu, True)",
    ),
)


def check_memory_growth(run: RunSignals) -> list[Finding]:
    findings = []
    for name, label in ((sig.HOST_MEMORY_MB, "Host memory (RSS)"), (sig.DEVICE_MEMORY_MB, "Device memory")):
        series = run.get(name)
        shape = _shape(series) if series is not None else None
        if shape is None:
            continue
        grown = shape.grown
        if (
            grown < MIN_GROWTH_MB
            or grown < MIN_GROWTH_FRACTION * shape.first
            or shape.correlation < MIN_RANK_CORRELATION
        ):
            continue
        limit = run.info.host_memory_limit_mb if name == sig.HOST_MEMORY_MB else None
        urgent, outlook = _outlook(run, shape, limit)
        source = _source(run, shape)
        start, end = shape.start_step, shape.end_step
        how = "rose, then levelled off" if shape.levelled else "grows steadily"
        facts = (
            fact("slope", f"{shape.slope * 1000:.0f} MiB per 1000 steps (steps {start}-{end})")
            + fact("fit", f"straight line R² {shape.r2:.2f}, rank correlation {shape.correlation:.2f}")
            + fact(
                "last third",
                f"{shape.tail_slope * 1000:.0f} MiB per 1000 steps from step {shape.tail_start} "
                f"({shape.tail_ratio:.0%} of the whole slope)",
            )
            + fact(
                "levels off",
                f"from step {int(shape.steps[shape.level_at])} near {shape.values[shape.level_at]:.0f} MiB"
                if shape.levelled
                else "no: still climbing at the end",
            )
        )
        findings.append(
            Finding(
                code=Code.MEMORY_GROWTH,
                severity=Severity.WARNING if urgent else Severity.INFO,
                step=start,
                title=f"{label} {how}: +{grown:.0f} MiB since step {start}",
                detail=(
                    f"{label} rose from {shape.first:.0f} MiB (step {int(shape.steps[shape.first_at])}, after "
                    f"warm-up) to {shape.last:.0f} MiB (step {int(shape.steps[shape.last_at])}), about "
                    f"{shape.slope * 1000:.0f} MiB per 1000 steps (rank correlation {shape.correlation:.2f}). "
                    f"{outlook}" + (f" {source}" if source else "")
                ),
                evidence=Evidence((name,), start, end, facts=facts),
                fixes=FIXES,
            )
        )
    return findings
