"""The verdict: is the run worse or better than the baseline by more than two seeds of one set-up
differ? The noise model is measured, not assumed: `bench/compare_zoo.py` trains several set-ups
over seeds and prints the largest seed-to-seed gaps these thresholds must clear.
"""

from __future__ import annotations

import dataclasses
import math

from tb_trainhealth.compare.curves import MetricPair
from tb_trainhealth.contract.events import Verdict

# Accuracy-like metrics (0..1): more than this apart, final and best, is more than seeds do.
# `python bench/compare_zoo.py`: the largest seed-to-seed gap of 4 seeds (6 pairs) of each of its
# set-ups was 0.013 (MLP), 0.000 (CNN), 0.025 (GRU); the benign changes moved it by up to 0.025.
# Set before the zoo's harmful pairs were run, not tuned on them; the harm it must see is 10 points.
ACCURACY_NOISE = 0.06
# Losses: more than this factor apart (a log ratio), final and best. Seeds of the zoo's regression
# differed by up to 1.07x in validation loss, its benign changes by up to 1.09x; harm is 2x.
LOSS_NOISE = math.log(1.6)
# ...unless both are this small against where the loss started: two runs that both drove the
# loss to 1e-4 of its start have converged alike, whatever their ratio.
CONVERGED_SHARE = 0.01
# Runs that differ in nothing but another draw of the same data (`resample.resampled`: a program
# that generates or splits its data at random, run with another seed) differ by more: the real-bug
# zoo's fixed programs against themselves with another seed (`python bench/compare_real_bugs.py`,
# 42 pairs) moved validation accuracy by up to 0.20 (an LSTM on 400 rows; MLPs up to 0.11) and the
# validation loss by up to 2.25x, where what their bugs cost is 0.27 and 3x or more.
DRAW_ACCURACY_NOISE = 0.25
DRAW_LOSS_NOISE = math.log(3.0)
# Runs whose losses cannot be compared (another loss function) are compared by how far each got
# below what a constant prediction scores under its own loss, as a share of it (`gain_over_constant`):
# the same zoo's seed twins differ by up to 0.23 there; a bug costs 0.44 or more.
GAIN_NOISE = 0.3
# Training-loss curves, step by step (each smoothed by a rolling median over ~4% of the run, as they
# are compared and drawn): where a run's stays more than this factor from the baseline's (a log ratio),
# their curves have parted. Two seeds of one MLP land up to 1.21x apart along the curve (`python
# bench/compare_zoo.py --only mlp`, "curve noise"; the demo's MLP, 5 seeds: 1.27x), per epoch 1.05x.
# A set-up whose loss drops fast at a seed-dependent step lands further apart there (the zoo's CNN
# 2.4x, GRU 1.9x, regression 1.4x), but a parting step is only looked for once the verdict says worse
# or better. The verdict's LOSS_NOISE (1.6x, for final and best values) put the parting of a run with a
# rate 1000x too small at step 139 where the curves split near step 40 (now 74).
CURVE_NOISE = math.log(1.35)


@dataclasses.dataclass(frozen=True)
class Noise:
    """How far apart two runs of one set-up land, and what that estimate is (said in the verdict)."""

    accuracy: float
    loss: float  # a log ratio
    source: str


SEEDS = Noise(ACCURACY_NOISE, LOSS_NOISE, "two seeds of one set-up")
DRAWS = Noise(
    DRAW_ACCURACY_NOISE, DRAW_LOSS_NOISE, "two draws of the same data with two seeds (only the data's sample differs)"
)


@dataclasses.dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    metric: MetricPair | None  # the metric that decided
    why: str  # one line, with the numbers
    noise: Noise = SEEDS  # the noise it was judged against (drawn around the baseline's curves)


def judge(
    metrics: list[MetricPair], loss_start: float | None, losses_comparable: bool = True, noise: Noise = SEEDS
) -> Judgement:
    """The verdict on the one metric that decides, the first of `metrics` (most telling first)
    that is an accuracy, else the first loss: worse or better only where final AND best both
    moved past the noise the same way. Losses of different loss functions (label smoothing, a new
    loss) are not comparable: then only an accuracy decides.

    loss_start: the baseline's first loss, the scale against which a tiny loss counts as converged.
    noise: how far apart runs of one set-up land (seeds, or draws of the data too)."""
    deciding = deciding_metric(metrics, losses_comparable)
    if deciding is None:
        why = (
            "the runs share no metric"
            if not metrics
            else "the runs' losses do not compare (another loss, or targets of another scale) and they log no accuracy"
        )
        return Judgement(Verdict.UNKNOWN, None, why)
    final = _gap(deciding, deciding.baseline_final, deciding.run_final, loss_start, noise)
    best = _gap(deciding, deciding.baseline_best, deciding.run_best, loss_start, noise)
    if final > 0 and best > 0:
        return Judgement(Verdict.WORSE, deciding, _describe(deciding, "worse than"), noise)
    if final < 0 and best < 0:
        return Judgement(Verdict.BETTER, deciding, _describe(deciding, "better than"), noise)
    band = f"{noise.accuracy:.2g}" if deciding.higher_is_better else f"{math.exp(noise.loss):.2g}x"
    return Judgement(
        Verdict.SAME,
        deciding,
        _describe(deciding, "within run-to-run noise of") + f" (noise: up to {band} between {noise.source})",
        noise,
    )


def deciding_metric(metrics: list[MetricPair], losses_comparable: bool = True) -> MetricPair | None:
    """The metric a verdict is judged on (see `judge`), or None where none can decide."""
    accuracies = [pair for pair in metrics if pair.higher_is_better]
    return accuracies[0] if accuracies else (metrics[0] if metrics and losses_comparable else None)


def judge_gains(run_gain: float, baseline_gain: float) -> Judgement:
    """Runs under different losses, by how far each got below a constant prediction's loss."""
    shown = f"{run_gain:.0%} below a constant prediction's loss, against the baseline's {baseline_gain:.0%}"
    if baseline_gain - run_gain > GAIN_NOISE:
        return Judgement(Verdict.WORSE, None, f"under their own losses, the run got {shown}")
    if run_gain - baseline_gain > GAIN_NOISE:
        return Judgement(Verdict.BETTER, None, f"under their own losses, the run got {shown}")
    return Judgement(Verdict.SAME, None, f"under their own losses, the run got {shown}: within run-to-run noise")


def _gap(pair: MetricPair, baseline: float, run: float, loss_start: float | None, noise: Noise) -> int:
    """+1: the run is worse beyond the noise; -1: better beyond it; 0: within it."""
    if not math.isfinite(run) and not math.isfinite(baseline):
        return 0
    if not math.isfinite(run):
        return 1
    if not math.isfinite(baseline):
        return -1
    if pair.higher_is_better:
        difference = baseline - run
        return 1 if difference > noise.accuracy else -1 if difference < -noise.accuracy else 0
    if loss_start is not None and loss_start > 0 and max(run, baseline) < CONVERGED_SHARE * loss_start:
        return 0
    ratio = math.log(max(run, 1e-12) / max(baseline, 1e-12))
    return 1 if ratio > noise.loss else -1 if ratio < -noise.loss else 0


def _describe(pair: MetricPair, how: str) -> str:
    return (
        f"{pair.name} {_number(pair.run_final)} (best {_number(pair.run_best)}) is {how} the baseline's "
        f"{_number(pair.baseline_final)} (best {_number(pair.baseline_best)})"
    )


def _number(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "NaN"
