"""Calls a `tf.function` that takes a tf.data iterator through the trace it already made.

On every call a `tf.function` works out which of its traces fits its arguments (~0.1 ms on
2 CPU cores for an iterator argument), and that trace then binds the arguments to its
signature again (~0.15 ms): together a third of a tiny MLP's tf_keras step, paid on every step
(0.78 ms a step through the function, 0.68 through its trace, 0.52 with the flat call below:
`bench/overhead.py`'s tiny MLP, 40 alternating rounds of 50 steps). The iterators of a fit's
epochs all have the same element spec, so the trace the first call used (traced then, if it
had to be, exactly as that call would) is kept, and each iterator is flattened to the trace's
inputs once, not once a step. The same graph runs with the same inputs; only the lookups are
skipped. Under `tf.config.run_functions_eagerly(True)` every call goes through the function
(which then runs eagerly). TensorFlow's warning about frequent retracing is turned off for the
function: it only sees the calls that trace (one a fit for a fresh model), so in a sweep of
fresh models it would warn of retracing that is not there (a real retrace, a new spec every
epoch, goes unwarned; TensorFlow still counts these traces for other functions of the same code).

Example:

```python
step = ConcreteCall(train_function)
outputs = step(iterator)  # as train_function(iterator)
```
"""

from __future__ import annotations

import weakref
from typing import Any

import tensorflow as tf

from tb_trainhealth.callback.frameworks.tf_private import flat_call, silence_retracing_warning


class ConcreteCall:
    def __init__(self, function: Any):
        self.function = function
        self._spec: Any = None
        self._concrete: Any = None
        self._call_flat: Any = None
        silence_retracing_warning(function)
        # Each iterator's flat inputs, kept only while the iterator lives: its resource is then
        # freed where it would be without us (destroying one can wait on tf.data's threads).
        self._flat_inputs: weakref.WeakKeyDictionary[Any, list] = weakref.WeakKeyDictionary()

    def __call__(self, iterator: Any) -> Any:
        if tf.config.functions_run_eagerly():
            return self.function(iterator)
        spec = iterator.element_spec
        if self._concrete is None or not (spec is self._spec or spec == self._spec):
            outputs = self.function(iterator)
            self._spec, self._concrete = spec, self.function.get_concrete_function(iterator)
            self._call_flat = flat_call(self._concrete)  # (None: called the public way)
            return outputs
        if self._call_flat is None:
            return self._concrete(iterator)
        flat = self._flat_inputs.get(iterator)
        if flat is None:
            flat = self._flat_inputs[iterator] = tf.nest.flatten(iterator, expand_composites=True)
        return self._call_flat(flat, self._concrete.captured_inputs)
