"""Cheap memory readings: host RSS from /proc (no psutil needed) and device memory from TensorFlow."""

from __future__ import annotations

import os
import resource


def host_rss_mb() -> float | None:
    """Current resident set size of this process, in MiB (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def device_memory_mb() -> float | None:
    """Memory in use on the first GPU, in MiB, or None without a GPU."""
    import tensorflow as tf

    try:
        if not tf.config.list_logical_devices("GPU"):
            return None
        return tf.config.experimental.get_memory_info("GPU:0")["current"] / 2**20
    except (ValueError, RuntimeError):
        return None
