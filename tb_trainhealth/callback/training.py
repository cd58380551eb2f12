"""`tb_trainhealth.fit`: `model.fit` that survives out-of-memory errors and explains crashes."""

from __future__ import annotations

import gc
import logging
from typing import Any

import keras
import tensorflow as tf

from tb_trainhealth.callback.frameworks.which_keras import TfKerasCallbackProtocol
from tb_trainhealth.callback.health_callback import HealthCallback
from tb_trainhealth.callback.step.memory import device_memory_mb, host_memory_limit_mb, host_rss_mb

logger = logging.getLogger(__name__)

# Growing back after an OOM: once this many steps in a row have fit at a batch size smaller than
# one that ran out of memory, at the next epoch end the batch size grows halfway back towards the
# smallest size that failed (a grown size that fails again goes back to the size that fit, and is
# the new ceiling)...
GROW_BACK_AFTER_STEPS = 200
# ...unless that gains less than this share of the batch (then the run has settled)...
MIN_GROW_SHARE = 0.125
# ...or the memory readings at the smaller size, scaled to the grown one (what the batch added above
# the fit's first reading grows with the batch), would pass this share of what the process may hold.
GROW_ROOM_SHARE = 0.9
# Memory is read every this many steps while a smaller batch runs (a /proc read: microseconds).
READ_MEMORY_EVERY = 8


class TrainingOOMError(RuntimeError):
    """Out of memory at every batch size tb_trainhealth.fit was allowed to try."""


class _EpochTracker(TfKerasCallbackProtocol, keras.callbacks.Callback):
    """Remembers the epoch in progress, so a retry resumes from it; after an OOM, counts the steps
    that fit at the smaller batch and ends the fit at an epoch end where the batch can grow back."""

    def __init__(self, initial_epoch: int, epochs: int | None, grow_after: int | None):
        super().__init__()
        self.epoch = initial_epoch
        self.epochs, self.grow_after = epochs, grow_after
        self.batch_size: int | None = None  # the size this fit runs at
        self.ceiling: int | None = None  # the smallest size that ran out of memory
        self.grow_to: int | None = None  # set where this fit ended to grow the batch
        self.steps, self.base_mb, self.peak_mb = 0, None, None

    def on_train_begin(self, logs=None):
        self.steps, self.grow_to = 0, None
        self.base_mb = self.peak_mb = _memory_mb()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.ceiling is not None and self.steps % READ_MEMORY_EVERY == 0:
            reading = _memory_mb()
            if reading is not None:
                self.peak_mb = max(self.peak_mb or reading, reading)

    def on_epoch_end(self, epoch, logs=None):
        target = self.grow_target(epoch)
        if target is not None:
            self.grow_to, self.epoch = target, epoch + 1
            self.model.stop_training = True

    def grow_target(self, epoch: int) -> int | None:
        """The batch size to grow to from the next epoch, or None to stay."""
        size, ceiling = self.batch_size, self.ceiling
        if size is None or ceiling is None or self.grow_after is None or self.steps < self.grow_after:
            return None
        if self.epochs is not None and epoch + 1 >= self.epochs:
            return None  # the fit is over anyway
        target = (size + ceiling) // 2
        if target - size < MIN_GROW_SHARE * size:
            return None
        limit = host_memory_limit_mb() if device_memory_mb() is None else None
        if limit is not None and self.base_mb is not None and self.peak_mb is not None:
            expected = self.base_mb + (self.peak_mb - self.base_mb) * target / size
            if expected > GROW_ROOM_SHARE * limit:
                return None
        return target


def _memory_mb() -> float | None:
    return device_memory_mb() or host_rss_mb()


def fit(
    model: keras.Model,
    x: Any = None,
    y: Any = None,
    *,
    log_dir: str,
    batch_size: int | None = None,
    oom_retry: bool = True,
    min_batch_size: int = 1,
    grow_back_after: int | None = GROW_BACK_AFTER_STEPS,
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

    After an OOM, once `grow_back_after` steps in a row fit at the smaller batch (None: never),
    the batch grows back at the next epoch end, halfway towards the smallest size that failed,
    where the memory readings leave room; a grown size that fails goes back to the size that
    fit. Each change is a `batch_size` event in the logs, and printed; the `oom` finding says
    the batch size the run settled on.

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
    epochs = fit_kwargs.get("epochs", 1)
    tracker = _EpochTracker(
        fit_kwargs.pop("initial_epoch", 0), epochs if isinstance(epochs, int) else None, grow_back_after
    )
    health.oom_handled_by_caller = oom_retry  # OOMs are recorded as `oom` events below, not as crashes
    callbacks.append(tracker)
    history: dict[str, list] = {}
    previous_fit: dict[int, int] = {}  # a grown batch size -> the size that fit before it
    data = x
    while True:
        try:
            kwargs = dict(fit_kwargs)
            if not isinstance(data, tf.data.Dataset):
                kwargs["batch_size"] = batch_size
            tracker.batch_size = (
                batch_size if not isinstance(data, tf.data.Dataset) else _dataset_batch_size(data, batch_size)
            )
            result = model.fit(data, y, initial_epoch=tracker.epoch, callbacks=callbacks, **kwargs)
        except tf.errors.ResourceExhaustedError as err:
            if not oom_retry:
                health.record_crash(err, phase="fit")
                raise
            _merge(history, model)
            failed = batch_size if not isinstance(data, tf.data.Dataset) else _dataset_batch_size(data, batch_size)
            failed = failed or 32  # Keras' default for arrays
            resizable = _resizable(data)
            fitted = previous_fit.get(failed)  # a grown size failed: back to the size that fit
            smaller = fitted or (failed // 2 if resizable and failed // 2 >= min_batch_size else None)
            tracker.ceiling = min(failed, tracker.ceiling or failed)
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
        if tracker.grow_to is not None and tracker.batch_size is not None:
            grown, size = tracker.grow_to, tracker.batch_size
            health.record_batch_size(tracker.epoch, grown, size, tracker.peak_mb, host_memory_limit_mb())
            print(
                f"tb-trainhealth: {tracker.steps} steps fit at batch size {size}; growing it back to {grown} "
                f"from epoch {tracker.epoch + 1}"
            )
            previous_fit[grown] = size
            batch_size = grown
            if isinstance(data, tf.data.Dataset):
                data = data.unbatch().batch(grown)
            model.train_function = None
            continue
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
