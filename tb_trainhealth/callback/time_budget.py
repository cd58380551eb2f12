"""Keeps an occasional job (a probe, a diagnosis) under a share of the training's wall time.

Its cost grows with the model and the run (a long run's diagnosis reads capped series of
thousands of points), while the steps it is spread over may take 1 ms or 1 s: a fixed
"every N steps" cannot bound its share of the time, this can.

Example:

```python
budget = TimeBudget(share=0.005)
if budget.allows():
    with budget.spend():
        run_the_job()
```
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class TimeBudget:
    """`min_seconds`: what a run is assumed to cost at least. A job whose cost grows as the run
    goes on (a diagnosis reads longer series) is cheap at first: without a floor its first, cheap
    runs would let the next one come too soon for what it will cost."""

    def __init__(self, share: float, min_seconds: float = 0.0):
        self.share = share
        self.min_seconds = min_seconds
        self._last_end = -float("inf")
        self._last_seconds = 0.0

    def allows(self) -> bool:
        """True once the time since the last run ended is at least its cost over `share`."""
        return (time.perf_counter() - self._last_end) * self.share >= self._last_seconds

    def restart(self) -> None:
        """From now on: the next run waits until it fits in the share of the time from here, its
        cost assumed to be that of the last run, or `min_seconds` if more (or none ran yet)."""
        self._last_end = time.perf_counter()
        self._last_seconds = max(self._last_seconds, self.min_seconds)

    @contextlib.contextmanager
    def spend(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._last_end = time.perf_counter()
            self._last_seconds = max(self._last_end - start, self.min_seconds)
