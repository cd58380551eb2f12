"""The chart at the top of a run's page: the one that shows its worst problem.

Per-layer gradient norms say nothing about an input-bound run or an OOM, and a loss curve
little about a NaN's origin: the first finding (worst first) picks the series, falling back
to its own evidence, then to the gradient norms or the loss of a run with no findings.
"""

from __future__ import annotations

from typing import Any

from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import Finding
from tb_trainhealth.signals import RunSignals

# (title, series in order of preference) by finding code; only the series the run has are shown.
LEADS: dict[str, tuple[str, tuple[str, ...]]] = {
    "nonfinite": ("Gradient norm per layer, up to the first NaN/Inf", (sig.LAYER_GRAD_NORM, sig.GRAD_NORM)),
    "exploding_gradients": ("Gradient norm per layer", (sig.LAYER_GRAD_NORM, sig.GRAD_NORM)),
    "vanishing_gradients": ("Gradient norm per layer", (sig.LAYER_GRAD_NORM,)),
    "input_bound": ("Input wait vs step time (ms)", (sig.INPUT_WAIT_MS, sig.STEP_TIME_MS)),
    "input_pipeline_config": ("Input wait vs step time (ms)", (sig.INPUT_WAIT_MS, sig.STEP_TIME_MS)),
    "oom": ("Memory in use (MB)", (sig.DEVICE_MEMORY_MB, sig.HOST_MEMORY_MB)),
    "memory_growth": ("Memory in use (MB)", (sig.DEVICE_MEMORY_MB, sig.HOST_MEMORY_MB)),
    "training_stalled": ("Step time and input wait (ms)", (sig.STEP_TIME_MS, sig.INPUT_WAIT_MS)),
    "overfitting": ("Training vs validation loss (per epoch)", (sig.EPOCH_LOSS, sig.EPOCH_VAL_LOSS)),
}
DEFAULT = ("Gradient norm per layer", (sig.LAYER_GRAD_NORM,))


def _present(run: RunSignals, names: tuple[str, ...]) -> list[str]:
    """The names the run has; of the training losses only the first it has (one loss line)."""
    out: list[str] = []
    for name in names:
        if name in sig.TRAINING_LOSSES and any(n in sig.TRAINING_LOSSES for n in out):
            continue
        if run.get(name) is not None or name in run.layer_series:
            out.append(name)
    return out


def lead_chart(run: RunSignals, findings: list[Finding]) -> dict[str, Any] | None:
    """{"title", "series", "code"} for the top chart, or None when the run has nothing to plot."""
    if findings:
        worst = findings[0]
        title, names = LEADS.get(worst.code, ("", worst.evidence.series))
        shown = _present(run, names) or _present(run, worst.evidence.series)
        if shown:
            return {"title": title or ", ".join(shown), "series": shown, "code": worst.code}
    for title, names in (DEFAULT, ("Training loss", sig.TRAINING_LOSSES)):
        shown = _present(run, names)
        if shown:
            return {"title": title, "series": shown, "code": None}
    return None
