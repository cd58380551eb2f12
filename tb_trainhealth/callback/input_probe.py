"""Measured input wait: how long each training step waited for its batch.

Keras 3 (TF backend) fetches the batch *inside* the compiled train function
(`iterator.get_next()` in a `tf.function`), so from outside a step only its total
time is visible. Keras' train function also accepts any Python iterator of batches,
in which case it fetches with `next()` on the host and calls the compiled
one-step function on the batch. We pass it such an iterator, `TimedBatches`, that
calls the real iterator's `get_next()` and times that call: the time until the
batch exists is the wait; the rest of the step is compute. Same pipeline, same
compiled step, no extra op per step (measured cost: `bench/overhead.py`).

Only with `steps_per_execution == 1`: with more, Keras would run the steps one
host call each and lose what `steps_per_execution` is for, so there we pass the
real iterator through and record no wait.

Costs once per fit: when the last batch of an epoch is smaller, the one-step
function traces once more for the relaxed batch size (as with numpy input in
Keras' other backends).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import tensorflow as tf


class TimedBatches:
    """A one-batch-at-a-time view of a tf.data (or distributed) iterator that times each fetch."""

    def __init__(self, iterator: Any, waits_ms: list[float], inspect: Callable[[Any], None] | None = None):
        self._iterator = iterator
        self._waits_ms = waits_ms
        self._inspect = inspect

    def __iter__(self) -> TimedBatches:
        return self

    def __next__(self) -> Any:
        start = time.perf_counter()
        # get_next() raises OutOfRangeError at the end of the data, which Keras' epoch
        # loop turns into the end of the epoch, exactly as with its in-graph fetch.
        batch = self._iterator.get_next()
        self._waits_ms.append((time.perf_counter() - start) * 1000.0)
        if self._inspect is not None:
            self._inspect(batch)  # before the step runs: a batch that crashes it is still seen
        return batch


class InputProbe:
    """Runs Keras' train function on `TimedBatches`; collects one wait per step."""

    def __init__(self, steps_per_execution: int):
        self.enabled = steps_per_execution == 1
        self.waits_ms: list[float] = []
        # Called with the first batches on the host (first-batch lint), until set to None.
        self.inspect: Callable[[Any], None] | None = None

    def call(self, train_function: Callable[[Any], Any], iterator: Any) -> Any:
        if self.enabled and isinstance(iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)):
            return train_function(TimedBatches(iterator, self.waits_ms, self.inspect))
        return train_function(iterator)

    def take_waits(self) -> list[float]:
        waits, self.waits_ms = self.waits_ms, []
        return waits


class TfKerasInputProbe(InputProbe):
    """The same measurement on tf_keras, whose compiled train function takes only an iterator
    (a Python iterator would be traced as a constant, once per call). The batch is fetched and
    timed on the host as above, then run through a one-step function compiled once per train
    function: tf_keras' own step body (`python_function`) fed an iterator over that one batch,
    the fetch `next(iterator)` it traces being just the argument."""

    def call(self, train_function: Callable[[Any], Any], iterator: Any) -> Any:
        if not self.enabled or not isinstance(iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)):
            return train_function(iterator)
        batches = TimedBatches(iterator, self.waits_ms, self.inspect)
        python_function = getattr(train_function, "python_function", None)
        if python_function is None:  # run_eagerly: the body calls next() on the host itself
            return train_function(batches)
        one_step = getattr(train_function, "_trainhealth_one_step", None)
        if one_step is None:
            one_step = tf.function(lambda batch: python_function(iter((batch,))), reduce_retracing=True)
            train_function._trainhealth_one_step = one_step
        return one_step(next(batches))
