"""The series the rules read, which tags they come from, and how many points they keep.

Canonical names are what rules, evidence and the tab's charts use; the maps below say
which event-file tag (ours, Keras' TensorBoard callback's, or a plain
`tf.summary.scalar`) becomes which series. The write side uses the same map for its
in-memory copy, so the online engine sees what a reader of the files would see.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import tags

LOSS = "loss"  # training loss, one point per step (or per epoch when that is all there is)
BATCH_LOSS = "batch_loss"  # Keras' running mean over the epoch so far: saw-toothed
EPOCH_LOSS = "epoch_loss"
EPOCH_VAL_LOSS = "epoch_val_loss"
EPOCH_ACCURACY = "epoch_accuracy"
EPOCH_VAL_ACCURACY = "epoch_val_accuracy"
# Every series that holds the training loss, finest first (a run may have several).
TRAINING_LOSSES = (LOSS, BATCH_LOSS, EPOCH_LOSS)
GRAD_NORM = "grad_norm"
LEARNING_RATE = "learning_rate"
STEP_TIME_MS = "step_time_ms"
INPUT_WAIT_MS = "input_wait_ms"
NONFINITE_COUNT = "nonfinite_count"
LOSS_SCALE = "loss_scale"  # LossScaleOptimizer's dynamic scale, where it changes
HOST_MEMORY_MB = "host_memory_mb"
DEVICE_MEMORY_MB = "device_memory_mb"
OTHER_CPU_SHARE = "other_cpu_share"  # per epoch: how busy other processes kept the machine
LAYER_GRAD_NORM = "layer_grad_norm"
LAYER_WEIGHT_NORM = "layer_weight_norm"
LAYER_UPDATE_RATIO = "layer_update_ratio"
LAYER_GRAD_NONFINITE = "layer_grad_nonfinite"  # 1 per layer whose gradients held NaN/Inf, steps with hits only

# Keras' names for classification accuracy in `logs` (one is enough).
ACCURACY_KEYS = ("accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy")

# Our scalar tags -> series.
OUR_SCALARS = {
    tags.TAG_LOSS: LOSS,
    tags.TAG_GRAD_NORM: GRAD_NORM,
    tags.TAG_LEARNING_RATE: LEARNING_RATE,
    tags.TAG_STEP_TIME_MS: STEP_TIME_MS,
    tags.TAG_INPUT_WAIT_MS: INPUT_WAIT_MS,
    tags.TAG_NONFINITE_COUNT: NONFINITE_COUNT,
    tags.TAG_LOSS_SCALE: LOSS_SCALE,
    tags.TAG_HOST_MEMORY_MB: HOST_MEMORY_MB,
    tags.TAG_DEVICE_MEMORY_MB: DEVICE_MEMORY_MB,
    tags.TAG_OTHER_CPU_SHARE: OTHER_CPU_SHARE,
    tags.epoch_tag("loss"): EPOCH_LOSS,
    tags.epoch_tag("val_loss"): EPOCH_VAL_LOSS,
    **{tags.epoch_tag(key): EPOCH_ACCURACY for key in ACCURACY_KEYS},
    **{tags.epoch_tag("val_" + key): EPOCH_VAL_ACCURACY for key in ACCURACY_KEYS},
}
# Our per-layer vector tags -> layer series.
OUR_LAYER_TENSORS = {
    tags.TAG_LAYER_GRAD_NORM: LAYER_GRAD_NORM,
    tags.TAG_LAYER_WEIGHT_NORM: LAYER_WEIGHT_NORM,
    tags.TAG_LAYER_UPDATE_RATIO: LAYER_UPDATE_RATIO,
    tags.TAG_LAYER_GRAD_NONFINITE: LAYER_GRAD_NONFINITE,
}
# Loss tags written by Keras' TensorBoard callback or by hand with tf.summary.scalar.
TRAIN_LOSS_TAGS = {
    "epoch_loss": EPOCH_LOSS,
    "batch_loss": BATCH_LOSS,
    "loss": LOSS,
    "train_loss": LOSS,
    "training_loss": LOSS,
    "train/loss": LOSS,
    "loss/train": LOSS,
    "val_loss": EPOCH_VAL_LOSS,
    "epoch_val_loss": EPOCH_VAL_LOSS,
    "validation_loss": EPOCH_VAL_LOSS,
    "val/loss": EPOCH_VAL_LOSS,
    "loss/validation": EPOCH_VAL_LOSS,
}
# The same in Keras' `validation` sub-run.
VALIDATION_LOSS_TAGS = {"epoch_loss": EPOCH_VAL_LOSS, "loss": EPOCH_VAL_LOSS}
# Keras' TensorBoard callback writes `epoch_<metric>` at the epoch index (from 0) and
# `batch_<metric>` at the batch step: two x axes in one run unless they are reconciled.
KERAS_EPOCH_TAG_PREFIX = "epoch_"

# A run's x axis: batch steps wherever batch-level data exists, else epochs numbered from 1.
STEP_AXIS = "step"
EPOCH_AXIS = "epoch"

# Points per series the rules see, online and offline alike, so a diagnosis never depends
# on where it is looked at: the readers ask the data provider for this many, the callback's
# in-memory copy keeps this many (`decimate`). Rules are built to give the same answers on
# downsampled series; events are separate records and never downsampled.
MAX_POINTS = 5000


def decimate(steps: np.ndarray, values: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most `max_points` points: every other one dropped until they fit, the newest always kept."""
    while len(steps) > max_points:
        keep = np.zeros(len(steps), dtype=bool)
        keep[::-2] = True
        steps, values = steps[keep], values[keep]
    return steps, values
