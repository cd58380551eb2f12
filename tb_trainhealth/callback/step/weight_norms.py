"""Per-layer weight norms and update norms, sampled between steps from the host.

||w|| changes slowly: it is taken after the first call of a fit (on tf_keras after its timed
calls) and then on the steps `row_layout.sample_interval` says. ||w_after - w_before|| (with the
gradient norms: the update ratio) needs the weights before one update: a copy is taken before
each sampled step and compared after it.

Each is one host call between two steps (numpy for a small model trained on CPU, a few eager
ops for other small models, a compiled function for models with many variables), queued like
any op where it runs on TF (the result is read only with the rows, so no device sync), instead of
conditionals inside the training step, which cost every step and are traced with it. The copy is a
read of each variable: the optimizer's in-place update copies a buffer that is still
referenced, so the copy keeps the old values, for one step. The weight and update norms of a
sampled step are one call: two calls per sample in all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from tb_trainhealth.callback.frameworks.which_keras import tensor_of, variable_path
from tb_trainhealth.callback.step.row_layout import (
    LayerLayout,
    Rows,
    norm_of_half_sumsq,
    sample_interval,
)

if TYPE_CHECKING:
    import keras

logger = logging.getLogger(__name__)

# The update norm's copy of the weights is taken only for models up to this many parameters
# (a 200 MB float32 copy): beyond, the copy could tip a model that fits memory into OOM, so
# the update ratio is not measured.
MAX_SNAPSHOT_PARAMS = 50_000_000
# Up to this many variables the samples are eager ops (~5 per variable, ~15 us each on a 2-core
# VM); beyond, compiled functions (traced once per model: ~15-40 ms each for a small model, much
# longer for a big one). Per sample (copy and norms), bench/overhead.py's models: tiny MLP eager
# 0.48 ms, compiled 0.55 ms; small CNN eager 0.84 ms, compiled 0.66 ms: a tf.function call
# costs ~0.3 ms on its own, so compiling pays only for many variables. (The copy is one read per
# variable: an Identity on top cost ~12 us a variable and copied nothing.)
EAGER_MAX_VARIABLES = 16
# Such a model whose variables are in host memory (CPU training) and that has at most this many
# parameters is sampled with numpy instead: right after a training step an eager TF op cost
# ~40 us here (a tiny MLP's sample 0.87 ms), a numpy reduction of a few thousand floats ~1 us.
# Never for variables on an accelerator: reading them would copy them over and wait for the step.
HOST_MAX_PARAMS = 1_000_000


def layer_half_sumsq(num_layers: int, terms: list[tuple[int, tf.Tensor]]) -> tf.Tensor:
    """Per-layer half sums of squares of (layer index, tensor) pairs, as one vector (the host
    takes the norms: `row_layout.norm_of_half_sumsq`).

    On CPU the probe's cost is mostly per-op dispatch (~5 us an op in a step on a 2-core VM), so
    it is few ops whatever the depth: one fused tf.nn.l2_loss per tensor (sum of squares / 2),
    then one stack and one segment sum into layers."""
    if not terms:
        return tf.zeros([num_layers])
    halves = tf.stack([tf.nn.l2_loss(term) for _, term in terms])
    layers = [index for index, _ in terms]
    if layers == list(range(num_layers)):
        return halves
    return tf.math.unsorted_segment_sum(halves, layers, num_layers)


class WeightNorms:
    """One per step probe (its compiled functions are kept across fits); `begin_fit` each fit.

    The callback says when a host call of the train function begins (`call_began`) and when an
    epoch ends (`epoch_ended`); the read-back puts the samples into the rows of their steps
    (`fill`)."""

    def __init__(self, layout: LayerLayout, model: keras.Model):
        layers = layout.var_to_layer
        self._tracked = [(layers[path], v) for v in model.trainable_variables if (path := variable_path(v)) in layers]
        self._snapshots = sum(layout.num_params) <= MAX_SNAPSHOT_PARAMS
        self._num_layers = len(layout.names)
        self._compiled = len(self._tracked) > EAGER_MAX_VARIABLES
        small = not self._compiled and sum(layout.num_params) <= HOST_MAX_PARAMS
        readers = [_host_reader(v) for _, v in self._tracked] if small else [None]
        self.on_host = all(read is not None for read in readers)
        if self.on_host:
            self._make_host_functions(readers)
        else:
            self._make_functions(tf.function if self._compiled else _eager)
        self.enabled = bool(self._tracked)
        self.begin_fit(1)

    def _make_functions(self, compiled: Any) -> None:
        num_layers = self._num_layers

        def values() -> list[tuple[int, tf.Tensor]]:
            return [(index, tf.cast(tensor_of(v), tf.float32)) for index, v in self._tracked]

        def weights_and_update(before: list[tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
            now = values()
            update = [(i, w - tf.cast(b, tf.float32)) for (i, w), b in zip(now, before)]
            return layer_half_sumsq(num_layers, now), layer_half_sumsq(num_layers, update)

        self._weights_sumsq = compiled(lambda: layer_half_sumsq(num_layers, values()))
        self._copy = compiled(lambda: [tf.convert_to_tensor(tensor_of(v)) for _, v in self._tracked])
        self._weights_and_update = compiled(weights_and_update)

    def _make_host_functions(self, readers: list[Callable[[], np.ndarray]]) -> None:
        """The same three samples with numpy (see HOST_MAX_PARAMS); the copy is a real copy."""
        layers = np.array([index for index, _ in self._tracked])

        def half_sumsq(arrays: list[np.ndarray]) -> np.ndarray:
            halves = [0.5 * float(np.vdot(a, a)) for a in arrays]
            return np.bincount(layers, weights=halves, minlength=self._num_layers).astype(np.float32)

        def values() -> list[np.ndarray]:
            return [read().astype(np.float32, copy=False).ravel() for read in readers]

        def weights_and_update(before: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
            now = values()
            return half_sumsq(now), half_sumsq([w - b for w, b in zip(now, before)])

        self._weights_sumsq = lambda: half_sumsq(values())
        self._copy = lambda: [w.copy() for w in values()]
        self._weights_and_update = weights_and_update

    def begin_fit(self, steps_per_call: int, timed_calls: int = 0) -> None:
        """`timed_calls`: tf_keras times the batch hooks of a fit's first calls and warns when they
        take longer than the batches, so no sample is taken (its first call traces) before them."""
        self._steps_per_call = steps_per_call
        self._timed_calls = timed_calls
        self._calls = 0
        self._last_sampled = 0  # steps of this fit done at the last weight norm
        # (steps done, weights sumsq, update sumsq or None): tensors, read with the rows
        self._samples: list[tuple[int, Any, Any]] = []
        self._copy_for: int | None = None  # the step whose update the copy is for
        self._copy_values: Any = None

    def call_began(self) -> None:
        """A call of the train function begins: the previous one is done."""
        self._calls += 1
        if self.enabled and self._calls > self._timed_calls:
            self._after((self._calls - 1) * self._steps_per_call)

    def epoch_ended(self) -> None:
        """The epoch's last call is done (its weights are those the next epoch starts from)."""
        if self.enabled:
            self._after(self._calls * self._steps_per_call)

    def _after(self, done: int) -> None:
        """`done` steps of this fit are done: sample what is due, copy what the next step needs."""
        try:
            every = sample_interval(done)
            if done > self._last_sampled and (self._last_sampled == 0 or done // every > self._last_sampled // every):
                if self._copy_for == done:
                    self._samples.append((done, *self._weights_and_update(self._copy_values)))
                else:
                    self._samples.append((done, self._weights_sumsq(), None))
                self._last_sampled = done
            self._copy_for, self._copy_values = None, None
            if self._snapshots and self._steps_per_call == 1 and (done + 1) % sample_interval(done + 1) == 0:
                self._copy_for, self._copy_values = done + 1, self._copy()
        except Exception:  # never break the step: lose the weight norms, keep the rest
            logger.exception("tb-trainhealth: weight norms disabled (could not measure them)")
            self.enabled, self._samples = False, []

    def fill(self, rows: Rows, base_step: int) -> None:
        """Put the samples of the rows' steps into their weight and update blocks; keep later ones."""
        row_of = {int(step) - base_step: i for i, step in enumerate(rows.steps)}
        later = []
        for done, weights, update in self._samples:
            if done not in row_of:
                later.append((done, weights, update))
                continue
            row = row_of[done]
            rows.layer_weight_norm[row] = norm_of_half_sumsq(np.asarray(weights))
            if update is not None:
                rows.layer_update_norm[row] = norm_of_half_sumsq(np.asarray(update))
        self._samples = [s for s in later if s[0] > int(rows.steps[-1]) - base_step]


def _eager(function: Any) -> Any:
    return function


def _host_reader(variable: Any) -> Callable[[], np.ndarray] | None:
    """Reads a plain tf.Variable in host memory into numpy (one ReadVariableOp: ~11 us, where
    `np.asarray(variable)` took ~40); None for a variable elsewhere or a distributed one."""
    resource = variable if isinstance(variable, tf.Variable) else getattr(variable, "value", None)
    if not isinstance(resource, tf.Variable) or isinstance(resource, tf.distribute.DistributedValues):
        return None
    device = getattr(resource, "device", None)
    if not device or tf.DeviceSpec.from_string(device).device_type != "CPU":
        return None
    handle, dtype = resource.handle, resource.dtype
    return lambda: tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype).numpy()
