"""Every private TensorFlow, Keras 3, tf_keras and TensorBoard internal the project reaches for
is where its adapter looks, in the installed versions (`callback/frameworks/tf_private.py`,
`callback/frameworks/keras_private.py`, `read/tensorboard_private.py`): an upgrade that moves
one fails here, naming it, not quietly somewhere in a probe that then turns itself off.
Tiny real models; tf_keras' in a process of its own (`tf_keras_adapters.py`)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import ROOT, run_python
from tensorflow.core.framework import graph_pb2

from tb_trainhealth.callback.frameworks import keras_private, tf_private
from tb_trainhealth.read import tensorboard_private

X, Y = np.ones((8, 4), np.float32), np.zeros((8, 2), np.float32)


def tiny_model() -> keras.Model:
    """A model with a nested one, compiled with a metric."""
    keras.utils.set_random_seed(0)
    inner = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4, name="inner_dense")], name="inner")
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2, name="out")(inner(inputs)))
    model.compile(keras.optimizers.SGD(0.1), "mse", metrics=["mae"])
    return model


# -- TensorFlow ------------------------------------------------------------------------------


def test_a_concrete_function_has_its_flat_call():
    @tf.function
    def first(iterator):
        return next(iterator)

    iterator = iter(tf.data.Dataset.range(3))
    concrete = first.get_concrete_function(iterator)
    call = tf_private.flat_call(concrete)
    assert call is not None, "ConcreteFunction._call_flat(tensor_inputs, captured_inputs) is gone or changed"
    assert int(call(tf.nest.flatten(iterator, expand_composites=True), concrete.captured_inputs)) == 0


def test_a_tf_function_has_its_retracing_warning_switch():
    assert tf_private.silence_retracing_warning(tf.function(lambda x: x)), "tf.function._omit_frequent_tracing_warning"


def test_the_no_merge_call_question_is_there():
    """True without a strategy; the adapter's fallback is False."""
    assert tf_private.strategy_supports_no_merge_call(), "tf.__internal__.distribute.strategy_supports_no_merge_call"


def test_a_dataset_gives_its_graph_sources_and_inputs():
    source = tf.data.Dataset.from_tensor_slices(np.zeros((16, 3), np.float32))
    dataset = source.map(lambda x: x * 2).batch(4)
    graph = graph_pb2.GraphDef.FromString(tf_private.serialized_graph(dataset))
    assert {"TensorSliceDataset", "MapDataset", "BatchDatasetV2"} <= {node.op for node in graph.node}
    assert [t.shape.as_list() for t in tf_private.dataset_tensors(source)] == [[16, 3]], "DatasetV2._tensors"
    (mapped,) = tf_private.dataset_inputs(dataset)
    assert tf_private.dataset_inputs(mapped) == [source], "DatasetV2._inputs()"


# -- Keras 3 ---------------------------------------------------------------------------------


def test_keras_3_models_give_their_train_step_layers_and_variables():
    model = tiny_model()
    assert keras_private.runs_keras_3_train_step(model), "TensorFlowTrainer.train_step (its qualname)"
    every, nested = keras_private.flatten_layers(model), keras_private.flatten_layers(model, include_self=False)
    assert every is not None and nested is not None, "Layer._flatten_layers(include_self=...)"
    assert every[0] is model and "inner_dense" in [layer.name for layer in nested]
    for variable in model.trainable_variables:
        assert isinstance(keras_private.backend_variable(variable), tf.Variable), "Variable._value"


def test_keras_3_compiled_metrics_build_from_a_batch():
    model = tiny_model()
    compiled = keras_private.compiled_metrics_and_loss(model)
    assert all(part is not None for part in compiled), "Trainer._compile_metrics / _compile_loss"
    assert not all(part.built for part in compiled)
    keras_private.symbolic_build(model, (tf.constant(X), tf.constant(Y)))  # Trainer._symbolic_build(data_batch=)
    assert all(part.built for part in compiled)


def test_keras_3_model_remembers_its_strategy():
    assert keras_private.model_strategy(tiny_model()) is None
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = tiny_model()
    assert keras_private.model_strategy(model) is strategy, "TensorFlowTrainer._distribute_strategy"


def test_keras_3_lambda_and_safe_mode():
    layer = keras.layers.Lambda(lambda x: x[:, :3], output_shape=(3,))
    assert keras_private.lambda_output_shape(layer) == (3,), "Lambda._output_shape"
    with keras_private.trusted_configs() as trusted:
        assert trusted, "keras.src.saving.serialization_lib.SafeModeScope"


