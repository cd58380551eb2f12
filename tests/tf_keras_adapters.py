"""tf_keras' side of `tests/test_framework_adapters.py`, in a process of its own (tf_keras is
imported as `tf_keras`, next to nothing of Keras 3): asks each tf_keras adapter of
`keras_private` for what it reaches, on a tiny real model, optimizer and fit.

Usage: python tests/tf_keras_adapters.py
Prints, as its last line, JSON: {check: None when it found what it reaches, else why not}.
"""

from __future__ import annotations

import inspect
import json
import os
import traceback
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
import tf_keras

from tb_trainhealth.callback.frameworks import keras_private
from tb_trainhealth.callback.frameworks.which_keras import TfKerasCallbackProtocol

# What `TfKerasCallbackProtocol` defines for tf_keras' CallbackList to read.
PROTOCOL = (
    "_supports_tf_logs",
    "_implements_train_batch_hooks",
    "_implements_test_batch_hooks",
    "_implements_predict_batch_hooks",
)


def tiny_model() -> tf_keras.Model:
    tf_keras.utils.set_random_seed(0)
    inner = tf_keras.Sequential([tf_keras.Input((4,)), tf_keras.layers.Dense(4, name="inner_dense")], name="inner")
    inputs = tf_keras.Input((4,))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(2, name="out")(inner(inputs)))
    model.compile(tf_keras.optimizers.SGD(0.1), "mse")
    return model


def train_step() -> None:
    assert keras_private.runs_tf_keras_train_step(tiny_model()), "tf_keras' Model.train_step (its qualname, module)"


def flatten_layers() -> None:
    model = tiny_model()
    every = keras_private.flatten_layers(model)
    nested = keras_private.flatten_layers(model, include_self=False)
    assert every is not None and nested is not None, "Layer._flatten_layers(include_self=...)"
    assert every[0] is model and "inner_dense" in [layer.name for layer in nested], [layer.name for layer in nested]


def optimizer_built() -> None:
    model = tiny_model()
    optimizer = model.optimizer
    assert not keras_private.tf_keras_optimizer_built(optimizer)
    optimizer.build(model.trainable_variables)
    assert keras_private.tf_keras_optimizer_built(optimizer), "Optimizer._built"


def current_learning_rate() -> None:
    optimizer = tf_keras.optimizers.SGD(tf_keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5))
    optimizer.build([tf.Variable(1.0)])
    assert keras_private.compute_tf_keras_learning_rate(optimizer), "Optimizer._compute_current_learning_rate"


def _wrapped_name(optimizer: Any) -> str:
    seen: list[Callable] = []

    def wrap(original: Callable) -> Callable:
        seen.append(original)
        return lambda grads_and_vars: original(grads_and_vars)

    name = keras_private.wrap_tf_keras_all_reduce(optimizer, wrap)
    assert seen and callable(seen[0]) and name in optimizer.__dict__
    return name


def all_reduce() -> None:
    name = _wrapped_name(tf_keras.optimizers.SGD())
    assert name == keras_private.TF_KERAS_ALL_REDUCE, f"Optimizer.{keras_private.TF_KERAS_ALL_REDUCE}: {name}"


def legacy_all_reduce() -> None:
    name = _wrapped_name(tf_keras.optimizers.legacy.SGD())
    assert name == keras_private.TF_KERAS_LEGACY_ALL_REDUCE, f"OptimizerV2.{keras_private.TF_KERAS_LEGACY_ALL_REDUCE}"


class FitLocals(TfKerasCallbackProtocol, tf_keras.callbacks.Callback):
    """Reads the fit's locals as HealthCallback does, from `on_train_begin`."""

    def on_train_begin(self, logs=None):
        self.adapter = keras_private.fit_data_adapter()
        self.callbacks = keras_private.fit_local(keras_private.FIT_CALLBACKS)


def fit_locals() -> None:
    x, y = np.zeros((8, 4), np.float32), np.zeros((8, 2), np.float32)
    seen = FitLocals()
    tiny_model().fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4), epochs=1, verbose=0, callbacks=[seen])
    assert seen.adapter is not None, "fit's local `data_handler` and its `_adapter`"
    assert isinstance(keras_private.adapter_dataset(seen.adapter), tf.data.Dataset), "DatasetAdapter._dataset"
    assert seen in getattr(seen.callbacks, "callbacks", []), f"fit's local `{keras_private.FIT_CALLBACKS}`"


class FitData(TfKerasCallbackProtocol, tf_keras.callbacks.Callback):
    """Reads fit's data locals as the run settings do, from `on_train_begin`."""

    def on_train_begin(self, logs=None):
        self.found = keras_private.fit_data()


def fit_data() -> None:
    x, y = np.arange(32, dtype=np.float32).reshape(8, 4), np.zeros((8, 2), np.float32)
    seen = FitData()
    tiny_model().fit(x, y, epochs=2, initial_epoch=1, verbose=0, shuffle=False, validation_split=0.25, callbacks=[seen])
    assert set(seen.found) == set(keras_private.FIT_DATA), (
        f"fit's locals {keras_private.FIT_DATA}: {sorted(seen.found)}"
    )
    np.testing.assert_array_equal(np.asarray(seen.found["x"]), x[:6], err_msg="fit's local `x`: the training part")
    assert np.asarray(seen.found["val_x"]).shape == (2, 4) and seen.found["initial_epoch"] == 1
    assert seen.found["shuffle"] is False


def callback_protocol() -> None:
    """tf_keras' `Callback` defines them and its `CallbackList` reads them from every callback."""
    reads, base = inspect.getsource(tf_keras.callbacks.CallbackList), tf_keras.callbacks.Callback()
    for name in PROTOCOL:
        assert hasattr(base, name), f"Callback.{name}"
        assert name in reads, f"CallbackList no longer reads {name}"
        assert hasattr(TfKerasCallbackProtocol, name), f"TfKerasCallbackProtocol.{name}"


def train_function_traced() -> None:
    model = tiny_model()
    model.fit(np.ones((8, 4), np.float32), np.zeros((8, 2), np.float32), verbose=0)
    assert keras_private.train_function_traced(model.train_function), "Model.train_function is a traced tf.function"
    model.compile(tf_keras.optimizers.SGD(0.1), "mse")
    model.make_train_function()
    assert not keras_private.train_function_traced(model.train_function), "a new train_function reads as traced"


CHECKS = (
    train_step,
    train_function_traced,
    flatten_layers,
    optimizer_built,
    current_learning_rate,
    all_reduce,
    legacy_all_reduce,
    fit_locals,
    fit_data,
    callback_protocol,
)


def main() -> None:
    results: dict[str, str | None] = {}
    for check in CHECKS:
        try:
            check()
            results[check.__name__] = None
        except Exception as err:
            traceback.print_exc()
            results[check.__name__] = f"{type(err).__name__}: {err}"
    print(json.dumps(results))


if __name__ == "__main__":
    main()
