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

Keras traces that one-step function for the shapes of the first batch it is
handed, and once more (relaxed) for a smaller last batch, where its in-graph
path traces once for the dataset's own shapes (batch size unknown). A graph of
a known batch size rounds differently (a mean over 19 rows becomes a multiply by
1/19): the fit's weights would differ in the last bits from the fit without the
callback (bench/transparency.py: the demo's rnn_clipped, 819 training rows). So
before its first host-fed step the one-step function is traced for the
dataset's element spec, the trace every batch then runs, as in Keras' own path.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable
from concurrent import futures
from typing import Any

import tensorflow as tf

from tb_trainhealth.callback.frameworks import keras_private
from tb_trainhealth.callback.step.concrete_call import ConcreteCall


class TimedBatches:
    """A one-batch-at-a-time view of a tf.data (or distributed) iterator that times each fetch."""

    def __init__(
        self,
        iterator: Any,
        waits_ms: list[float],
        inspect: Callable[[Any], None] | None = None,
        before_step: Callable[[Any], None] | None = None,
    ):
        """before_step: called once, with the first batch, before its step runs."""
        self._iterator = iterator
        self._waits_ms = waits_ms
        self._inspect = inspect
        self._before_step = before_step

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
        if self._before_step is not None:
            before_step, self._before_step = self._before_step, None
            before_step(batch)
        return batch


# A fit's (or an epoch's) iterator is let go this long after its last use, on a thread of its own.
RELEASE_AFTER_SECONDS = 2.0
_RELEASE_THREAD = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tb-trainhealth-release")


class InputProbe:
    """Runs Keras' train function on `TimedBatches`; collects one wait per step.

    Destroying a tf.data iterator that was read on the host with `get_next()` sometimes waits
    1-2 s for one of tf.data's threads (seen in a native stack dump: `~LogicalThreadWrapper`
    inside `~IteratorResource`, in 4 of 14 fresh one-epoch fits of the small CNN, at an epoch's
    end or when `fit` returns; never with Keras' own in-graph fetch). So the probe keeps the last
    iterator it saw and lets go of it on a background thread (`end_fit`, or a new iterator):
    whatever wait there is happens there, not on the training thread."""

    def __init__(self, steps_per_execution: int):
        self.enabled = steps_per_execution == 1
        self.waits_ms: list[float] = []
        # Called with the first batches on the host (first-batch lint), until set to None.
        self.inspect: Callable[[Any], None] | None = None
        # Called once, with the fit's first batch, before its step is traced and run.
        self.before_first_step: Callable[[Any], None] | None = None
        self._held: Any = None

    def call(self, train_function: Callable[[Any], Any], iterator: Any) -> Any:
        if self.enabled and isinstance(iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)):
            self._hold(iterator)
            before_step, self.before_first_step = self.before_first_step, None
            if not getattr(train_function, "_trainhealth_spec_traced", False):  # (once per function)
                before_step = _then_trace(before_step, train_function, iterator)
            return train_function(TimedBatches(iterator, self.waits_ms, self.inspect, before_step))
        return train_function(iterator)

    def _hold(self, iterator: Any) -> None:
        if iterator is not self._held:
            self.end_fit()
            self._held = iterator

    def end_fit(self) -> None:
        """Let go of the held iterator, on the release thread, once Keras has let go of it too."""
        if self._held is None:
            return
        box = [self._held]  # the probe's only reference, dropped by the release thread
        self._held = None
        try:
            _RELEASE_THREAD.submit(_release_at, box, time.monotonic() + RELEASE_AFTER_SECONDS)
        except RuntimeError:  # the interpreter is exiting: nothing waits for this thread any more
            box.clear()

    def take_waits(self) -> list[float]:
        waits, self.waits_ms = self.waits_ms, []
        return waits


def _then_trace(
    before_step: Callable[[Any], None] | None, train_function: Any, iterator: Any
) -> Callable[[Any], None]:
    """With the first batch, before its step: `before_step` (what must exist before the trace),
    then Keras' one-step function traced for the iterator's element spec (a batch size left
    unknown), where it has no trace yet: every host-fed batch then runs that graph."""

    def first(batch: Any) -> None:
        if before_step is not None:
            before_step(batch)
        with contextlib.suppress(AttributeError):  # (a callable that takes no attribute: traced again, harmless)
            train_function._trainhealth_spec_traced = True
        step = keras_private.one_step_on_data(train_function)
        if step is None or step.experimental_get_tracing_count() > 0:
            return
        if not isinstance(iterator, tf.distribute.DistributedIterator):  # (per-replica specs: left to Keras)
            step.get_concrete_function(iterator.element_spec)

    return first