def test_keras_3_optimizer_variables_and_all_reduce():
    variable = keras.Variable(np.ones(2, np.float32))
    optimizer = keras.optimizers.SGD(0.5)
    optimizer.build([variable])
    assert keras_private.optimizer_variables(optimizer) == [variable], "Optimizer._trainable_variables"
    seen: list[list] = []

    def wrap(original):
        def all_reduce(grads_and_vars):
            seen.append(list(grads_and_vars))
            return original(seen[-1])

        return all_reduce

    assert keras_private.wrap_keras_3_all_reduce(optimizer, wrap) == keras_private.KERAS_3_ALL_REDUCE
    optimizer.apply([tf.ones(2)], [variable])
    assert len(seen) == 1, f"apply no longer calls Optimizer.{keras_private.KERAS_3_ALL_REDUCE}"
    np.testing.assert_allclose(variable.numpy(), [0.5, 0.5])


def test_keras_3_one_step_on_data_is_the_tf_function_the_train_function_calls_per_host_batch():
    model = tiny_model()
    model.make_train_function()
    step = keras_private.one_step_on_data(model.train_function)
    assert step is not None and hasattr(step, "get_concrete_function"), (
        "TensorFlowTrainer._make_function's closure cell one_step_on_data (under functools.wraps)"
    )
    model.train_function(iter([(X[:4], Y[:4])]))  # (a Python iterator: the host-fed path)
    assert step.experimental_get_tracing_count() > 0, "the host-fed path no longer calls one_step_on_data"
    assert keras_private.one_step_on_data(lambda iterator: iterator) is None


def test_keras_3_train_function_traced_and_optimizer_known_variables():
    model = tiny_model()
    model.make_train_function()
    assert not keras_private.train_function_traced(model.train_function), "a new train_function reads as traced"
    assert keras_private.known_variables(model.optimizer) is None, "an unbuilt optimizer knows variables"
    model.fit(X, Y, verbose=0)
    assert keras_private.train_function_traced(model.train_function), (
        "train_function: a closure over tf.functions (TensorFlowTrainer._make_function)"
    )
    known = keras_private.known_variables(model.optimizer)
    assert known is not None and {id(v) for v in known} == {id(v) for v in model.trainable_variables}, (
        "Optimizer.built, Optimizer._trainable_variables"
    )


def test_keras_3_fit_locals():
    seen: dict[str, object] = {}

    class FitLocals(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen["adapter"] = keras_private.fit_data_adapter()
            seen["callbacks"] = keras_private.fit_local(keras_private.FIT_CALLBACKS)

    reader = FitLocals()
    data = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)
    tiny_model().fit(data, epochs=1, verbose=0, shuffle=False, callbacks=[reader])
    assert seen["adapter"] is not None, "fit's local `epoch_iterator` and its `data_adapter`"
    assert isinstance(keras_private.adapter_dataset(seen["adapter"]), tf.data.Dataset), "TFDatasetAdapter._dataset"
    assert reader in getattr(seen["callbacks"], "callbacks", []), f"fit's local `{keras_private.FIT_CALLBACKS}`"


def test_keras_3_fit_data_locals():
    """The run settings read fit's data from its locals (`run_settings`, `data_settings`)."""
    seen: dict[str, object] = {}

    class FitData(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen.update(keras_private.fit_data())

    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    tiny_model().fit(
        x, Y, epochs=2, initial_epoch=1, verbose=0, shuffle=False, validation_split=0.25, callbacks=[FitData()]
    )
    assert set(seen) == set(keras_private.FIT_DATA), f"fit's locals {keras_private.FIT_DATA}: found {sorted(seen)}"
    np.testing.assert_array_equal(np.asarray(seen["x"]), x[:6], err_msg="fit's local `x`: the training part")
    assert np.asarray(seen["y"]).shape == (6, 2) and np.asarray(seen["val_x"]).shape == (2, 4)
    assert seen["initial_epoch"] == 1 and seen["shuffle"] is False


# -- tf_keras --------------------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="tf-keras not installed")
def test_tf_keras_adapters():
    proc = run_python(os.path.join(ROOT, "tests", "tf_keras_adapters.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) >= 8 and {check: why for check, why in results.items() if why is not None} == {}


# -- TensorBoard's data server ---------------------------------------------------------------


def test_the_data_server_takes_every_flag_we_pass():
    from tensorboard.data import server_ingester

    try:
        binary = server_ingester.get_server_binary().path
    except server_ingester.NoDataServerError:
        pytest.skip("no data server for this platform")
    command = tensorboard_private.data_server_command(binary, "/logs", None, {"scalars": 0}, "/scratch")
    usage = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60).stdout
    for flag in command[1:]:
        name = flag.split("=", 1)[0]
        assert re.search(rf"(^|\s){re.escape(name)}\b", usage, re.MULTILINE), f"data server flag {name}"
