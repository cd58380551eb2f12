"""The data section of `RunSettings`: how much data, its shape and scale, its labels, and two
order-free fingerprints that tell "the same data set" from "a changed one".

Only what can be read without touching the user's pipeline: full statistics and fingerprints
where the fit's data are in-memory arrays (numpy, eager tensors, pandas), found in `fit`'s own
locals (`keras_private.fit_data`); for tf.data and generators only what the adapter or the
dataset's `element_spec` says (sample count where batches are counted and of a fixed size,
per-sample shape and dtype). Nothing is guessed: what is not known is absent.

Fingerprints. Each sample's inputs (all input arrays, flattened and put side by side) are
projected in float64 on a fixed pseudo-random direction `r` (seed `FINGERPRINT_SEED`):
`p_i = x_i . r`. Then
    train_inputs = mean_i (p_i + 1)^2
    train_labels = mean_i (1 + (p_i + 1)^2) * (2 + sin(l_i . s))
with `l_i` the sample's labels flattened and `s` another fixed direction. Both are sums over
samples, so any order of the same samples gives the same value (to float64 rounding: every
term is positive, nothing cancels, ~1e-12 relative); a label moved to another sample changes
`train_labels`, since each sample weighs its label by its own projection.

Cost: one pass over the arrays in chunks that stay in cache (`CHUNK_BYTES`). Above
`MAX_FINGERPRINT_VALUES` values only every k-th feature column is read (a fixed stride over
the features, the same for every sample; MNIST's 60,000 x 784 reads every 12th pixel, ~20 ms
on 2 busy CPU cores against ~60 ms for all of it: `bench/run_settings_cost.py`). Not a stride
over rows: that would not be order-free, a shuffled copy puts other samples on the strided
rows. The input mean and std come from the same columns there: an estimate, the same one for
the same data (exact below the limit).

Validation labels (`validation_label_distribution`, the format of `label_distribution`) from
fit's `val_y` where it is an in-memory array (validation_data or validation_split).

Duplicates, for class labels only (`distinct_input_share`, `duplicate_label_conflict`,
`duplicate_label_ceiling`): the pass's projections `p_i` (rounded, `projection_key`) are sorted
to find candidate rows, those whose key repeats; only the candidates' rows are then read again
and projected on a second direction (every feature, or beyond MAX_FINGERPRINT_VALUES values
every k-th on another grid than the pass's), so rows that differ in features the pass skipped
are not called duplicates. Rows count as one when both keys agree: equal to ~1e-9 relative,
two random directions apart. Data without duplicates pays one sort of n keys (MNIST-sized,
60,000 x 784: the pass takes 15 ms instead of 12); data with many reads its duplicated rows once
more (a third of those rows copies: 41 ms). Above MAX_DUPLICATE_ROWS samples the duplicate
settings are left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from tb_trainhealth.callback.frameworks.keras_private import adapter_dataset
from tb_trainhealth.contract.vocab import CATEGORICAL_LOSSES, REGRESSION_LOSSES, LossKind

FINGERPRINT_SEED = 20240917
# Rows per chunk are chosen so that one float64 chunk is about this size (stays in cache).
CHUNK_BYTES = 1 << 20
# Above this many input values (samples x features) only every k-th feature is read (k as needed).
MAX_FINGERPRINT_VALUES = 1 << 22
# Label distributions of more classes than this are left out (the contract caps lists at 1000).
MAX_CLASSES = 1000
SHARE_DECIMALS = 4
# Above this many samples the duplicate settings are left out: sorting their keys takes ~3 ms for
# 60,000 samples, ~55 ms at this size (2 shared cores).
MAX_DUPLICATE_ROWS = 1 << 20
# Significant bits of a row's projection kept in its duplicate key (of float64's 52).
KEY_BITS = 32
# Odd 64-bit multiplier (2^64 / golden ratio) that joins a row's two projection keys into one.
KEY_MIX = np.uint64(0x9E3779B97F4A7C15)


def data_settings(fit_data: dict[str, Any], adapter: Any, loss_kind: LossKind | None) -> dict[str, Any]:
    """`train_samples`, `validation_samples`, `input_shape`, `input_dtype`, `input_mean`,
    `input_std`, `label_distribution`, `validation_label_distribution`, `train_inputs`,
    `train_labels`, and for class labels the duplicate settings, where known."""
    out: dict[str, Any] = {}
    inputs, labels = host_arrays(fit_data.get("x")), host_arrays(fit_data.get("y"))
    if inputs is not None:
        paired = labels if labels is not None and same_rows(inputs, labels) else None
        out.update(describe_arrays(inputs))
        out.update(array_statistics(inputs, paired, class_labels(paired, loss_kind)))
    else:
        out.update(streamed_data(adapter))
    if labels is not None:
        out.update(label_distribution(labels, loss_kind))
    validation = host_arrays(fit_data.get("val_x"))
    if validation is not None:
        out["validation_samples"] = int(validation[0].shape[0])
    out.update(validation_labels(host_arrays(fit_data.get("val_y")), loss_kind))
    return out


# -- in-memory arrays -------------------------------------------------------------------------


def host_arrays(data: Any) -> list[np.ndarray] | None:
    """Every array of `data` (one, or a list / dict of them) on the host; None unless all are
    in memory (a dataset, generator or ragged tensor is not) with the same number of rows."""
    if data is None:
        return None
    leaves = tf.nest.flatten(data)
    arrays = [_host_array(leaf) for leaf in leaves]
    if not arrays or any(a is None or a.ndim == 0 for a in arrays):
        return None
    return arrays if len({a.shape[0] for a in arrays}) == 1 else None


def _host_array(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, tf.Tensor) and hasattr(value, "numpy"):  # eager, not ragged / sparse
        return value.numpy()
    to_numpy = getattr(value, "to_numpy", None)  # pandas
    if callable(to_numpy) and hasattr(value, "shape"):
        return np.asarray(to_numpy())
    return None


def same_rows(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return a[0].shape[0] == b[0].shape[0]


def describe_arrays(arrays: list[np.ndarray]) -> dict[str, Any]:
    shapes = [str(tuple(int(n) for n in a.shape[1:])) for a in arrays]
    return {
        "train_samples": int(arrays[0].shape[0]),
        "input_shape": ", ".join(shapes),
        "input_dtype": ", ".join(str(a.dtype) for a in arrays),
    }


def _numeric(arrays: list[np.ndarray]) -> bool:
    return all(np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_ for a in arrays)


def array_statistics(
    inputs: list[np.ndarray], labels: list[np.ndarray] | None, duplicates: bool = False
) -> dict[str, Any]:
    """Input mean / std and the fingerprints, in one chunked float64 pass (see the module doc);
    with `duplicates` (class labels), the duplicate settings from the same pass's projections.
    NaN/Inf in the data (a finding of its own) make a statistic non-finite, then dropped: quietly."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _array_statistics(inputs, labels, duplicates)


