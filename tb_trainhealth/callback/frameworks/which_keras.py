"""Which Keras a model belongs to: Keras 3 (`keras`) or legacy Keras 2 (`tf_keras`).

Both can be installed side by side (`TF_USE_LEGACY_KERAS=1` makes `tf.keras` the latter), and
their classes, variables and callback protocols differ. A model tells by its class: we look at
the modules of its MRO and take the Keras from `sys.modules`, so asking never imports the other
one (a Keras 3 user never pays for tf_keras, nor the reverse).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any


def is_tf_keras(obj: Any) -> bool:
    """Whether `obj` (a model, layer, optimizer...) is a tf_keras object."""
    return any(cls.__module__.startswith("tf_keras") for cls in type(obj).__mro__)


def keras_of(obj: Any) -> ModuleType:
    """The Keras module `obj` belongs to (already imported: its class lives there)."""
    if is_tf_keras(obj):
        return sys.modules["tf_keras"]
    import keras

    return keras


def variable_path(variable: Any) -> str:
    """A variable's unique name: Keras 3 has `path` ("dense/kernel"); a tf.Variable (tf_keras)
    only `name` ("dense/kernel:0")."""
    path = getattr(variable, "path", None)
    return path if isinstance(path, str) else variable.name.rsplit(":", 1)[0]


def tensor_of(variable: Any) -> Any:
    """A variable's current value as a tensor: Keras 3's `value` is a property, a tf.Variable's a method."""
    value = variable.value
    return value() if callable(value) else value


def steps_per_execution(model: Any) -> int:
    """Steps per call of the train function: an int on Keras 3, a (mirrored) variable on tf_keras."""
    value = getattr(model, "steps_per_execution", 1)
    if hasattr(value, "numpy"):
        value = value.numpy()
    return int(value or 1)


class TfKerasCallbackProtocol:
    """What tf_keras' `CallbackList` asks of every callback beyond the `on_*` hooks (its own
    `Callback` base has these; a Keras 3 callback does not). Mixed into our callbacks, the same
    object can be handed to either Keras' `fit`. `_supports_tf_logs`: batch logs are handed over
    as tensors, not copied to the host on every step (which would wait for each step to end)."""

    _supports_tf_logs = True

    def _implements_train_batch_hooks(self) -> bool:
        return _overrides(self, "on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end")

    def _implements_test_batch_hooks(self) -> bool:
        return _overrides(self, "on_test_batch_begin", "on_test_batch_end")

    def _implements_predict_batch_hooks(self) -> bool:
        return _overrides(self, "on_predict_batch_begin", "on_predict_batch_end")


def _overrides(callback: Any, *hooks: str) -> bool:
    """Whether any of `hooks` is defined by a class of ours rather than by a Keras base."""
    for hook in hooks:
        owner = next((cls for cls in type(callback).__mro__ if hook in cls.__dict__), None)
        if owner is not None and not owner.__module__.startswith(("keras", "tf_keras")):
            return True
    return False
