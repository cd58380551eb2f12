"""Facts: the measured values behind a finding backed by events rather than a series (an OOM,
a crash, a lint check), as short text the CLI prints and the tab tabulates."""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

from tb_trainhealth.contract.events import Event
from tb_trainhealth.findings import Fact

MAX_VALUE_CHARS = 300  # a crash message or a long op list: the start says enough
MAX_ITEMS = 12  # class counts, pipeline ops, layers: the rest as "... (N more)"
# A lint event's fields that are not measurements of the data.
LINT_NOT_FACTS = (
    "step",
    "check",
    "layer",
    "activation",
    "from_logits",
    "units",
    "rate",
    "output_range",
    "constant_loss",  # worse_than_constant says these in its own words
    "constant_how",
    "floor_loss",
)


def text(value: Any) -> str | None:
    """A field value as text; None for a value not worth a line (unset, empty, nested records)."""
    if value is None or value == () or value == "" or isinstance(value, dict):
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, tuple):
        if any(dataclasses.is_dataclass(v) for v in value):
            return None
        parts = ["?" if v is None else (text(v) or "?") for v in value]
        more = f" ... ({len(parts) - MAX_ITEMS} more)" if len(parts) > MAX_ITEMS else ""
        value = ", ".join(parts[:MAX_ITEMS]) + more
    if dataclasses.is_dataclass(value):
        return None
    out = str(value)
    return out if len(out) <= MAX_VALUE_CHARS else out[: MAX_VALUE_CHARS - 3] + "..."


def signed_percent(value: float) -> str:
    """A relative change as "+1.2%" / "-0.4%", and "0.0%" for what rounds to nothing (never "-0.0%")."""
    rounded = round(value, 3) + 0.0  # (-0.0 + 0.0 is 0.0)
    return f"{rounded:+.1%}" if rounded else "0.0%"


def fact(label: str, value: Any) -> tuple[Fact, ...]:
    """One fact, or none when the value is unset: `facts = fact("op", op) + fact(...)`."""
    shown = text(value)
    return () if shown is None else (Fact(label, shown),)


def event_facts(event: Event, skip: tuple[str, ...] = (), labels: dict[str, str] | None = None) -> tuple[Fact, ...]:
    """Every set field of an event, in declaration order, labelled by its name in words
    (or by `labels`)."""
    out: tuple[Fact, ...] = ()
    for field in dataclasses.fields(event):
        if field.name not in skip:
            label = (labels or {}).get(field.name, field.name.replace("_", " "))
            out += fact(label, getattr(event, field.name))
    return out
