"""Records the exception that ends training before it propagates, unchanged.

Keras has no exception hook for callbacks: the compiled train and test functions are
wrapped instead (and unwrapped when training ends), so an error inside a step (a shape
mismatch, a corrupt file, out of memory) becomes a `crash` event, flushed to disk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from tb_trainhealth.contract.events import CrashEvent

# Crash messages (TensorFlow's can carry whole graphs) are cut to this length.
MAX_MESSAGE_CHARS = 4000
_STEP_FUNCTIONS = (("train_function", "training"), ("test_function", "validation"))


def crash_event(error: BaseException, step: int, epoch: int, phase: str) -> CrashEvent:
    return CrashEvent(
        step=step,
        error_type=type(error).__name__,
        message=str(error)[:MAX_MESSAGE_CHARS],
        phase=phase,
        epoch=epoch,
    )


def wrap_step_functions(
    model: Any, run_train_step: Callable[[Callable, Any], Any], on_crash: Callable[[BaseException, str], None]
) -> None:
    """Wrap the model's compiled train/test functions (once): `run_train_step(function,
    iterator)` runs a training call (the input probe times its batch fetch); `on_crash(error,
    phase)` records an exception before it propagates."""
    for attribute, phase in _STEP_FUNCTIONS:
        original = getattr(model, attribute, None)
        if original is None or getattr(original, "_trainhealth_crash_guard", False):
            continue

        def recorded_call(iterator, _original=original, _phase=phase):
            try:
                if _phase == "training":
                    return run_train_step(_original, iterator)
                return _original(iterator)
            except (StopIteration, tf.errors.OutOfRangeError):
                raise  # the normal end of an epoch
            except Exception as err:
                on_crash(err, _phase)
                raise

        recorded_call._trainhealth_crash_guard = True
        recorded_call.__wrapped__ = original
        setattr(model, attribute, recorded_call)


def unwrap_step_functions(model: Any) -> None:
    for attribute, _ in _STEP_FUNCTIONS:
        function = getattr(model, attribute, None)
        if getattr(function, "_trainhealth_crash_guard", False):
            setattr(model, attribute, function.__wrapped__)
