"""A store that stops answering while `watch` follows it: said once with when the next look is,
looked at again after longer and longer waits (so a long outage costs few requests), and said
again when it answers.

```python
outage = Outage("s3://bucket/logs", interval=10)
try:
    reload()
except LogdirError as err:
    time.sleep(outage.failed(str(err)))  # prints once: "... trying again in 10 s, then less often"
else:
    outage.answered()  # prints once: "... answers again (unreachable for 42 s)"
```
"""

from __future__ import annotations

import time

# Waits double from the watch's interval up to this (or the interval, where that is longer): a store
# down for an hour is asked about 30 more times, and a blip of a few seconds costs one interval.
MAX_RETRY_SECONDS = 120.0


class Outage:
    def __init__(self, logdir: str, interval: float):
        self.logdir, self.interval = logdir, interval
        self.failures = 0
        self.since: float | None = None

    def failed(self, why: str) -> float:
        """Seconds to wait before the next look; the first failure of an outage is printed."""
        longest = max(self.interval, MAX_RETRY_SECONDS)
        wait = min(self.interval * 2**self.failures, longest)
        if self.failures == 0:
            self.since = time.monotonic()
            _say(f"[store] {why}; trying again in {wait:g} s, then less often (at most every {longest:g} s)")
        self.failures += 1
        return wait

    def answered(self) -> None:
        """The logdir was read: where it had not been, say so once."""
        if self.failures and self.since is not None:
            _say(f"[store] {self.logdir} answers again (unreadable for {time.monotonic() - self.since:.0f} s)")
        self.failures, self.since = 0, None


def _say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)
