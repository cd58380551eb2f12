"""Cheap memory readings: host RSS from /proc (no psutil needed) and device memory from TensorFlow.

Without /proc (macOS, Windows) host memory is the peak RSS from `resource.getrusage`, whose
unit differs by platform: KiB on Linux, bytes on macOS. Windows has no `resource` module:
there host memory is not read (`host_memory_unavailable` says why), and the rest runs.
"""

from __future__ import annotations

import os
import sys

try:
    import resource
except ImportError:  # Windows
    resource = None

# The current RSS in pages (second field); Linux only.
PROC_STATM = "/proc/self/statm"


def host_rss_mb() -> float | None:
    """Resident set size of this process in MiB: the current one from /proc, else the peak
    one from `resource`; None where neither exists (Windows)."""
    current = _proc_rss_mb()
    return current if current is not None else _peak_rss_mb()


# cgroup v2 (containers, CI runners): the process's memory allowance, or "max".
CGROUP_MEMORY_MAX = "/sys/fs/cgroup/memory.max"


def host_memory_limit_mb() -> float | None:
    """What this process may hold, in MiB: the smallest of the machine's RAM, its container's
    allowance and an address-space rlimit; None where none is known. `memory_growth` projects a
    climb onto it: a leak is urgent only where it reaches this before the run ends."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20)
    except (ValueError, OSError, AttributeError):
        pass
    try:
        with open(CGROUP_MEMORY_MAX) as allowance:
            limits.append(int(allowance.read().strip()) / 2**20)
    except (OSError, ValueError):  # no cgroup v2, or "max"
        pass
    if resource is not None:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft > 0:
            limits.append(soft / 2**20)
    return min(limits) if limits else None


def host_memory_unavailable() -> str | None:
    """Why host memory cannot be read on this platform, or None where it can."""
    if os.path.exists(PROC_STATM) or resource is not None:
        return None
    return f"this platform ({sys.platform}) has neither {PROC_STATM} nor Python's resource module"


def _proc_rss_mb() -> float | None:
    try:
        with open(PROC_STATM, "rb") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError, AttributeError):  # (no os.sysconf on Windows)
        return None


def _peak_rss_mb() -> float | None:
    """`ru_maxrss` in MiB: bytes on macOS, KiB on Linux and the BSDs."""
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def device_memory_mb() -> float | None:
    """Memory in use on the first GPU, in MiB, or None without a GPU."""
    import tensorflow as tf

    try:
        if not tf.config.list_logical_devices("GPU"):
            return None
        return tf.config.experimental.get_memory_info("GPU:0")["current"] / 2**20
    except (ValueError, RuntimeError):
        return None
