"""Calling a tf.function on a tf.data iterator through the trace it already made (`ConcreteCall`)."""

from __future__ import annotations

import gc
import logging

import pytest
import tensorflow as tf

from tb_trainhealth.callback.step.concrete_call import ConcreteCall


class CountedFunction:
    """A tf.function that counts the calls that go through it (not those of its traces)."""

    def __init__(self, function):
        self.function, self.calls = function, 0

    def __call__(self, iterator):
        self.calls += 1
        return self.function(iterator)

    def get_concrete_function(self, iterator):
        return self.function.get_concrete_function(iterator)


def test_the_trace_is_called_directly_while_the_iterators_spec_stays_the_same():
    traces = []

    @tf.function
    def batch_sum(iterator):
        traces.append(1)
        return tf.reduce_sum(next(iterator))

    counted = CountedFunction(batch_sum)
    step = ConcreteCall(counted)
    integers = tf.data.Dataset.range(6).batch(2)
    epoch = iter(integers)
    assert [int(step(epoch)) for _ in range(3)] == [1, 5, 9]
    assert int(step(iter(integers))) == 1  # the next epoch's iterator: same spec
    assert counted.calls == 1 and len(traces) == 1

    floats = iter(tf.data.Dataset.from_tensor_slices([[0.5, 1.5], [2.0, 3.0]]))  # another spec
    assert [float(step(floats)), float(step(floats))] == [2.0, 5.0]
    assert counted.calls == 2 and len(traces) == 2  # through the function once: it traced

    assert int(step(iter(integers))) == 1  # back to the first spec: its trace, found by the function
    assert counted.calls == 3 and len(traces) == 2


def test_the_end_of_the_data_ends_the_call_as_it_would_the_functions():
    @tf.function
    def first(iterator):
        return next(iterator)

    step = ConcreteCall(first)
    epoch = iter(tf.data.Dataset.range(2))
    assert [int(step(epoch)), int(step(epoch))] == [0, 1]
    with pytest.raises(tf.errors.OutOfRangeError):  # Keras' epoch loop ends the epoch on it
        step(epoch)


def test_functions_run_eagerly_are_called_through_the_function_every_time():
    @tf.function
    def batch_sum(iterator):
        return tf.reduce_sum(next(iterator))

    counted = CountedFunction(batch_sum)
    step = ConcreteCall(counted)
    epoch = iter(tf.data.Dataset.range(8).batch(2))
    step(epoch)
    tf.config.run_functions_eagerly(True)
    try:
        assert [int(step(epoch)), int(step(epoch))] == [5, 9]
    finally:
        tf.config.run_functions_eagerly(False)
    assert counted.calls == 3  # the user's eager debugging is honoured
    assert int(step(epoch)) == 13 and counted.calls == 3


def test_an_iterators_flat_inputs_are_let_go_with_the_iterator():
    """Its resource is freed where it would be without us (destroying one can block)."""

    @tf.function
    def first(iterator):
        return next(iterator)

    step = ConcreteCall(first)
    epoch = iter(tf.data.Dataset.range(4))
    assert [int(step(epoch)) for _ in range(3)] == [0, 1, 2]
    assert len(step._flat_inputs) == 1
    del epoch
    gc.collect()
    assert len(step._flat_inputs) == 0


class PublicCallOnly:
    """A trace as a TensorFlow without ConcreteFunction._call_flat would have it."""

    def __init__(self, concrete):
        self.concrete, self.calls = concrete, 0

    def __call__(self, iterator):
        self.calls += 1
        return self.concrete(iterator)


def test_without_the_flat_call_the_trace_is_called_the_public_way():
    @tf.function
    def batch_sum(iterator):
        return tf.reduce_sum(next(iterator))

    traces: list[PublicCallOnly] = []

    def trace_without_flat_call(iterator):
        traces.append(PublicCallOnly(batch_sum.get_concrete_function(iterator)))
        return traces[-1]

    counted = CountedFunction(batch_sum)
    counted.get_concrete_function = trace_without_flat_call
    step = ConcreteCall(counted)
    epoch = iter(tf.data.Dataset.range(8).batch(2))
    assert [int(step(epoch)) for _ in range(3)] == [1, 5, 9]
    assert counted.calls == 1 and traces[0].calls == 2


def test_a_sweep_of_fresh_functions_raises_no_retracing_warning():
    """TensorFlow only sees the call that traces (one per fresh model): it must not warn of
    retracing in a hyperparameter sweep."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    def fresh_step():
        def step(iterator):
            return next(iterator)

        return tf.function(step)

    handler = Collect()
    tf.get_logger().addHandler(handler)
    try:
        for _ in range(8):
            step = ConcreteCall(fresh_step())
            epoch = iter(tf.data.Dataset.range(4))
            assert [int(step(epoch)) for _ in range(4)] == [0, 1, 2, 3]
    finally:
        tf.get_logger().removeHandler(handler)
    assert not [m for m in messages if "retracing" in m]
