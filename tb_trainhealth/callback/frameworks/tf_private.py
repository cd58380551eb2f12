"""Every private attribute of TensorFlow the write side reaches for, in one place.

Checked on TensorFlow 2.21.0. `tests/test_framework_adapters.py` asks each function for what
it reaches, on real functions, datasets and strategies, so a release that moves one fails
there, naming it. Each function says what its caller gets when the attribute is missing: a
fallback the caller already has (None, False, TensorFlow's public way), or an AttributeError
where the caller turns its check off (`ProbeGuard`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import tensorflow as tf

# ConcreteFunction's call after binding (TF 2.14+): what `concrete(iterator)` runs once it has
# flattened the iterator, and the parameters it takes.
_FLAT_CALL = "_call_flat"
_FLAT_CALL_PARAMETERS = ["tensor_inputs", "captured_inputs"]
_TRACING_WARNING = "_omit_frequent_tracing_warning"  # a tf.function's own switch for that warning


def flat_call(concrete: Any) -> Callable[[list, Any], Any] | None:
    """`ConcreteFunction._call_flat(tensor_inputs, captured_inputs)`; None if missing or changed (public call)."""
    call = getattr(concrete, _FLAT_CALL, None)
    try:
        parameters = list(inspect.signature(call).parameters) if call is not None else []
    except (TypeError, ValueError):
        return None
    return call if parameters == _FLAT_CALL_PARAMETERS else None


def silence_retracing_warning(function: Any) -> bool:
    """Sets a tf.function's `_omit_frequent_tracing_warning`; False when missing (it may warn)."""
    if not hasattr(function, _TRACING_WARNING):
        return False
    setattr(function, _TRACING_WARNING, True)
    return True


def strategy_supports_no_merge_call() -> bool:
    """`tf.__internal__.distribute.strategy_supports_no_merge_call()`; False if missing (own all-reduce)."""
    supports = getattr(
        getattr(getattr(tf, "__internal__", None), "distribute", None), "strategy_supports_no_merge_call", None
    )
    return bool(supports()) if supports is not None else False


def serialized_graph(dataset: tf.data.Dataset) -> bytes:
    """`Dataset._as_serialized_graph(...)`: its GraphDef bytes; AttributeError when missing (lint turned off)."""
    policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return dataset._as_serialized_graph(external_state_policy=policy).numpy()


def dataset_tensors(dataset: tf.data.Dataset) -> list[Any]:
    """A from_tensors/from_tensor_slices source's `_tensors`, flat; [] when missing (counted as no bytes)."""
    return tf.nest.flatten(getattr(dataset, "_tensors", []))


def dataset_inputs(dataset: tf.data.Dataset) -> list[tf.data.Dataset]:
    """`Dataset._inputs()`: the datasets it reads; [] when missing (its sources are not counted)."""
    inputs = getattr(dataset, "_inputs", None)
    return list(inputs()) if callable(inputs) else []
