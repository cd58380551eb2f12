"""Calls a `tf.function` that takes a tf.data iterator through the trace it already made.

On every call a `tf.function` works out which of its traces fits its arguments; for an
iterator argument that takes ~0.1 ms on 2 CPU cores: a tenth of a tiny MLP's tf_keras step,
paid on every step (`bench/overhead.py --mlp --tf-keras`). The iterators of a fit's epochs
all have the same element spec, so the trace the first call used (traced then, if it had to
be, exactly as that call would) is kept and called directly while the spec stays the same.
The same graph runs with the same inputs; only the lookup is skipped. Under
`tf.config.run_functions_eagerly(True)` every call goes through the function (which then runs eagerly).

Example:

```python
step = ConcreteCall(train_function)
outputs = step(iterator)  # as train_function(iterator)
```
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf


class ConcreteCall:
    def __init__(self, function: Any):
        self.function = function
        self._spec: Any = None
        self._concrete: Any = None

    def __call__(self, iterator: Any) -> Any:
        if tf.config.functions_run_eagerly():
            return self.function(iterator)
        spec = iterator.element_spec
        if self._concrete is not None and (spec is self._spec or spec == self._spec):
            return self._concrete(iterator)
        outputs = self.function(iterator)
        self._spec, self._concrete = spec, self.function.get_concrete_function(iterator)
        return outputs
