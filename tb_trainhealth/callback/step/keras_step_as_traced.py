"""The train function the probe hands back after a fit in which it stood in for Keras' first trace.

Keras traces its train step once and reuses it until `compile`; a later `trainable` flip without
compile goes on training the variables trainable at that first trace (a common fine-tuning
mistake, which Keras alone survives). The probe's instrumented step took that first trace, so the
Keras function it puts back has never been traced: traced at the next plain fit, it would see the
new flags and hand the optimizer variables it was never built for ("Unknown variable ... can only be
called for the variables it was originally built with"). `StepAsTraced` traces Keras' own function
at that next call with the flags the probe's step was traced with, so the fit trains what Keras
alone would (bench/transparency.py: unfreeze_callback_first_then_plain).
"""

from __future__ import annotations

from typing import Any

from tb_trainhealth.callback.frameworks import keras_private


def trainable_flags(model: Any) -> list[tuple[Any, bool]]:
    """Every layer's `trainable`, the model's own first and each layer before its sublayers (the
    order to set them back in: setting a layer's flag sets its sublayers' too)."""
    layers = keras_private.flatten_layers(model) or [model, *(getattr(model, "layers", None) or [])]
    return [(layer, bool(layer.trainable)) for layer in layers]


class StepAsTraced:
    """Stands in `model.train_function` until its first call, which makes Keras' own function, traces
    and runs it with `flags` in place (then the flags as they are now come back), and leaves that
    function as the model's."""

    def __init__(self, model: Any, flags: list[tuple[Any, bool]]) -> None:
        self.model, self.flags = model, flags

    def __call__(self, iterator: Any) -> Any:
        self.model.make_train_function(force=True)  # (Keras 3 returns nothing: it sets train_function)
        function = self.model.train_function
        now = [(layer, bool(layer.trainable)) for layer, _ in self.flags]
        if now == self.flags:
            return function(iterator)
        _set(self.flags)
        try:
            return function(iterator)  # (the trace: the variables trainable when the probe's was traced)
        finally:
            _set(now)


def _set(flags: list[tuple[Any, bool]]) -> None:
    for layer, trainable in flags:
        if layer.trainable != trainable:
            layer.trainable = trainable
