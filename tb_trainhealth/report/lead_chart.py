"""The chart at the top of a run's page: the one that shows its worst problem.

Per-layer gradient norms say nothing about an input-bound run or an OOM, and a loss curve
little about a NaN's origin: the first finding (worst first) picks the series, falling back
to its own evidence, then to the gradient norms or the loss of a run with no findings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import Finding
from tb_trainhealth.signals import RunSignals

# By finding code: the series to draw, in order of preference, each with the title that says
# what is drawn when it is the first of them the run has (only the series the run has are shown).
_MEMORY = ((sig.DEVICE_MEMORY_MB, "Memory in use (MB)"), (sig.HOST_MEMORY_MB, "Host memory in use (MB)"))
_INPUT = ((sig.INPUT_WAIT_MS, "Input wait vs step time (ms)"), (sig.STEP_TIME_MS, "Step time (ms)"))
_GRADIENTS = ((sig.LAYER_GRAD_NORM, "Gradient norm per layer"), (sig.GRAD_NORM, "Gradient norm (all layers)"))
LEADS: dict[str, tuple[tuple[str, str], ...]] = {
    Code.NONFINITE: _GRADIENTS,
    Code.EXPLODING_GRADIENTS: _GRADIENTS,
    Code.VANISHING_GRADIENTS: _GRADIENTS[:1],
    Code.INPUT_BOUND: _INPUT,
    Code.INPUT_PIPELINE_CONFIG: _INPUT,
    Code.OOM: _MEMORY,
    Code.MEMORY_GROWTH: _MEMORY,
    Code.TRAINING_STALLED: ((sig.STEP_TIME_MS, "Step time and input wait (ms)"), (sig.INPUT_WAIT_MS, "Input wait (ms)")),
    Code.OVERFITTING: (
        (sig.EPOCH_LOSS, "Training vs validation loss (per epoch)"),
        (sig.EPOCH_VAL_LOSS, "Validation loss"),
    ),
}
WORSE_THAN_BASELINE = Code.WORSE_THAN_BASELINE  # (compare.comparison.CODE: report/ sits below compare/)
DEFAULTS = (_GRADIENTS[:1], tuple((name, "Training loss") for name in sig.TRAINING_LOSSES))


def _present(run: RunSignals, names: tuple[str, ...]) -> list[str]:
    """The names the run has; of the training losses only the first it has (one loss line)."""
    out: list[str] = []
    for name in names:
        if name in sig.TRAINING_LOSSES and any(n in sig.TRAINING_LOSSES for n in out):
            continue
        if run.get(name) is not None or name in run.layer_series:
            out.append(name)
    return out


def _titled(run: RunSignals, choices: tuple[tuple[str, str], ...]) -> tuple[str, list[str]]:
    """(title of the first series the run has, every series of `choices` it has)."""
    shown = _present(run, tuple(name for name, _ in choices))
    title = next((title for name, title in choices if name in shown), "")
    return title, shown


def _has_nonfinite(run: RunSignals, names: list[str]) -> bool:
    found = (run.get(name) or run.layer_series.get(name) for name in names)
    return any(series is not None and not np.isfinite(series.values).all() for series in found)


def lead_chart(run: RunSignals, findings: list[Finding], baseline: str | None = None) -> dict[str, Any] | None:
    """{"title", "series", "code", "baseline"} for the top chart, or None when the run has nothing to
    plot. The title names what is drawn: a run without gradient data never gets a gradient title.
    `baseline`: a run of the same logdir that a leading worse_than_baseline finding was judged
    against; the chart then draws the two runs' comparison, as that finding's card does."""
    chart = _chart(run, findings)
    if chart is None:
        return None
    if chart["code"] == WORSE_THAN_BASELINE and baseline is not None:
        return {**chart, "title": f"This run against its baseline {baseline}", "baseline": baseline}
    return {**chart, "baseline": None}


def _chart(run: RunSignals, findings: list[Finding]) -> dict[str, Any] | None:
    if findings:
        worst = findings[0]
        title, shown = _titled(run, LEADS.get(worst.code, ()))
        if not shown:
            shown = _present(run, worst.evidence.series)
            title = ", ".join(shown)
        if shown:
            if worst.code == Code.NONFINITE and _has_nonfinite(run, shown):
                title += ", up to the first NaN/Inf"  # only where a drawn line has one
            return {"title": title, "series": shown, "code": worst.code}
    for choices in DEFAULTS:
        title, shown = _titled(run, choices)
        if shown:
            return {"title": title, "series": shown, "code": None}
    return None
