"""The layout of one step-probe row, and the host's view of the rows read back.

The step probe writes one row per optimizer step inside the compiled step; the callback
reads rows back and turns columns into summaries. Both sides agree on the layout here, so
neither needs the other's machinery (and this module needs neither TensorFlow nor them).

A row: the fixed columns (COL_*), then four blocks of one value per layer: gradient norm,
non-finite gradients (1 where the layer's held NaN/Inf), weight norm (sampled), update norm
(sampled). The step writes the first block; the others are filled on the host (the sampled ones
by `weight_norms`). Work that need not be in the step is done on the host, where it costs no op
per step: the step writes half sums of squares (`tf.nn.l2_loss`) where the rows hold norms, and
the non-finite flags and their total follow from those (`Rows.from_step`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np

from tb_trainhealth.callback.frameworks.which_keras import variable_path

if TYPE_CHECKING:
    import keras

COL_LOSS, COL_GRAD_NORM, COL_LR, COL_GRAD_NONFINITE, COL_NONFINITE_REPLICAS, COL_LOSS_SCALE = range(6)
FIXED_COLUMNS = 6
LAYER_BLOCKS = 4
NOT_SAMPLED = -1.0
# Per-layer weight norms and update norms ||w_after - w_before|| change slowly: they are sampled
# after a fit's first call, then every EARLY_SAMPLE_EVERY-th step of its first EARLY_SAMPLE_STEPS
# steps (short fits get enough samples: the update-ratio rule wants 3 in a run's second half),
# then every SAMPLE_EVERY-th; NOT_SAMPLED (weights) or NaN (updates) on the other rows. A sample
# is two host calls (a copy of the weights before the step, both norms after it: ~0.5-1 ms for
# a small model on a 2-core VM, whether eager or compiled): 1.7% of a 5 ms step if taken every
# 20th step, 0.3% every 100th. No update norm with steps_per_execution > 1 (a call holds several
# updates).
EARLY_SAMPLE_EVERY = 20
EARLY_SAMPLE_STEPS = 200
SAMPLE_EVERY = 100


SQRT_2 = math.sqrt(2.0)  # a Python float: float32 columns stay float32


def sample_interval(done: int) -> int:
    """Steps between two samples around step `done` of a fit (see SAMPLE_EVERY)."""
    return EARLY_SAMPLE_EVERY if done <= EARLY_SAMPLE_STEPS else SAMPLE_EVERY


def norm_of_half_sumsq(half_sumsq: np.ndarray) -> np.ndarray:
    """The L2 norm from tf.nn.l2_loss's sum of squares / 2 (a root first: doubling a sum near
    float32's largest value would overflow, with a RuntimeWarning, where the norm itself fits)."""
    return np.sqrt(half_sumsq) * SQRT_2


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

    @classmethod
    def from_step(cls, steps: np.ndarray, written: np.ndarray, num_layers: int) -> Rows:
        """Rows from what the step wrote (a copy of the buffer's rows): norms from half sums
        of squares; a layer's gradients held NaN/Inf where its sum of squares is not finite
        (1 per such layer: the step counts no elements, see `StepProbe._record`)."""
        rows = cls(steps, written, num_layers)
        written[:, COL_GRAD_NORM] = norm_of_half_sumsq(written[:, COL_GRAD_NORM])
        rows.layer_grad_norm[:] = norm_of_half_sumsq(rows.layer_grad_norm)
        rows.layer_grad_nonfinite[:] = ~np.isfinite(rows.layer_grad_norm)
        written[:, COL_GRAD_NONFINITE] = rows.layer_grad_nonfinite.sum(axis=1)
        return rows

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
        """||w|| per layer after the update on sampled steps (`sample_interval`), NOT_SAMPLED on the others."""
        return self.block(2)

    @property
    def weight_rows(self) -> np.ndarray:
        """Rows that hold weight norms."""
        return (self.layer_weight_norm != NOT_SAMPLED).any(axis=1)

    @property
    def layer_update_norm(self) -> np.ndarray:
        """||w_after - w_before|| per layer on sampled steps (`sample_interval`), NaN on the others."""
        return self.block(3)
