"""Every private attribute of Keras 3 and tf_keras the write side reaches for, in one place.

Checked on Keras 3.15.1 (TensorFlow backend) and tf_keras 2.21.0, with TensorFlow 2.21.0.
`tests/test_framework_adapters.py` asks each function for what it reaches, on real models of
both Keras, so a release that moves one fails there, naming it. Each function says what its
caller gets when the attribute is missing: a fallback the caller already has (None, False,
Keras' public way), or an AttributeError where the caller turns its probe off (`ProbeGuard`)
or leaves the work to Keras' own step.

Also checked, and kept in `which_keras.TfKerasCallbackProtocol` (ours to define: tf_keras'
`CallbackList` reads them from every callback): `_supports_tf_logs`,
`_implements_train_batch_hooks`, `_implements_test_batch_hooks`, `_implements_predict_batch_hooks`.

Imports neither Keras: callers hand in their objects (a Keras 3 user never pays for tf_keras).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

# How far up the stack `fit` is looked for (callback hook, CallbackList, fit).
FIT_FRAME_DEPTH = 12
# fit's local holding its CallbackList (both Keras). A name, not a function: one frame fewer
# between `fit_local` and the callback hook asking.
FIT_CALLBACKS = "callbacks"
# fit's locals (both Keras) that describe its data: the training arrays, the validation inputs
# and labels, and two of its arguments that no callback is given.
FIT_DATA = ("x", "y", "val_x", "val_y", "initial_epoch", "shuffle")
# The optimizer method that all-reduces one replica's gradients: Keras 3 (TF backend), tf_keras'
# `Optimizer`, tf_keras' legacy `OptimizerV2`.
KERAS_3_ALL_REDUCE = "_all_reduce_sum_gradients"
TF_KERAS_ALL_REDUCE = "aggregate_gradients"
TF_KERAS_LEGACY_ALL_REDUCE = "_aggregate_gradients"


# -- the fit() calling us: its local variables (both Keras) -----------------------------------


def fit_local(name: str) -> Any | None:
    """Local `name` (e.g. `FIT_CALLBACKS`) of the nearest `fit` frame up the stack; None when not found."""
    frame = inspect.currentframe()
    try:
        for _ in range(FIT_FRAME_DEPTH):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return None
            if frame.f_code.co_name == "fit" and frame.f_locals.get(name) is not None:
                return frame.f_locals[name]
        return None
    finally:
        del frame


def fit_data_adapter() -> Any | None:
    """fit's adapter: Keras 3's `epoch_iterator.data_adapter`, tf_keras' `data_handler._adapter`; None if missing."""
    adapter = getattr(fit_local("epoch_iterator"), "data_adapter", None)
    return adapter if adapter is not None else getattr(fit_local("data_handler"), "_adapter", None)


def fit_data() -> dict[str, Any]:
    """fit's locals `FIT_DATA` (both Keras: `x` and `y` are the training part once a
    validation_split took its share, `val_x` and `val_y` exist only with validation data), read from the
    nearest `fit` frame holding `FIT_CALLBACKS`; {} when none is found, a name it lacks absent."""
    frame = inspect.currentframe()
    try:
        for _ in range(FIT_FRAME_DEPTH):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return {}
            if frame.f_code.co_name == "fit" and frame.f_locals.get(FIT_CALLBACKS) is not None:
                found = frame.f_locals
                return {name: found[name] for name in FIT_DATA if name in found}
        return {}
    finally:
        del frame


def adapter_dataset(adapter: Any) -> Any | None:
    """A tf.data adapter's `_dataset` (the user's pipeline, both Keras); None when missing (no lint)."""
    return getattr(adapter, "_dataset", None)


# -- models and layers -----------------------------------------------------------------------


def runs_keras_3_train_step(model: Any) -> bool:
    """Whether `train_step` is Keras 3's `TensorFlowTrainer.train_step`; False if renamed (left to the step)."""
    return getattr(type(model).train_step, "__qualname__", "") == "TensorFlowTrainer.train_step"


def runs_tf_keras_train_step(model: Any) -> bool:
    """Whether `train_step` is tf_keras' own `Model.train_step`; False if renamed (left to the step)."""
    train_step = type(model).train_step
    return train_step.__qualname__ == "Model.train_step" and train_step.__module__.startswith("tf_keras")


def train_function_traced(function: Any) -> bool:
    """Whether a model's `train_function` has been traced: tf_keras' is a `tf.function`, Keras 3's a
    closure over its `tf.function`s (two levels deep). False when none is found (run eagerly, not
    made yet, or moved: the caller then takes it as one Keras would trace anew, as before)."""
    pending, seen = [(function, 0)], set()
    while pending:
        candidate, depth = pending.pop()
        if candidate is None or id(candidate) in seen:
            continue
        seen.add(id(candidate))
        count = getattr(candidate, "experimental_get_tracing_count", None)
        if callable(count):
            if count() > 0:
                return True
            candidate = getattr(candidate, "python_function", None)
        if depth < 2 and candidate is not None:
            for cell in getattr(candidate, "__closure__", None) or ():
                try:
                    contents = cell.cell_contents
                except ValueError:  # (an empty cell)
                    continue
                if inspect.isfunction(contents) or hasattr(contents, "python_function"):
                    pending.append((contents, depth + 1))
    return False


