"""Wall time per training step and memory readings, taken between Keras' batch hooks.

Keras calls `on_train_batch_begin` once per host call of `steps_per_execution` steps:
the time between two calls is one call's time. Memory (a /proc read, and the GPU's
allocator where there is one) is read every MEMORY_EVERY steps: a leak shows as a
steady climb, which needs points, not every step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from tb_trainhealth.callback.step.memory import device_memory_mb, host_rss_mb

MEMORY_EVERY = 32


class StepClock:
    """One per fit. read_memory: False once reading memory failed (`on_memory_error` is told once)."""

    def __init__(self, steps_per_call: int, read_memory: bool, on_memory_error: Callable[[Exception], None]):
        self.steps_per_call = steps_per_call
        self._on_memory_error = on_memory_error
        self._memory_works = read_memory
        # Per host call since the last `take`: (call time ms, host MiB, device MiB); NaN: unknown.
        self._per_call: list[tuple[float, float, float]] = []
        self._steps_since_memory = MEMORY_EVERY
        self._last_begin: float | None = None
        self._compiling = True

    def epoch_begin(self) -> None:
        self._last_begin = None  # the first interval of an epoch starts at its first batch

    def batch_begin(self) -> float:
        """A host call begins (the previous one ended); returns perf_counter() now."""
        now = time.perf_counter()
        if self._last_begin is not None:
            # The first call of a fit traces and compiles the step: not a step time.
            call_ms = math.nan if self._compiling else (now - self._last_begin) * 1000.0
            self._per_call.append((call_ms, *self._read_memory()))
            self._compiling = False
        self._last_begin = now
        return now

    def epoch_end(self) -> None:
        if self._last_begin is not None:
            # The last call's end is hidden behind validation: its memory, not its time, is known.
            self._per_call.append((math.nan, *self._read_memory(force=True)))
        self._last_begin = None

    def take(self, num_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(step time ms, host MiB, device MiB) for the newest `num_rows` steps; NaN where unknown."""
        per_call = np.array(self._per_call, np.float64).reshape(-1, 3)
        self._per_call = []
        spread = self.steps_per_call
        return (
            per_step(per_call[:, 0], num_rows, spread),
            per_step(per_call[:, 1], num_rows, spread, split=False),
            per_step(per_call[:, 2], num_rows, spread, split=False),
        )

    def _read_memory(self, force: bool = False) -> tuple[float, float]:
        """(host RSS, device memory) in MiB after the call that just ended, every MEMORY_EVERY
        steps (or when `force`d: an epoch's end); NaN where not read or unknown."""
        self._steps_since_memory += self.steps_per_call
        if not self._memory_works or not (force or self._steps_since_memory >= MEMORY_EVERY):
            return math.nan, math.nan
        self._steps_since_memory = 0
        try:
            host, device = host_rss_mb(), device_memory_mb()
        except Exception as err:
            self._memory_works = False
            self._on_memory_error(err)
            return math.nan, math.nan
        return (math.nan if host is None else host), (math.nan if device is None else device)


def per_step(per_call: np.ndarray, num_rows: int, spread: int = 1, split: bool = True) -> np.ndarray:
    """Per-call values (one per host call of `spread` steps) aligned to the newest rows;
    NaN where unknown. `split`: a call's value (a time) is split evenly over its steps;
    otherwise (a reading) it goes to the call's last step."""
    values = np.asarray(per_call, np.float64)
    if split:
        steps = np.repeat(values / spread, spread)
    else:
        steps = np.full(len(values) * spread, np.nan)
        steps[spread - 1 :: spread] = values
    out = np.full(num_rows, np.nan)
    # The first rows of a fit were traced and compiled: their time is not a step time.
    count = min(num_rows, len(steps))
    out[num_rows - count :] = steps[len(steps) - count :]
    return out
