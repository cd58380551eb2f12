"""`HealthCallback(preflight=True)`: the preflight on the fit's own first batches, at train start.

The batch comes from a new pass over the fit's data (Keras' data adapter builds a fresh
tf.data pipeline for arrays, datasets and PyDatasets), so the fit itself reads every batch
as it would have. A plain Python generator cannot be read twice: the preflight is skipped
for it and says so. The lint of the fit's first batches is the callback's own (FitChecks):
only the preflight's measurements are recorded here.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any

import keras

from tb_trainhealth.callback.preflight.batch import take_batch
from tb_trainhealth.callback.preflight.run import FIT_SAMPLES, measure
from tb_trainhealth.callback.record.recording import Recording

# At train start the preflight takes at most this long (a healthy small model needs 1-4 s).
FIT_PREFLIGHT_SECONDS = 30.0
# Data adapters that hand out the user's own iterator: reading a batch would take it from the fit.
_READ_ONCE = ("GeneratorDataAdapter",)


def preflight_in_fit(model: keras.Model, adapter: Any, recording: Recording, step: int) -> None:
    """Measure on the fit's first batches and record the result (the engine judges it next)."""
    if adapter is None or type(adapter).__name__ in _READ_ONCE:
        print(
            "tb-trainhealth: preflight skipped: the training data is a Python generator, which cannot be "
            "read twice. Run tb_trainhealth.preflight(model, next(generator)) before fit instead.",
            file=sys.stderr,
        )
        return
    began = time.perf_counter()
    batch = take_batch(adapter.get_tf_dataset(), batch_size=FIT_SAMPLES)
    event, _ = measure(model, batch, began + FIT_PREFLIGHT_SECONDS)
    seconds = time.perf_counter() - began
    recording.event(dataclasses.replace(event, step=step, seconds=seconds, max_seconds=FIT_PREFLIGHT_SECONDS))