def _array_statistics(inputs: list[np.ndarray], labels: list[np.ndarray] | None, duplicates: bool) -> dict[str, Any]:
    if not _numeric(inputs) or inputs[0].shape[0] == 0:
        return {}
    labels = labels if labels is not None and _numeric(labels) else None
    rows = inputs[0].shape[0]
    stride = feature_stride(rows, sum(_features(a) for a in inputs))
    label_stride = feature_stride(rows, sum(_features(a) for a in labels)) if labels is not None else 1
    keyed = duplicates and labels is not None and label_stride == 1 and rows <= MAX_DUPLICATE_ROWS
    keys: list[np.ndarray] = []
    moments = np.zeros(3)  # count, sum, sum of squares
    input_print, label_print = 0.0, 0.0
    direction: np.ndarray | None = None
    label_direction: np.ndarray | None = None
    for start, stop in _chunks(rows, inputs, stride):
        block = _block(inputs, start, stop, stride)
        if direction is None:
            direction = _direction(block.shape[1], FINGERPRINT_SEED)
        moments += (block.size, block.sum(), np.einsum("ij,ij->", block, block))
        projected = block @ direction
        shifted = (projected + 1.0) ** 2
        input_print += float(shifted.sum())
        if labels is not None:
            label_block = _block(labels, start, stop, label_stride)
            if label_direction is None:
                label_direction = _direction(label_block.shape[1], FINGERPRINT_SEED + 1, scale=1.0)
            label_projected = label_block @ label_direction
            label_print += float(((1.0 + shifted) * (2.0 + np.sin(label_projected))).sum())
            if keyed:
                keys.append(np.stack([projection_key(projected), projection_key(label_projected)]))
    out = _moments(moments) | {"train_inputs": input_print / rows}
    if labels is not None:
        out["train_labels"] = label_print / rows
    out = {key: value for key, value in out.items() if math.isfinite(value)}
    if keyed and math.isfinite(input_print):  # (NaN rows would all share one key)
        both = np.concatenate(keys, axis=1)
        out.update(duplicate_settings(both[0], both[1], inputs))
    return out


