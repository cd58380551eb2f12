"""Small robust statistics shared by the rules and by `compare`. NaN/Inf-safe, empty-safe, numpy only."""

from __future__ import annotations

import bisect
import warnings

import numpy as np

from tb_trainhealth.signals import Series


def finite_part(series: Series) -> Series:
    keep = np.isfinite(series.values)
    return Series(series.steps[keep], series.values[keep])


def rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """Centered rolling median; windows shrink at the edges (never repeat an edge point,
    which would let one lucky last batch decide the end level). Window 1 returns a copy."""
    n = len(values)
    if window <= 1 or n == 0:
        return values.astype(np.float64, copy=True)
    half = window // 2
    if n * (2 * half + 1) > _SORTED_WINDOW_ABOVE and np.isfinite(values).all():
        return _rolling_median_sorted(values.astype(np.float64).tolist(), half)
    padded = np.pad(values.astype(np.float64), half, mode="constant", constant_values=np.nan)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    middle = np.median(windows[half : n - half], axis=1) if n > 2 * half else np.empty(0)
    edge_rows = np.r_[0 : min(half, n), max(half, n - half) : n]
    with warnings.catch_warnings():  # NaN-padded edge windows always hold a real point
        warnings.simplefilter("ignore", RuntimeWarning)
        edges = np.nanmedian(windows[edge_rows], axis=1)
    head, tail = edges[: min(half, n)], edges[min(half, n) :]
    return np.concatenate([head, middle, tail])


# Above this many window elements in all, a window kept sorted (O(n log w), a Python step per
# point) is cheaper than numpy's median of every window (O(n w)). Same numbers: each median is the
# middle element, or the mean of the two middle ones, of the same values.
_SORTED_WINDOW_ABOVE = 20_000


def _rolling_median_sorted(values: list[float], half: int) -> np.ndarray:
    """rolling_median of finite values: out[i] = median(values[i - half : i + half + 1])."""
    n = len(values)
    window = sorted(values[: min(half, n)])
    out = np.empty(n)
    for i in range(n):
        if i + half < n:
            bisect.insort(window, values[i + half])
        if i - half - 1 >= 0:
            del window[bisect.bisect_left(window, values[i - half - 1])]
        k = len(window)
        out[i] = window[k // 2] if k % 2 else (window[k // 2 - 1] + window[k // 2]) / 2
    return out


# Per-step losses carry minibatch noise; a rolling median over at least this many
# points removes single lucky/unlucky batches. Per-epoch means are already smooth.
MIN_NOISY_WINDOW = 5


def trailing_percentile(values: np.ndarray, window: int, q: float = 50.0) -> np.ndarray:
    """out[i] = the q-th percentile of the (up to) `window` points before i; NaN for i = 0. Vectorised."""
    n = len(values)
    out = np.full(n, np.nan)
    if n < 2 or window < 1:
        return out
    padded = np.concatenate([np.full(window, np.nan), values.astype(np.float64)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, window)[:n]  # windows[i] = values[i-window:i]
    full = min(window, n)
    out[1:full] = _nanpercentile_rows(windows[1:full], q)
    out[full:] = np.percentile(windows[full:], q, axis=1)
    return out


def _nanpercentile_rows(rows: np.ndarray, q: float) -> np.ndarray:
    """np.nanpercentile(rows, q, axis=1) (linear interpolation) for rows with at least one
    value, in one sort: numpy's own loops over the rows in Python when any holds a NaN."""
    if rows.size == 0:
        return np.empty(len(rows))
    valid = (~np.isnan(rows)).sum(axis=1)
    ordered = np.sort(np.where(np.isnan(rows), np.inf, rows), axis=1)  # the NaNs last
    position = (valid - 1) * (q / 100.0)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, valid - 1)
    take = np.arange(len(rows))
    below, above = ordered[take, low], ordered[take, high]
    fraction = position - low
    with np.errstate(invalid="ignore"):  # numpy's own interpolation, inf - inf and all
        step = above - below
        return np.where(fraction >= 0.5, above - step * (1 - fraction), below + step * fraction)


def smoothing_window(n: int, noisy: bool = True) -> int:
    """Window that removes minibatch noise but keeps shape: ~4% of the points, odd."""
    return max(MIN_NOISY_WINDOW if noisy else 1, (n // 25) | 1)


def head_level(values: np.ndarray) -> float:
    """Where the series started: median of its first 5% (at least 1, at most 20 points)."""
    k = int(np.clip(len(values) // 20, 1, 20))
    return float(np.median(values[:k]))


def tail_level(values: np.ndarray) -> float:
    """Where the series ended: median of its last 10% (at least 1 point)."""
    k = max(1, len(values) // 10)
    return float(np.median(values[-k:]))


def relative_spread(values: np.ndarray) -> float:
    """Inter-quartile range relative to the median magnitude (inf when the median is 0)."""
    if len(values) == 0:
        return 0.0
    q25, q50, q75 = np.percentile(values, [25, 50, 75])
    if q50 == 0:
        return 0.0 if q75 == q25 else float("inf")
    return float((q75 - q25) / abs(q50))


def relative_noise(values: np.ndarray) -> float:
    """Point-to-point noise as a fraction of the local level (robust: MAD around a rolling median)."""
    if len(values) < 3:
        return 0.0
    level = rolling_median(values, smoothing_window(len(values)))
    with np.errstate(divide="ignore", invalid="ignore"):
        residual = values / level - 1.0
    residual = residual[np.isfinite(residual)]
    if len(residual) == 0:
        return 0.0
    return float(1.4826 * np.median(np.abs(residual - np.median(residual))))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 of the values, tied values sharing the mean of their ranks (NaNs rank last,
    each on its own)."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # first index of each tie group
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values))
    ranks[order] = np.repeat((starts + ends - 1) / 2.0, ends - starts)
    return ranks


def rank_correlation(values: np.ndarray) -> float:
    """Spearman correlation of the values with their order: 1 = always rising, 0 = no trend.

    Ties share their average rank (a flat stretch is no trend, a constant series scores 0),
    so a one-off jump followed by a flat line is not scored as a steady rise."""
    if len(values) < 2:
        return 0.0
    ranks = average_ranks(values)
    if ranks.std() == 0:
        return 0.0
    return float(np.corrcoef(np.arange(len(values), dtype=np.float64), ranks)[0, 1])
