"""The rows trials train and judge on: a new pass over the fit's own data (Keras' data adapter builds
a fresh pipeline for arrays, datasets and PyDatasets), never the user's iterator. A Python generator
cannot be read twice, and inputs of several arrays (dicts, lists) are not tried: both say why."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

# At most this many rows are kept (a quarter of them held out to judge on): 1024 rows of 28x28
# images are 3 MB.
MAX_ROWS = 1024
HELD_OUT_SHARE = 0.25
MAX_BATCHES = 256
# Fewer rows than this are not tried: a quarter held out is then under 50 rows, where one wrong
# answer moves a held-out error by 2% or more and a short trial's verdict is chance (seen on iris' 84
# rows: 21 held out judged "3x the steps" worse than 20 steps).
MIN_ROWS = 200
MAX_BYTES = 256 * 2**20
_READ_ONCE = ("GeneratorDataAdapter",)


@dataclasses.dataclass(frozen=True)
class Sample:
    x: np.ndarray
    y: np.ndarray
    x_held: np.ndarray
    y_held: np.ndarray
    batch_size: int

    @property
    def rows(self) -> int:
        return len(self.x)


def take_sample(adapter: Any, max_rows: int = MAX_ROWS) -> Sample | str:
    """The sample, or why there is none."""
    if adapter is None:
        return "the fit's data could not be found"
    if type(adapter).__name__ in _READ_ONCE:
        return "the training data is a Python generator, which cannot be read twice"
    xs, ys, batch_size = [], [], 0
    for element in itertools.islice(iter(adapter.get_tf_dataset()), MAX_BATCHES):
        if not isinstance(element, (tuple, list)) or len(element) < 2:
            return "the data has no targets (a model that computes its own loss)"
        x, y = element[0], element[1]
        if isinstance(x, (dict, list, tuple)) or isinstance(y, (dict, list, tuple)):
            return "the model takes several inputs or targets"
        x, y = np.asarray(x), np.asarray(y)
        batch_size = batch_size or len(x)
        xs.append(x)
        ys.append(y)
        if sum(len(a) for a in xs) >= max_rows or sum(a.nbytes for a in xs) >= MAX_BYTES:
            break
    if not xs:
        return "the data yielded no batch"
    x, y = np.concatenate(xs)[:max_rows], np.concatenate(ys)[:max_rows]
    if x.dtype.kind not in "fiub" or y.dtype.kind not in "fiub":
        return "the inputs or targets are not numbers (text or strings go through the model's own layers)"
    if len(x) < MIN_ROWS:
        return f"the data holds only {len(x)} rows, too few to tell a change's gain from chance"
    held = max(4, int(len(x) * HELD_OUT_SHARE))
    order = np.random.default_rng(0).permutation(len(x))
    train, test = order[held:], order[:held]
    return Sample(x[train], y[train], x[test], y[test], max(1, min(batch_size, len(train))))