def feature_stride(rows: int, features: int) -> int:
    """1 below MAX_FINGERPRINT_VALUES values, else the feature stride that reads about that many."""
    return max(1, math.ceil(rows * features / MAX_FINGERPRINT_VALUES))


def _features(array: np.ndarray) -> int:
    return int(np.prod(array.shape[1:], dtype=np.int64))


def _chunks(rows: int, arrays: list[np.ndarray], stride: int) -> Iterator[tuple[int, int]]:
    width = max(1, sum(_features(a) for a in arrays) // stride)
    step = max(1, CHUNK_BYTES // (8 * width))
    for start in range(0, rows, step):
        yield start, min(rows, start + step)


def _block(arrays: list[np.ndarray], start: int, stop: int, stride: int) -> np.ndarray:
    """Rows start:stop of every array, flattened per sample, side by side, in float64."""
    parts = [a[start:stop].reshape(stop - start, -1) for a in arrays]
    whole = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
    return whole[:, ::stride].astype(np.float64)


def _direction(size: int, seed: int, scale: float | None = None) -> np.ndarray:
    """A fixed pseudo-random direction; of norm ~1 (inputs) or unit entries' scale (labels)."""
    vector = np.random.default_rng(seed).standard_normal(size)
    return vector * (scale if scale is not None else 1.0 / math.sqrt(max(size, 1)))


def _moments(moments: np.ndarray) -> dict[str, float]:
    count, total, squares = moments
    if count == 0:
        return {}
    mean = total / count
    return {"input_mean": float(mean), "input_std": float(math.sqrt(max(squares / count - mean * mean, 0.0)))}


# -- duplicates ---------------------------------------------------------------------------------


def projection_key(projected: np.ndarray) -> np.ndarray:
    """A sortable key from each row's fingerprint projection, its float64 bits rounded to
    KEY_BITS significant bits: BLAS gives equal rows projections a few ulps apart now and then
    (measured: 5 of 80,000 repeated 784-feature rows), never 2^-KEY_BITS apart."""
    bits = (projected + 0.0).view(np.uint64)  # (+ 0.0: -0.0 becomes 0.0)
    dropped = np.uint64(52 - KEY_BITS)
    return ((bits + (np.uint64(1) << (dropped - np.uint64(1)))) >> dropped).astype(np.uint64)


def duplicate_settings(keys: np.ndarray, label_keys: np.ndarray, inputs: list[np.ndarray]) -> dict[str, Any]:
    """`distinct_input_share` (distinct input rows / samples), `duplicate_label_conflict` (share of
    samples whose input row also occurs with another label) and `duplicate_label_ceiling` (the
    highest training accuracy those labels allow: each input row's most frequent label right).
    `keys` only find candidates; a second projection of the candidates' rows decides."""
    rows = len(keys)
    candidates = repeated(keys)
    both = keys[candidates] * KEY_MIX + candidate_keys(inputs, candidates) if candidates.size else keys[:0]
    distinct, conflicting, unfittable = label_groups(both, label_keys[candidates])
    return {
        "distinct_input_share": round((rows - candidates.size + distinct) / rows, SHARE_DECIMALS),
        "duplicate_label_conflict": round(conflicting / rows, SHARE_DECIMALS),
        "duplicate_label_ceiling": round(1.0 - unfittable / rows, SHARE_DECIMALS),
    }


def candidate_keys(inputs: list[np.ndarray], candidates: np.ndarray) -> np.ndarray:
    """The candidates' rows projected on another direction (`projection_key`), chunk by chunk:
    every feature, or above MAX_FINGERPRINT_VALUES values every k-th one of each array from
    k // 2 on, another grid than the pass read (two rows must agree on both to count as one)."""
    stride = feature_stride(candidates.size, sum(_features(a) for a in inputs))
    direction: np.ndarray | None = None
    keys = []
    for start, stop in _chunks(candidates.size, inputs, stride):
        rows = candidates[start:stop]
        # The chunk's whole rows (one copy, whatever the array's layout), then the grid.
        parts = [a[rows].reshape(rows.size, -1)[:, stride // 2 :: stride] for a in inputs]
        block = (parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)).astype(np.float64)
        if direction is None:
            direction = _direction(block.shape[1], FINGERPRINT_SEED + 2)
        keys.append(projection_key(block @ direction))
    return np.concatenate(keys)


def repeated(keys: np.ndarray) -> np.ndarray:
    """Positions (ascending) of the keys that occur more than once."""
    ordered = np.sort(keys)  # (a plain sort first: ~1.5x faster than argsort, and usually all it takes)
    if not (ordered[1:] == ordered[:-1]).any():
        return np.zeros(0, np.int64)
    order = np.argsort(keys, kind="stable")
    same = ordered[1:] == ordered[:-1]
    return np.sort(order[np.r_[same, False] | np.r_[False, same]])


def label_groups(keys: np.ndarray, label_keys: np.ndarray) -> tuple[int, int, int]:
    """For samples grouped by input key: (groups, samples in groups with more than one label,
    samples no model can fit: each group's size minus its most frequent label's count)."""
    if keys.size == 0:
        return 0, 0, 0
    order = np.lexsort((label_keys, keys))
    key, label = keys[order], label_keys[order]
    new_group = np.r_[True, key[1:] != key[:-1]]
    new_pair = new_group | np.r_[True, label[1:] != label[:-1]]
    group = np.cumsum(new_group) - 1
    labels_per_group = np.bincount(group[new_pair])
    pair_sizes = np.bincount(np.cumsum(new_pair) - 1)
    most = np.zeros(group[-1] + 1, np.int64)
    np.maximum.at(most, group[new_pair], pair_sizes)
    conflicting = int((labels_per_group[group] > 1).sum())
    return int(group[-1] + 1), conflicting, int(keys.size - most.sum())


# -- labels -----------------------------------------------------------------------------------


def class_labels(labels: list[np.ndarray] | None, loss_kind: LossKind | None) -> bool:
    """Whether `labels` are one array of class labels (ids, one-hot rows or 0/1), not regression targets."""
    if labels is None or len(labels) != 1 or not _numeric(labels) or labels[0].size == 0:
        return False
    return not _regression(labels[0], loss_kind)


def _regression(values: np.ndarray, loss_kind: LossKind | None) -> bool:
    integer = np.issubdtype(values.dtype, np.integer) or values.dtype == np.bool_
    return loss_kind in REGRESSION_LOSSES or (loss_kind is None and not integer)


def label_distribution(labels: list[np.ndarray], loss_kind: LossKind | None) -> dict[str, Any]:
    """Class shares (classification) or the targets' [mean, std] (regression); one label array only."""
    if len(labels) != 1 or not _numeric(labels) or labels[0].size == 0:
        return {}
    values = labels[0].astype(np.int8) if labels[0].dtype == np.bool_ else labels[0]
    if _regression(values, loss_kind):
        return _mean_std(values)
    shares = _class_shares(values, loss_kind)
    return {"label_distribution": shares} if shares is not None else {}


def validation_labels(labels: list[np.ndarray] | None, loss_kind: LossKind | None) -> dict[str, Any]:
    """`validation_label_distribution`: the validation labels as `label_distribution` has the training ones."""
    found = label_distribution(labels, loss_kind) if labels is not None else {}
    return {"validation_label_distribution": found["label_distribution"]} if found else {}


def _mean_std(values: np.ndarray) -> dict[str, Any]:
    mean, std = float(np.mean(values, dtype=np.float64)), float(np.std(values, dtype=np.float64))
    return {"label_distribution": [mean, std]} if math.isfinite(mean) and math.isfinite(std) else {}


def _class_shares(values: np.ndarray, loss_kind: LossKind | None) -> list[float] | None:
    """Integer class ids: the share of each id; one-hot (or soft) rows: each column's mean."""
    one_id_per_sample = (
        values.ndim == 1 or values.shape[-1] == 1 or loss_kind == LossKind.SPARSE_CATEGORICAL_CROSSENTROPY
    )
    if not one_id_per_sample:
        if loss_kind not in CATEGORICAL_LOSSES and loss_kind != LossKind.BINARY_CROSSENTROPY:
            return None
        if values.shape[-1] > MAX_CLASSES:
            return None
        shares = np.mean(values.reshape(-1, values.shape[-1]), axis=0, dtype=np.float64)
    else:
        flat = values.reshape(-1)
        if not np.all(np.mod(flat, 1) == 0) or flat.min() < 0 or flat.max() >= MAX_CLASSES:
            return None
        shares = np.bincount(flat.astype(np.int64)) / flat.size
    return [round(float(share), SHARE_DECIMALS) for share in shares]


# -- tf.data, generators ----------------------------------------------------------------------


def streamed_data(adapter: Any) -> dict[str, Any]:
    """What the adapter knows without reading a batch: sample count (batches x a fixed batch
    size), and each sample's shape and dtype from the dataset's element_spec."""
    out: dict[str, Any] = {}
    samples = adapter_samples(adapter)
    if samples is not None:
        out["train_samples"] = samples
    spec = getattr(adapter_dataset(adapter), "element_spec", None)
    inputs = spec[0] if isinstance(spec, tuple) and spec else spec
    leaves = [leaf for leaf in tf.nest.flatten(inputs) if isinstance(leaf, tf.TensorSpec)] if inputs is not None else []
    if leaves and all(leaf.shape.rank for leaf in leaves):
        out["input_shape"] = ", ".join(str(tuple(leaf.shape.as_list()[1:])) for leaf in leaves)
        out["input_dtype"] = ", ".join(leaf.dtype.name for leaf in leaves)
    return out


def adapter_samples(adapter: Any) -> int | None:
    """Batches x batch size, the last batch's own size where the adapter says it is partial
    (a dataset's batch size is static only when its remainder is dropped: then exact too)."""
    batches, size = adapter_count(adapter, "num_batches", "get_size"), adapter_count(adapter, "batch_size")
    if batches is None or size is None:
        return None
    partial = getattr(adapter, "has_partial_batch", None)
    if callable(partial):
        partial = partial()
    if partial is True:
        last = adapter_count(adapter, "partial_batch_size")
        return (batches - 1) * size + last if last is not None else None
    return batches * size


def adapter_count(adapter: Any, *names: str) -> int | None:
    """A count the adapter states: Keras 3 has properties, tf_keras methods (`batch_size()`, `get_size()`)."""
    for name in names:
        value = getattr(adapter, name, None)
        if callable(value):
            value = value()
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None
