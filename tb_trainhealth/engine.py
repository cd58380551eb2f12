"""The rule engine: the same diagnosis online (in the callback) and offline (plugin, CLI)."""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.events import NonfiniteEvent
from tb_trainhealth.contract.vocab import NonfiniteWhere
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.rules import EXPLAINS, RULES, RuleSpec
from tb_trainhealth.rules.common_fixes import fit_to_run
from tb_trainhealth.signals import RunSignals

logger = logging.getLogger(__name__)
# Set (to anything) by the test suite: a rule that gives a code its spec does not declare fails the
# test at once. Elsewhere the finding is kept and the run says which rule is at fault.
STRICT_CODES_VARIABLE = "TB_TRAINHEALTH_STRICT_CODES"


class UndeclaredCode(AssertionError):
    """A rule gave a finding code its `RuleSpec.codes` does not list."""


def diagnose(run: RunSignals, rules: tuple[RuleSpec, ...] = RULES, final: bool = True) -> list[Finding]:
    """All findings for a run, worst first then by onset. A failing rule never hides the others.

    final: training has ended (offline, or the callback's last diagnosis); mid-run, rules
    that judge only the end are left out."""
    dead = training_died_at(run)
    alive = run if dead is None else run.before(dead)
    by_rule: list[tuple[RuleSpec, list[Finding]]] = []
    for rule in rules:
        if rule.final_only and not final:
            continue
        try:
            given = rule.check(run if rule.sees_past_nan else alive)
        except Exception as err:  # a rule bug must not cost the user the other diagnoses
            logger.debug("rule %s failed on run %r", rule.name, run.run, exc_info=True)
            run.errors.append(f"rule {rule.name} failed: {err}")
            continue
        stray = sorted({finding.code for finding in given} - set(rule.codes))
        if stray:
            message = f"rule {rule.name} gave code(s) {', '.join(stray)} its spec does not declare"
            if os.environ.get(STRICT_CODES_VARIABLE):
                raise UndeclaredCode(message)
            run.errors.append(message)
        by_rule.append((rule, given))
    found = [finding for _, findings in by_rule for finding in findings]
    findings = [
        finding
        for rule, findings in by_rule
        if not any(f.code in rule.defers_to and f.severity >= rule.defers_to[f.code] for f in found)
        for finding in findings
    ]
    findings = [fit_to_run(run, finding) for finding in findings]  # no fix for what the run already does
    findings = one_per_layer(findings)  # (one direction per setting is the run's plan's: advice/plan.py)
    if run.axis == sig.EPOCH_AXIS:  # `step` always means a batch step
        findings = [dataclasses.replace(f, step=None, epoch=f.step) for f in findings]
    return causes_first(sorted(findings, key=lambda f: (-f.severity, f.onset if f.onset is not None else -1, f.code)))


def causes_first(findings: list[Finding]) -> list[Finding]:
    """Each finding (a warning or worse) that explains an earlier one (`rules.EXPLAINS`) moves up
    to just before the first finding it explains; the others keep their order."""
    out = list(findings)
    for cause in [f for f in findings if f.severity >= Severity.WARNING and f.code in EXPLAINS]:
        at = out.index(cause)
        explained = [i for i, f in enumerate(out[:at]) if f.code in EXPLAINS[cause.code]]
        if explained:
            out.insert(explained[0], out.pop(at))
    return out


def one_per_layer(findings: list[Finding]) -> list[Finding]:
    """Two findings of one code that name the same layer (and check) are one finding: the more
    severe (then earlier) one, with the other's title in its detail and its fixes after its own."""
    kept: dict[tuple[str, str | None, str | None], Finding] = {}
    out: list[Finding] = []
    for finding in sorted(findings, key=lambda f: (-f.severity, f.onset if f.onset is not None else -1)):
        first = kept.get(finding.key) if finding.evidence.layer is not None else None
        if first is None:
            kept[finding.key] = finding
            out.append(finding)
            continue
        merged = dataclasses.replace(
            first,
            detail=f"{first.detail} Also: {finding.title}.",
            fixes=tuple(dict.fromkeys((*first.fixes, *finding.fixes))),
        )
        out[out.index(first)] = kept[finding.key] = merged
    return out


def training_died_at(run: RunSignals) -> int | None:
    """First step whose loss or weights were non-finite, if any."""
    steps = [e.step for e in run.events_of(NonfiniteEvent) if e.where in (NonfiniteWhere.LOSS, NonfiniteWhere.WEIGHTS)]
    for name in sig.TRAINING_LOSSES:
        series = run.get(name)
        if series is not None and not np.isfinite(series.values).all():
            steps.append(int(series.steps[np.argmax(~np.isfinite(series.values))]))
    return min(steps) if steps else None
