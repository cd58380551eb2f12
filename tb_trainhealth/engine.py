"""The rule engine: the same diagnosis online (in the callback) and offline (plugin, CLI)."""

from __future__ import annotations

import logging

import numpy as np

from tb_trainhealth import signals as sig
from tb_trainhealth.findings import Finding
from tb_trainhealth.rules import ALL_RULES, Rule
from tb_trainhealth.rules.numerics import check_nonfinite
from tb_trainhealth.signals import RunSignals

logger = logging.getLogger(__name__)


def diagnose(run: RunSignals, rules: tuple[Rule, ...] = ALL_RULES) -> list[Finding]:
    """All findings for a run, worst first then by onset. A failing rule never hides the others."""
    findings: list[Finding] = []
    dead = training_died_at(run)
    alive = run if dead is None else run.before(dead)
    for rule in rules:
        try:
            # Once the loss or the weights are NaN every later value is noise: only the
            # nonfinite rule looks past that point.
            findings.extend(rule(run if rule is check_nonfinite else alive))
        except Exception as err:  # a rule bug must not cost the user the other diagnoses
            logger.debug("rule %s failed on run %r", rule.__name__, run.run, exc_info=True)
            run.errors.append(f"rule {rule.__name__} failed: {err}")
    return sorted(findings, key=lambda f: (-f.severity, f.step if f.step is not None else -1, f.code))


def training_died_at(run: RunSignals) -> int | None:
    """First step whose loss or weights were non-finite, if any."""
    steps = [
        e["step"]
        for e in run.events
        if e.get("kind") == "nonfinite" and e.get("where") in ("loss", "weights") and isinstance(e.get("step"), int)
    ]
    for name in (sig.LOSS, sig.EPOCH_LOSS):
        series = run.get(name)
        if series is not None and not np.isfinite(series.values).all():
            steps.append(int(series.steps[np.argmax(~np.isfinite(series.values))]))
    return min(steps) if steps else None
