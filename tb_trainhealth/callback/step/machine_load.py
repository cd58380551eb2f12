"""How busy the rest of the machine is: the CPU time other processes took, as a share of all
cores' time, between two readings (Linux's /proc/stat, less this process's own time).

A step that waits for its batch on a machine whose cores other processes hold waits for a free
core as much as for its data: `input_bound` reads this before it calls a wait a warning (a
healthy run on a busy CI machine waited 20-27% of its tiny steps). None where /proc/stat is
missing (macOS, Windows): the rules then judge the wait alone, as before.
"""

from __future__ import annotations

import os

PROC_STAT = "/proc/stat"


def _ticks() -> tuple[float, float, float] | None:
    """(busy ticks of all cores, all ticks, this process's ticks) since boot; None where unknown."""
    try:
        with open(PROC_STAT) as stat:
            fields = [int(v) for v in stat.readline().split()[1:9]]
        per_second = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    if len(fields) < 5:
        return None
    total = float(sum(fields))  # user nice system idle iowait irq softirq steal
    idle = float(fields[3] + fields[4])
    times = os.times()
    return total - idle, total, (times.user + times.system) * per_second


class OtherLoad:
    """`share()`: other processes' share of the machine's CPU since the last call (or creation)."""

    def __init__(self) -> None:
        self._last = _ticks()

    def share(self) -> float | None:
        now, last = _ticks(), self._last
        self._last = now
        if now is None or last is None or now[1] <= last[1]:
            return None
        others = (now[0] - last[0]) - (now[2] - last[2])
        return min(max(others / (now[1] - last[1]), 0.0), 1.0)
