"""The newest Keras releases tb-trainhealth was tested with, and the note for a newer one.

A newer Keras may move an internal the callback reaches for (`keras_private`); the part that
needs it then turns itself off and the run records that (a `part_not_recorded` finding).
The note at the first fit says why that may happen; nothing else changes.
"""

from __future__ import annotations

import re

# Raise these when the compatibility bench (`bench/compat.py`) passes on a newer release.
NEWEST_TESTED = {"keras": (3, 15), "tf_keras": (2, 21)}
_LABEL = {"keras": "Keras", "tf_keras": "tf_keras"}
_MAJOR_MINOR = re.compile(r"(\d+)\.(\d+)")


def major_minor(version: str) -> tuple[int, int] | None:
    """(3, 16) of "3.16.0", "3.16.0.dev2025"; None for anything else."""
    match = _MAJOR_MINOR.match(version.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def newer_than_tested_note(package: str, version: str) -> str | None:
    """One line when `version` of `package` ("keras" or "tf_keras") is newer than any tested, else None."""
    tested, running = NEWEST_TESTED.get(package), major_minor(version)
    if tested is None or running is None or running <= tested:
        return None
    label = _LABEL[package]
    return (
        f"tb-trainhealth: tested with {label} up to {tested[0]}.{tested[1]}; you run {version} "
        "— parts that stop working will say so in the Health tab and in `tb-trainhealth diagnose`"
    )
