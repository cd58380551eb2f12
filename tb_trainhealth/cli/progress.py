"""The one-line progress bar `diagnose` draws on stderr for a terminal (never with --json, never
piped): "reading event files..." while TensorBoard's loader starts, then a bar of runs diagnosed,
cleared before the report is printed (or before the error line) so it leaves nothing behind.
"""

from __future__ import annotations

import sys

BAR_WIDTH = 30


def show_reading() -> None:
    print("reading event files...", end="", file=sys.stderr, flush=True)


def show_runs_diagnosed(runs: int, expected_runs: int) -> None:
    filled = int(BAR_WIDTH * min(runs / expected_runs, 1))
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    print(f"\rdiagnosing [{bar}] {runs} runs", end="", file=sys.stderr, flush=True)


def clear_progress() -> None:
    print("\r\033[K", end="", file=sys.stderr, flush=True)
