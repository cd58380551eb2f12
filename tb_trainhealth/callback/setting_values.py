"""How what is read from Keras becomes a recorded setting: converted to what the contract takes
(`contract.run_settings`), rounded, or left out.

A read that raises (`section`) or a value that is no setting (`NOT_A_SETTING`: an object, a
NaN) is left out, never raised: recording the settings must never cost the run anything else.
Hyperparameters are rounded to SETTING_DIGITS significant digits, so a float32 0.1 reads 0.1 on
both Keras.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

SETTING_DIGITS = 7


def section(name: str, read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`read()`, or nothing when it raises (logged at debug level): one section left out."""
    try:
        return read()
    except Exception:
        logger.debug("tb-trainhealth: run settings: %s left out", name, exc_info=True)
        return {}


def setting(value: Any) -> Any:
    """A value as the contract takes it (str, int, rounded float, bool, None, list of numbers),
    or `NOT_A_SETTING`."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return _round(value) if math.isfinite(value) else NOT_A_SETTING
    if isinstance(value, (list, tuple)) and all(is_number(v) for v in value):
        return [setting(v) for v in value]
    return NOT_A_SETTING


NOT_A_SETTING = object()  # what `setting` gives for a value it cannot record


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _round(value: float) -> float:
    return float(f"{value:.{SETTING_DIGITS}g}")


def kept(values: Iterator[tuple[str, Any]]) -> dict[str, Any]:
    """The pairs whose values are settings, converted."""
    out = {}
    for key, value in values:
        converted = setting(value)
        if converted is not NOT_A_SETTING:
            out[key] = converted
    return out
