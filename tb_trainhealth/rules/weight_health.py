"""Update ratio ||dw|| / ||w||: how far each step moves the weights, relative to their size.

Not a finding of its own: it sharpens the learning-rate diagnoses. CS231n's rule of
thumb (Karpathy) puts a healthy ratio around 1e-3. Measured on the demo runs
(`bench/rule_zoo.py` scenarios, second half of each run, median over layers):
healthy runs 2.6e-4 to 8.7e-4 (max 1.5e-3), the learning-rate-too-high oscillation
run 0.34-0.47, the learning-rate-too-low plateau run 3.5e-7.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.signals import RunSignals

# Above this the steps are too large to settle (7x above the largest healthy value measured).
HIGH_UPDATE_RATIO = 1e-2
MIN_SAMPLES = 3


def update_ratio_level(run: RunSignals) -> float | None:
    """Typical update ratio over the second half of the run's steps (median over layers, then
    samples). By step, not by sample: the callback samples a fit's first steps more densely."""
    ratios = run.layer_series.get(sig.LAYER_UPDATE_RATIO)
    if ratios is None or len(ratios.steps) < MIN_SAMPLES:
        return None
    late = ratios.values[ratios.steps >= (ratios.steps[0] + ratios.steps[-1]) / 2]
    with np.errstate(all="ignore"):
        late = np.where(np.isfinite(late) & (late > 0), late, np.nan)
    late = late[np.isfinite(late).any(axis=1)]  # (a sample with no finite ratio has no median: NaN weights)
    per_sample = np.nanmedian(late, axis=1) if late.size else np.array([])
    return float(np.median(per_sample)) if per_sample.size else None
