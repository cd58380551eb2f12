"""`tb_trainhealth.fit`: `model.fit` that survives out-of-memory errors and explains crashes."""

from __future__ import annotations

import gc
import logging
from typing import Any

import keras
import tensorflow as tf

from tb_trainhealth.callback.frameworks.which_keras import TfKerasCallbackProtocol
from tb_trainhealth.callback.health_callback import HealthCallback
from tb_trainhealth.callback.step.memory import device_memory_mb, host_rss_mb

logger = logging.getLogger(__name__)


class TrainingOOMError(RuntimeError):
    """Out of memory at every batch size tb_trainhealth.fit was allowed to try."""


class _EpochTracker(TfKerasCallbackProtocol, keras.callbacks.Callback):
    """Remembers the epoch in progress, so a retry resumes from it."""

    def __init__(self, initial_epoch: int):
        super().__init__()
        self.epoch = initial_epoch

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch


def fit(
    model: keras.Model,
    x: Any = None,
    y: Any = None,
    *,
    log_dir: str,
    batch_size: int | None = None,
    oom_retry: bool = True,
    min_batch_size: int = 1,
    **fit_kwargs: Any,
) -> keras.callbacks.History:
    """`model.fit` with HealthCallback attached and out-of-memory retries.

    On `tf.errors.ResourceExhaustedError` the batch size is halved and training resumes
    from the epoch that failed, with the weights reached so far, down to `min_batch_size`.
    Numpy/tensor inputs are re-sliced; a `tf.data.Dataset` is re-batched with
    `ds.unbatch().batch(new_size)` (so a dataset batched with `drop_remainder=True`, or
    one whose elements are not uniform batches, loses those properties on retry). Other
    inputs (generators, `keras.utils.PyDataset`) cannot be resized: the OOM is recorded
    and the error explains what to change. Every retry is an `oom` event in the logs;
    giving up records a critical `oom` finding and raises `TrainingOOMError`.

    Example:

    ```python
    import tb_trainhealth

    history = tb_trainhealth.fit(model, x, y, log_dir="logs/run1", batch_size=1024, epochs=10)
    ```
    """
    if min_batch_size < 1:
        raise ValueError(f"min_batch_size must be >= 1, got {min_batch_size}")
    callbacks = list(fit_kwargs.pop("callbacks", None) or [])
    health = next((c for c in callbacks if isinstance(c, HealthCallback)), None)
    if health is None:
        health = HealthCallback(log_dir)
        callbacks.append(health)
    tracker = _EpochTracker(fit_kwargs.pop("initial_epoch", 0))
    health.oom_handled_by_caller = oom_retry  # OOMs are recorded as `oom` events below, not as crashes
    callbacks.append(tracker)
    history: dict[str, list] = {}
    data = x
    while True:
        try:
            kwargs = dict(fit_kwargs)
            if not isinstance(data, tf.data.Dataset):
                kwargs["batch_size"] = batch_size
            result = model.fit(data, y, initial_epoch=tracker.epoch, callbacks=callbacks, **kwargs)
        except tf.errors.ResourceExhaustedError as err:
            if not oom_retry:
                health.record_crash(err, phase="fit")
                raise
            _merge(history, model)
            failed = batch_size if not isinstance(data, tf.data.Dataset) else _dataset_batch_size(data, batch_size)
            failed = failed or 32  # Keras' default for arrays
            resizable = _resizable(data)
            smaller = failed // 2 if resizable and failed // 2 >= min_batch_size else None
            memory = device_memory_mb() or host_rss_mb()
            health.record_oom(tracker.epoch, failed, smaller, memory)
            if smaller is None:
                if not resizable:
                    raise TrainingOOMError(
                        f"out of memory at batch size {failed}, and tb_trainhealth.fit cannot resize a "
                        f"{type(data).__name__}: lower the batch size where the batches are made "
                        "(or pass numpy arrays or a tf.data.Dataset). Recorded in " + health.log_dir
                    ) from err
                raise TrainingOOMError(
                    f"out of memory at every batch size down to {failed} (min_batch_size={min_batch_size}); "
                    f"see the oom finding: tb-trainhealth diagnose {health.log_dir}"
                ) from err
            print(
                f"tb-trainhealth: out of memory at batch size {failed}; retrying epoch {tracker.epoch + 1} at batch size {smaller}"
            )
            batch_size = smaller
            if isinstance(data, tf.data.Dataset):
                data = data.unbatch().batch(smaller)
            model.train_function = None  # free the failed step's graph and buffers
            gc.collect()
            continue
        except Exception as err:
            # Outside the training step too (data adaptation, callbacks, validation): record, re-raise.
            health.record_crash(err, phase="fit")
            raise
        _merge(history, model)
        result.history = history
        return result


def _merge(history: dict[str, list], model: keras.Model) -> None:
    """Keep the completed epochs of every attempt in one History."""
    attempt = getattr(getattr(model, "history", None), "history", {}) or {}
    for key, values in attempt.items():
        history.setdefault(key, []).extend(values)


def _resizable(data: Any) -> bool:
    return (
        data is None
        or isinstance(data, tf.data.Dataset)
        or hasattr(data, "shape")
        or isinstance(data, (list, tuple, dict))
    )


def _dataset_batch_size(dataset: tf.data.Dataset, given: int | None) -> int | None:
    spec = tf.nest.flatten(dataset.element_spec)[0]
    if spec.shape.rank and spec.shape[0] is not None:
        return int(spec.shape[0])
    if given:
        return given
    for element in dataset.take(1):
        return int(tf.shape(tf.nest.flatten(element)[0])[0])
    return None