def one_step_on_data(function: Any) -> Any | None:
    """The `tf.function` Keras 3's train function calls on each batch it is handed from the host
    (its closure's `one_step_on_data`, under `_autoconvert_optionals`' `functools.wraps` wrapper
    since Keras 3.8); None where not found (run eagerly, tf_keras, or moved: the caller then lets
    Keras trace it as it would)."""
    names = getattr(getattr(function, "__code__", None), "co_freevars", ())
    if "one_step_on_data" not in names:
        return None
    try:
        step = function.__closure__[names.index("one_step_on_data")].cell_contents
    except (TypeError, IndexError, ValueError):
        return None
    step = getattr(step, "__wrapped__", step)
    return step if hasattr(step, "get_concrete_function") else None


def flatten_layers(model: Any, include_self: bool = True) -> list[Any] | None:
    """`_flatten_layers(include_self=)`: all layers, nested too; None if missing/changed (`.layers`, or unbuilt)."""
    flatten = getattr(model, "_flatten_layers", None)
    if not callable(flatten):
        return None
    try:
        return list(flatten(include_self=include_self))
    except TypeError:
        return None


def compiled_metrics_and_loss(model: Any) -> list[Any]:
    """Keras 3's `_compile_metrics` and `_compile_loss`; None each when missing (nothing to build)."""
    return [getattr(model, "_compile_metrics", None), getattr(model, "_compile_loss", None)]


def model_strategy(model: Any) -> Any | None:
    """Keras 3's `_distribute_strategy` (the strategy a model was made under); None when missing or none."""
    return getattr(model, "_distribute_strategy", None)


def symbolic_build(model: Any, batch: Any) -> None:
    """Keras 3's `_symbolic_build(data_batch=)`; AttributeError when missing (left to the step)."""
    model._symbolic_build(data_batch=batch)


def backend_variable(variable: Any) -> Any:
    """Keras 3's `Variable._value` (its tf.Variable); the variable itself when missing (tf_keras: one already)."""
    return getattr(variable, "_value", variable)


def lambda_output_shape(layer: Any) -> Any | None:
    """Keras 3's `Lambda._output_shape`; None when missing (the clone infers its output shape)."""
    return getattr(layer, "_output_shape", None)


@contextlib.contextmanager
def trusted_configs() -> Iterator[bool]:
    """Keras 3's `SafeModeScope(False)` (keras.src.saving); yields True in it, False when missing (safe mode)."""
    try:
        from keras.src.saving.serialization_lib import SafeModeScope
    except ImportError:
        yield False
        return
    with SafeModeScope(False):
        yield True


# -- optimizers --------------------------------------------------------------------------------


def optimizer_variables(optimizer: Any) -> list[Any]:
    """Keras 3's `Optimizer._trainable_variables`; AttributeError when missing (as Keras' own `apply`)."""
    return optimizer._trainable_variables


def known_variables(optimizer: Any) -> list[Any] | None:
    """The variables a built optimizer was built for (Keras 3's `_trainable_variables`, of the inner
    optimizer of a LossScaleOptimizer too); None when unbuilt, tf_keras or missing (unknown)."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if not getattr(inner, "built", False):
        return None
    known = getattr(inner, "_trainable_variables", None)
    return list(known) if known is not None else None


def wrap_keras_3_all_reduce(optimizer: Any, wrap: Callable[[Callable], Callable]) -> str:
    """Replaces Keras 3's `_all_reduce_sum_gradients` by `wrap(it)`, its name returned; else AttributeError."""
    original = getattr(optimizer, KERAS_3_ALL_REDUCE)
    object.__setattr__(optimizer, KERAS_3_ALL_REDUCE, wrap(original))
    return KERAS_3_ALL_REDUCE


def wrap_tf_keras_all_reduce(optimizer: Any, wrap: Callable[[Callable], Callable]) -> str:
    """Replaces tf_keras' `aggregate_gradients` (OptimizerV2: `_aggregate_gradients`) alike; else AttributeError."""
    name = TF_KERAS_ALL_REDUCE if hasattr(optimizer, TF_KERAS_ALL_REDUCE) else TF_KERAS_LEGACY_ALL_REDUCE
    original = getattr(optimizer, name)
    object.__setattr__(optimizer, name, wrap(original))
    return name


def tf_keras_optimizer_built(optimizer: Any) -> bool:
    """tf_keras' `Optimizer._built`; False when missing (then built again, which it skips if built)."""
    return bool(getattr(optimizer, "_built", False))


def compute_tf_keras_learning_rate(optimizer: Any) -> bool:
    """Calls tf_keras' `Optimizer._compute_current_learning_rate()`; False when missing (the step does)."""
    compute = getattr(optimizer, "_compute_current_learning_rate", None)
    if compute is None:
        return False
    compute()
    return True
