"""Are two runs the same experiment on another draw of the same data? Then a gap between them is
what seeds do, and it is judged against the noise seeds show, not against a change.

Two runs of one program whose data is drawn at random (a generated set, a random split, a
shuffled subset) differ in every data fingerprint, yet nothing the user changed is in them. They
are a resample when every change is a data statistic that moved no more than another draw moves
it: the same sample counts, class shares within sampling error, targets' mean and spread and the
inputs' mean and spread within a small share of their scale, and the inputs and labels changing
together (labels changed on the same inputs are a label change, inputs changed under the same
labels a preprocessing change). With no change at all the runs are seed twins too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from tb_trainhealth.compare.settings_diff import Change
from tb_trainhealth.contract.run_settings import DATA, ENVIRONMENT

# Fingerprints of the data set as a whole: a new draw changes both.
FINGERPRINTS = ("train_inputs", "train_labels")
# Counts: another draw of the same program keeps them.
COUNTS = ("train_samples", "validation_samples")
# Class shares (and targets' mean and spread): another draw moves them by their sampling error;
# beyond SAMPLING_ERRORS of it (for the difference of two draws of that many rows), or SHARE_MOVE
# where that is smaller, they are another mix.
SAMPLING_ERRORS = 4.0
SHARE_MOVE = 0.06
# The targets' mean (or the inputs' mean) within this share of their standard deviation, and the
# standard deviation within this ratio: the real-bug zoo's seed twins move by up to 0.08 std, and
# their spread by up to 1.30x (heavy-tailed quintic targets, 400 validation rows:
# dm_linear_layers_polynomial, `python bench/compare_real_bugs.py`); rescaled inputs or targets
# move by factors (x255, x1000).
MEAN_MOVE = 0.25
SPREAD_RATIO = 1.35
# Shares of distinct and duplicated rows: another draw moves them by a point or two.
DUPLICATE_MOVE = 0.05


def resampled(changes: Sequence[Change], baseline: Mapping[str, object]) -> bool:
    """At least one data statistic changed, and every change is one another draw of the same data
    makes. `baseline`: the baseline's recorded settings (sample counts, the inputs' spread)."""
    data = [c for c in changes if c.setting not in ENVIRONMENT]
    if not data or any(c.setting not in DATA for c in data):
        return False
    changed = {c.setting for c in data}
    if sum(name in changed for name in FINGERPRINTS) == 1:
        return False  # one side of the data changed, the other did not: an edit, not a draw
    return all(_within_a_draw(c, baseline) for c in data if c.setting not in FINGERPRINTS)


def targets_rescaled(changes: Sequence[Change]) -> bool:
    """The regression targets moved to another scale (their mean or spread beyond what a draw moves
    them): a squared or absolute error then measures another yardstick, and two runs' losses do not
    compare (a program whose data generator draws its slope from the seed: R^2 0.996 and 0.998, and
    validation MSE 3.5 against 0.39; `python bench/compare_real_bugs.py --twin-seed 2`)."""
    for change in changes:
        before, after = change.baseline, change.run
        if change.setting != "label_distribution" or not (isinstance(before, list) and isinstance(after, list)):
            continue
        regression = len(before) == len(after) == 2 and all(_numbers(v) for v in before + after)
        if regression and not _shares(before, after) and not _distribution_close(before, after, None):
            return True
    return False


def _within_a_draw(change: Change, baseline: Mapping[str, object]) -> bool:
    name, before, after = change.setting, change.baseline, change.run
    if name in COUNTS:
        return False
    if name in ("label_distribution", "validation_label_distribution"):
        rows = baseline.get("validation_samples" if name.startswith("validation") else "train_samples")
        return _distribution_close(before, after, float(rows) if _numbers(rows) and rows > 0 else None)
    if name == "input_std":
        return _numbers(before, after) and _ratio(before, after) <= SPREAD_RATIO
    if name == "input_mean":
        spread = baseline.get("input_std")
        scale = (
            spread
            if _numbers(spread) and spread > 0
            else max(abs(before), abs(after))
            if _numbers(before, after)
            else 0
        )
        return _numbers(before, after) and abs(after - before) <= MEAN_MOVE * scale
    if name in ("distinct_input_share", "duplicate_label_conflict", "duplicate_label_ceiling"):
        return _numbers(before, after) and abs(after - before) <= DUPLICATE_MOVE
    return False  # the input shape or dtype: another data set


def _distribution_close(before: object, after: object, rows: float | None) -> bool:
    """Class shares, or regression targets' [mean, std], as close as two draws of `rows` rows get."""
    if not (isinstance(before, list) and isinstance(after, list)) or len(before) != len(after) or not before:
        return False
    if not all(_numbers(a, b) for a, b in zip(before, after)):
        return False
    if len(before) == 2 and not _shares(before, after):
        mean, spread = before
        # Two draws' means differ by ~spread * sqrt(2 / rows), their spreads by ~spread / sqrt(rows).
        errors = SAMPLING_ERRORS / math.sqrt(rows) if rows else 0.0
        return (
            spread > 0
            and abs(after[0] - mean) <= max(MEAN_MOVE, errors * math.sqrt(2)) * spread
            and _ratio(spread, after[1]) <= max(SPREAD_RATIO, 1 + errors)
        )
    for old, new in zip(before, after):
        error = math.sqrt(2 * max(old * (1 - old), 1e-4) / rows) if rows else 0.0
        if abs(new - old) > max(SHARE_MOVE, SAMPLING_ERRORS * error):
            return False
    return True


def _shares(before: list[float], after: list[float]) -> bool:
    values = before + after
    return min(values) >= 0 and max(values) <= 1 and abs(sum(before) - 1) < 0.02


def _numbers(*values: object) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values)


def _ratio(a: float, b: float) -> float:
    a, b = abs(a), abs(b)
    return max(a, b) / max(min(a, b), 1e-12)