class TfKerasInputProbe(InputProbe):
    """The same measurement on tf_keras, whose compiled train function takes only an iterator
    (a Python iterator would be traced as a constant, once per call).

    On one device the fetch is timed inside the graph: a step function compiled once per train
    function runs tf_keras' own step body (`python_function`) on `GraphTimedFetch`, whose `next()`
    puts the batch fetch between two `tf.timestamp`s; the step returns the wait (and the batch,
    for the first-batch lint) beside tf_keras' outputs. No fetch or argument handling on the host:
    on a ~1.4 ms step the host-side fetch below cost ~14%. And no ring buffer in a variable: its
    write (4 ops a step) cost ~13 us a step more than the extra output (tiny MLP). (A hang in the
    input pipeline then shows as a stall inside the step; the stall rule still names the input
    thread.)

    Under a distribution strategy (a distributed iterator) the batch is fetched and timed on the
    host as in `InputProbe`, then run through a one-step function fed an iterator over that one
    batch. On a tf.data iterator the compiled function is called through `ConcreteCall` (timed
    or not): tf_keras' own call of its train function spends ~0.25 ms a step finding its trace
    and binding the iterator to it."""

    def __init__(self, steps_per_execution: int, max_unread: int):
        """max_unread: waits kept between two reads (the newest; `read_back.ring_capacity`)."""
        super().__init__(steps_per_execution)
        self._graph_waits: deque[tf.Tensor] = deque(maxlen=max_unread)  # seconds, one scalar a step

    def call(self, train_function: Callable[[Any], Any], iterator: Any) -> Any:
        local = isinstance(iterator, tf.data.Iterator)
        compiled = hasattr(train_function, "get_concrete_function")  # (not run_eagerly)
        if not self.enabled or not (local or isinstance(iterator, tf.distribute.DistributedIterator)):
            return _concrete_call(train_function)(iterator) if local and compiled else train_function(iterator)
        self._hold(iterator)
        if not compiled:  # run_eagerly: the body calls next() on the host itself
            return train_function(TimedBatches(iterator, self.waits_ms, self.inspect))
        if local:
            return self._call_timed_in_graph(train_function, iterator)
        one_step = getattr(train_function, "_trainhealth_one_step", None)
        if one_step is None:
            python_function = train_function.python_function
            one_step = tf.function(lambda batch: python_function(iter((batch,))), reduce_retracing=True)
            train_function._trainhealth_one_step = one_step
        return one_step(next(TimedBatches(iterator, self.waits_ms, self.inspect)))

    def _call_timed_in_graph(self, train_function: Any, iterator: Any) -> Any:
        timed = getattr(train_function, "_trainhealth_timed_step", None)
        if timed is None:
            python_function = train_function.python_function

            def step(iterator):
                fetch = GraphTimedFetch(iterator)
                return python_function(fetch), fetch.batch, fetch.wait_seconds

            timed = train_function._trainhealth_timed_step = ConcreteCall(tf.function(step))
        outputs, batch, wait_seconds = timed(iterator)
        self._graph_waits.append(wait_seconds)
        if self.inspect is not None:
            self.inspect(batch)
        return outputs

    def take_waits(self) -> list[float]:
        waits = super().take_waits()
        taken, self._graph_waits = self._graph_waits, deque(maxlen=self._graph_waits.maxlen)
        if not taken:
            return waits
        seconds = tf.stack(list(taken)).numpy()  # one host copy for the window
        return waits + (seconds * 1000.0).tolist()


class GraphTimedFetch:
    """While tf_keras' step body is traced: `next()` fetches the batch between two timestamps
    (ordered by control dependencies: nothing else in the step can run before its batch exists);
    `wait_seconds` is the time between them."""

    def __init__(self, iterator: Any):
        self._iterator = iterator
        self.batch: Any = None
        self.wait_seconds: tf.Tensor | None = None

    def __iter__(self) -> GraphTimedFetch:
        return self

    def __next__(self) -> Any:
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            batch = self._iterator.get_next()
        with tf.control_dependencies(tf.nest.flatten(batch)):
            self.wait_seconds = tf.timestamp() - start
        self.batch = batch
        return batch


def _concrete_call(train_function: Any) -> ConcreteCall:
    """The train function's `ConcreteCall`, kept with it (across fits, like its traces)."""
    call = getattr(train_function, "_trainhealth_concrete_call", None)
    if call is None:
        call = train_function._trainhealth_concrete_call = ConcreteCall(train_function)
    return call


def _release_at(box: list, deadline: float) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()))  # (fit has returned by then: this drop is the last)
    box.clear()
