"""Activation health from a small probe batch, sampled sparsely (epoch ends, at most every
PROBE_EVERY_STEPS steps and within MAX_TIME_SHARE of the training time, plus once when
training ends), never per step.

One eager forward pass of the first training batch through a sub-model that returns
every ReLU/sigmoid/tanh layer's output. Per layer it measures:

- dead share (ReLU): units active (> 0) on fewer than 1% of the probe's samples and
  positions: SageMaker Debugger's `dead_relu` rule (threshold_inactivity 1%).
- saturated share (sigmoid/tanh): outputs in the flat tails where the gradient is
  ~0: SageMaker Debugger's `saturated_activation` rule uses inputs beyond ±9.4 (tanh)
  and below -23 / above 16.6 (sigmoid). In float32 those are exactly the outputs that
  round to the bounds: tanh = ±1.0, sigmoid = 1.0 or below sigmoid(-23) ~ 1e-10.

Functional and Sequential models only (a subclassed model has no layer graph to tap).
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np

from tb_trainhealth.callback.frameworks.which_keras import keras_of
from tb_trainhealth.callback.lint.submodel import call_submodel
from tb_trainhealth.callback.time_budget import TimeBudget

# At most one probe per this many steps (epoch ends closer together are skipped): short
# epochs would otherwise pay a forward pass every few dozen steps.
PROBE_EVERY_STEPS = 200
# ...and the probe's eager forward pass takes at most this share of the wall time: it costs
# ~10 ms on a small CNN (1% of 200 of its 5 ms steps), far more on a big model.
MAX_TIME_SHARE = 0.005
# A unit is dead when it is active on fewer than this share of probe positions.
DEAD_ACTIVITY = 0.01
# Below this many positions per unit, "never active" is chance, not death: a unit active on
# 10% of inputs shows no activity in 8 samples 43% of the time. The dead share is then not given.
MIN_DEAD_POSITIONS = 32
SIGMOID_LOW = 1.0e-10  # sigmoid(-23)
_KINDS = {"relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh"}


def _activation_kind(layer: keras.layers.Layer) -> str | None:
    if isinstance(layer, keras_of(layer).layers.ReLU):
        return "relu"
    function = getattr(layer, "activation", None)
    name = getattr(function, "__name__", None)
    return _KINDS.get(name) if isinstance(name, str) else None


def dead_share(outputs: np.ndarray) -> float:
    """Share of units (last axis) active on fewer than DEAD_ACTIVITY of the probe positions."""
    active = (outputs.reshape(-1, outputs.shape[-1]) > 0).mean(axis=0)
    return float((active < DEAD_ACTIVITY).mean())


def saturated_share(kind: str, outputs: np.ndarray) -> float:
    """Share of activations in the flat tails (see module docstring)."""
    saturated = np.abs(outputs) >= 1.0 if kind == "tanh" else (outputs >= 1.0) | (outputs <= SIGMOID_LOW)
    return float(saturated.mean())


class ActivationProbe:
    """Builds the tap sub-model once; `measure(x)` gives per-layer shares for one probe batch."""

    def __init__(self, model: keras.Model):
        self.layers = [
            (layer, kind)
            for layer in model.layers
            if (kind := _activation_kind(layer)) and layer is not model.layers[-1]
        ]
        self._taps = None
        self.last_step: int | None = None
        self._budget = TimeBudget(MAX_TIME_SHARE)
        if self.layers and getattr(model, "inputs", None):
            # Called eagerly: a few calls per fit cost less than tracing a graph for each fit's
            # probe (and a tf.function per fit draws TensorFlow's "retracing" warning).
            self._taps = keras_of(model).Model(model.inputs, [layer.output for layer, _ in self.layers])

    @property
    def available(self) -> bool:
        return self._taps is not None

    def due(self, step: int, final: bool = False) -> bool:
        """Time for a probe at `step`? `final`: training ends, the last state is what the rules judge."""
        if self.last_step is None:
            return True
        if final:
            return step > self.last_step
        return step - self.last_step >= PROBE_EVERY_STEPS and self._budget.allows()

    def measure(self, x: Any, step: int) -> dict[str, dict[str, Any]]:
        with self._budget.spend():
            return self._measure(x, step)

    def _measure(self, x: Any, step: int) -> dict[str, dict[str, Any]]:
        self.last_step = step
        outputs = call_submodel(self._taps, x)
        if len(self.layers) == 1:
            outputs = [outputs]
        measured = {}
        for (layer, kind), output in zip(self.layers, outputs):
            values = np.asarray(output, dtype=np.float32)
            entry: dict[str, Any] = {"activation": kind, "units": int(values.shape[-1])}
            if not np.isfinite(values).all():
                pass  # NaN weights: NaN is not "inactive" nor "saturated" (nonfinite tells it)
            elif kind == "relu" and values.size // max(values.shape[-1], 1) >= MIN_DEAD_POSITIONS:
                entry["dead"] = dead_share(values)
            elif kind != "relu" and layer.compute_dtype == "float32":
                # float16/bfloat16 round tanh/sigmoid to their bounds at inputs of ~4 (not 9.4):
                # their outputs cannot tell a saturated unit from a confident one.
                entry["saturated"] = saturated_share(kind, values)
            measured[layer.name] = entry
        return measured
