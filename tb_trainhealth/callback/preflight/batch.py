"""The small batch a preflight works on, from whatever `fit` accepts: arrays (or dicts and lists
of them), a `tf.data.Dataset`, a `keras.utils.PyDataset`, or a generator of batches."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import keras
import numpy as np
import tensorflow as tf

# Rows of an array input are drawn at random (as fit(shuffle=True) would see them), with this
# seed: the same arrays give the same preflight.
SAMPLE_SEED = 0
# Batches read from a dataset or generator to gather `batch_size` samples, at most.
MAX_BATCHES = 64


@dataclasses.dataclass(frozen=True)
class Batch:
    x: Any
    y: Any
    sample_weight: Any = None

    @property
    def size(self) -> int:
        return int(tf.nest.flatten(self.x)[0].shape[0])

    def head(self, n: int) -> Batch:
        """The first n samples."""

        def cut(value: Any) -> Any:
            return None if value is None else tf.nest.map_structure(lambda t: t[:n], value)

        return Batch(cut(self.x), cut(self.y), cut(self.sample_weight))

    def zeroed(self) -> Batch | None:
        """The same batch with every input value 0 (None when an input is not numeric)."""
        inputs = tf.nest.flatten(self.x)
        if not all(t.dtype.is_floating or t.dtype.is_integer or t.dtype.is_bool for t in inputs):
            return None
        return Batch(tf.nest.map_structure(tf.zeros_like, self.x), self.y, self.sample_weight)


def _as_tensors(value: Any) -> Any:
    return None if value is None else tf.nest.map_structure(tf.convert_to_tensor, value)


def _split(element: Any) -> tuple[Any, Any, Any]:
    if isinstance(element, (tuple, list)) and 2 <= len(element) <= 3:
        return element[0], element[1], element[2] if len(element) == 3 else None
    if isinstance(element, (tuple, list)) and len(element) == 1:
        return element[0], None, None
    return element, None, None


def _concat(parts: list[Any]) -> Any:
    if parts[0] is None:
        return None
    return tf.nest.map_structure(lambda *ts: tf.concat(list(ts), axis=0), *parts)


def _gather(batches: Any, batch_size: int) -> Batch:
    """Batches from an iterable until `batch_size` samples (or MAX_BATCHES), cut to size."""
    xs, ys, ws = [], [], []
    for element in itertools.islice(batches, MAX_BATCHES):
        x, y, w = (_as_tensors(v) for v in _split(element))
        xs.append(x)
        ys.append(y)
        ws.append(w)
        if sum(int(tf.nest.flatten(v)[0].shape[0]) for v in xs) >= batch_size:
            break
    if not xs:
        raise ValueError("preflight: the data yielded no batch")
    return Batch(_concat(xs), _concat(ys), _concat(ws) if all(w is not None for w in ws) else None).head(batch_size)


def take_batch(x: Any, y: Any = None, batch_size: int = 32, sample_weight: Any = None) -> Batch:
    """A batch of up to `batch_size` samples from `x` (and `y`), as fit would read them."""
    if isinstance(x, tf.data.Dataset):  # batched, as fit needs it; a new iterator reads it from the start
        return _gather(iter(x), batch_size)
    if isinstance(x, keras.utils.PyDataset):
        return _gather((x[i] for i in range(len(x))), batch_size)
    if hasattr(x, "__next__"):  # a generator or iterator: the batches taken are consumed
        return _gather(x, batch_size)
    rows = int(np.shape(tf.nest.flatten(x)[0])[0])
    picked = np.sort(np.random.default_rng(SAMPLE_SEED).permutation(rows)[: min(batch_size, rows)])

    def take(value: Any) -> Any:
        return (
            None
            if value is None
            else tf.nest.map_structure(lambda a: tf.gather(tf.convert_to_tensor(a), picked), value)
        )

    return Batch(take(x), take(y), take(sample_weight))
