"""The layout of one step-probe row, and the host's view of the rows read back.

The step probe writes one row per optimizer step inside the compiled step; the callback
reads rows back and turns columns into summaries. Both sides agree on the layout here, so
neither needs the other's machinery (and this module needs neither TensorFlow nor them).

A row: the fixed columns (COL_*), then four blocks of one value per layer: gradient norm,
non-finite gradient count, weight norm (sampled), update norm (sampled). The step writes the
first two; the sampled blocks are filled on the host (`weight_norms`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from tb_trainhealth.callback.keras_flavor import variable_path

if TYPE_CHECKING:
    import keras

COL_LOSS, COL_GRAD_NORM, COL_LR, COL_GRAD_NONFINITE, COL_NONFINITE_REPLICAS, COL_LOSS_SCALE = range(6)
FIXED_COLUMNS = 6
LAYER_BLOCKS = 4
# Per-layer weight norms change slowly: taken after a fit's first call and every
# this-many-th step only (one reduction per variable: 3.5% of a 1 ms step if taken on every
# step); NOT_SAMPLED on the other rows.
WEIGHT_NORM_EVERY = 10
NOT_SAMPLED = -1.0
# The update norm ||w_after - w_before|| needs a copy of the weights before the update:
# taken on every this-many-th step only (the copy lives for the length of one update; not
# with steps_per_execution > 1, where a call holds several updates).
UPDATE_EVERY = 20  # a multiple of WEIGHT_NORM_EVERY: the ratio needs both norms


def row_width(num_layers: int) -> int:
    """Values in one row of a model with `num_layers` layers."""
    return FIXED_COLUMNS + LAYER_BLOCKS * num_layers


@dataclasses.dataclass(frozen=True)
class LayerLayout:
    """The model's layers that own trainable variables, in variable order: one column per block each."""

    names: list[str]
    num_params: list[int]
    var_to_layer: dict[str, int]  # variable path -> layer index

    @classmethod
    def of(cls, model: keras.Model) -> LayerLayout:
        names: list[str] = []
        sizes: list[int] = []
        var_to_layer: dict[str, int] = {}
        prefix = model.name + "/"
        for variable in model.trainable_variables:
            path = variable_path(variable)
            layer = path.rsplit("/", 1)[0] if "/" in path else path
            layer = layer.removeprefix(prefix)
            if layer not in names:
                names.append(layer)
                sizes.append(0)
            index = names.index(layer)
            var_to_layer[path] = index
            sizes[index] += int(np.prod(variable.shape))
        return cls(names, sizes, var_to_layer)


@dataclasses.dataclass
class Rows:
    """Rows read back from the buffer, for steps `steps` (1-based optimizer steps)."""

    steps: np.ndarray
    values: np.ndarray  # (n, width)
    num_layers: int

    def column(self, index: int) -> np.ndarray:
        return self.values[:, index]

    def block(self, block: int) -> np.ndarray:
        start = FIXED_COLUMNS + block * self.num_layers
        return self.values[:, start : start + self.num_layers]

    @property
    def layer_grad_norm(self) -> np.ndarray:
        return self.block(0)

    @property
    def layer_grad_nonfinite(self) -> np.ndarray:
        return self.block(1)

    @property
    def layer_weight_norm(self) -> np.ndarray:
        """||w|| per layer after the update on sampled steps (WEIGHT_NORM_EVERY), NOT_SAMPLED on the others."""
        return self.block(2)

    @property
    def weight_rows(self) -> np.ndarray:
        """Rows that hold weight norms."""
        return (self.layer_weight_norm != NOT_SAMPLED).any(axis=1)

    @property
    def layer_update_norm(self) -> np.ndarray:
        """||w_after - w_before|| per layer on sampled steps (UPDATE_EVERY), NaN on the others."""
        return self.block(3)
