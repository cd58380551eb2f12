"""The stall allowance: how long no training step may finish before the run counts as stalled.

One formula for both sides: the watchdog in the training process uses it to decide when a
stall begins, the read side to decide when a run that stopped writing ended abruptly.
Read-side safe: no TensorFlow.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

# The default allowance is the larger of 5 minutes and 20x the median step time
# after warm-up. 5 minutes is longer than any healthy pause of a steady run we know of (a
# checkpoint save, a shuffle buffer refilling at an epoch's start) and still well inside a
# job's time limit; 20x the median covers runs whose steps are slow by nature.
DEFAULT_STALL_SECONDS = 300.0
STEP_TIME_FACTOR = 20.0
# Steps measured before warm-up ends (the first steps after tracing still allocate, autotune).
WARMUP_STEPS = 10
# The fit's first step (tracing, XLA compilation, filling a shuffle buffer) and an
# evaluation's first batch (tracing the test step) get this many allowances: compiling a
# large model with XLA takes minutes, never hours.
FIRST_STEP_FACTOR = 10.0
# The watchdog writes a heartbeat when nothing else was written for this share of the
# smallest allowance, so a live process is never silent for a whole allowance.
HEARTBEAT_SHARE = 1.0 / 3.0


def median_step_seconds(step_times_ms: Iterable[float], warmup: int = WARMUP_STEPS) -> float | None:
    """The median of the finite step times after the first `warmup` ones, in seconds."""
    times = sorted(t for t in list(step_times_ms)[warmup:] if math.isfinite(t) and t >= 0)
    if not times:
        return None
    middle = len(times) // 2
    median = times[middle] if len(times) % 2 else (times[middle - 1] + times[middle]) / 2
    return median / 1000.0


def allowance(stall_after: float | None, median_step_s: float | None) -> float:
    """Seconds without a finished step that count as a stall: `stall_after` when the user set
    it, else the larger of DEFAULT_STALL_SECONDS and STEP_TIME_FACTOR x the median step time."""
    if stall_after is not None:
        return float(stall_after)
    return max(DEFAULT_STALL_SECONDS, STEP_TIME_FACTOR * (median_step_s or 0.0))


def heartbeat_seconds(stall_after: float | None) -> float:
    """How long the watchdog lets the event file go unwritten (a share of the smallest allowance)."""
    return HEARTBEAT_SHARE * allowance(stall_after, None)
