"""First-batch lint: do the labels fit the loss and the last layer, is the input on a
trainable scale? And label statistics for the constant-predictor baseline.

The batches come from the input-wait probe, which already holds each one on the
host before its step runs, so a label mistake that crashes the first step is still
recorded. Checks run on the first batch; class counts and target moments gather
over the first `LABEL_BATCHES` batches. Returns plain events; the read-side rules
`label_problem`, `output_loss_mismatch` and `unnormalized_input` explain them.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tb_trainhealth.callback.frameworks.which_keras import keras_of
from tb_trainhealth.callback.lint import constant_prediction
from tb_trainhealth.callback.lint.label_lint import check_labels, check_output_range, ignore_class_of, is_integral
from tb_trainhealth.callback.lint.model_lint import loss_of, output_activation
from tb_trainhealth.callback.lint.submodel import call_submodel
from tb_trainhealth.contract.events import LintEvent
from tb_trainhealth.contract.vocab import CATEGORICAL_LOSSES, REGRESSION_LOSSES, LintCheck, LossKind

LABEL_BATCHES = 20
# Inputs whose typical magnitude is beyond this are far outside the scale weights are
# initialised for (Glorot/He assume unit-variance inputs): raw 0-255 pixels, prices, counts.
UNNORMALIZED_SCALE = 20.0
# Inputs whose largest magnitude is below this are scaled to almost nothing: pixels divided by
# 255 twice (max 0.0039), a unit conversion applied twice. The first layer's outputs are then
# its biases, and its kernel must grow ~1000x before the input counts. Judged on the largest
# value, not the RMS: sparse features (one-hot, bag of words) have a tiny RMS but values ~1,
# and L2-normalised dense vectors of 10k dimensions still reach ~0.04.
TINY_INPUT_MAX = 0.01
# ...or dense inputs (at least half the values non-zero) whose RMS is below this: standardised
# features divided by 255 again (RMS 0.0039, their tails reach 0.02). L2-normalised dense
# vectors only get there beyond 40,000 dimensions.
TINY_INPUT_RMS = 0.005
DENSE_SHARE = 0.5
# Layers that normalise or look up their input themselves: their models take raw values.
# (Rescaling is plain arithmetic: what comes out of it is judged, so a Rescaling(1/255) on data
# already in [0, 1] is seen.)
_SELF_SCALING = (
    "Normalization",
    "BatchNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "UnitNormalization",
    "Embedding",
    "StringLookup",
    "IntegerLookup",
    "TextVectorization",
    "Hashing",
    "CategoryEncoding",
    "Discretization",
)
# keras.applications models whose pretrained weights expect "caffe" inputs (mean-subtracted
# 0-255 BGR, RMS ~60): the right scale for them, whatever the first layer's size says.
_CAFFE_MODE_APPLICATIONS = ("vgg16", "vgg19", "resnet50", "resnet101", "resnet152")
# Share of one class in the sampled labels above which the labels cannot teach anything.
SINGLE_CLASS_SHARE = 0.99
MAX_TRACKED_CLASSES = 1000
# The activation probe's batch grows from the first batches to at least this many samples,
# so a small batch size still gives each unit enough chances to fire.
PROBE_SAMPLES = 64
# The input scale is judged once the first batches hold this many samples together.
SCALE_SAMPLES = 32


def _split(batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, (tuple, list)) and len(batch) >= 2:
        return batch[0], batch[1]
    return batch, None


def gathered(batch: Any) -> Any:
    """A batch a distribution strategy split over replicas, put back together on the host
    (each replica's shard in order), so the checks and the probe see the whole batch."""

    def gather(value: Any) -> Any:
        if isinstance(value, tf.distribute.DistributedValues):
            return tf.concat(list(value.values), axis=0)
        return value

    return tf.nest.map_structure(gather, batch)


def _as_array(value: Any) -> np.ndarray | None:
    """A plain tensor's values on the host; None for dicts, ragged, per-replica values."""
    if isinstance(value, np.ndarray):
        return value
    if tf.is_tensor(value) and not isinstance(value, (tf.RaggedTensor, tf.SparseTensor)):
        return value.numpy()
    return None


def first_layer_input(model: keras.Model, inputs: Any) -> np.ndarray | None:
    """What the first layer with trainable weights receives for this batch: the scale its
    initialisation assumes. None when that is unknowable or the model scales input itself
    (a normalising layer, a pretrained backbone with its own preprocessing, a subclassed model)."""
    layers = getattr(model, "layers", [])
    if model.name in _CAFFE_MODE_APPLICATIONS:
        return None
    for layer in layers:
        if isinstance(layer, keras_of(model).Model) or type(layer).__name__ in _SELF_SCALING:
            return None
        if layer.trainable_weights:
            break
    else:
        return None
    if not getattr(model, "inputs", None):
        return None
    if layer.input is model.inputs[0]:
        return _as_array(inputs)
    try:  # a shared layer has no single input; a foreign graph may not rebuild
        return _as_array(call_submodel(keras_of(model).Model(model.inputs, layer.input), inputs))
    except Exception:
        return None


def check_input_scale(model: keras.Model, inputs: Any) -> list[LintEvent]:
    """Float inputs to the first weighted layer far from unit scale (after whatever
    Rescaling, Lambda or arithmetic the model applies first)."""
    values = first_layer_input(model, inputs)
    if values is None or values.size == 0 or not np.issubdtype(values.dtype, np.floating):
        return []
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return []
    if finite.min() == finite.max():  # e.g. uint8 pixels "normalised" with x // 255
        return [LintEvent(0, LintCheck.CONSTANT_INPUT, input_value=float(finite[0]))]
    scale = float(np.sqrt(np.mean(np.square(finite, dtype=np.float64))))  # RMS: typical magnitude
    dense = np.count_nonzero(finite) >= DENSE_SHARE * finite.size
    if float(np.max(np.abs(finite))) < TINY_INPUT_MAX or (dense and scale < TINY_INPUT_RMS):
        return [
            LintEvent(
                0, LintCheck.TINY_INPUT, input_rms=scale, input_min=float(finite.min()), input_max=float(finite.max())
            )
        ]
    if scale < UNNORMALIZED_SCALE:
        return []
    return [
        LintEvent(
            0,
            LintCheck.UNNORMALIZED_INPUT,
            input_rms=scale,
            input_min=float(finite.min()),
            input_max=float(finite.max()),
        )
    ]


def _output_shape(model: keras.Model) -> tuple[int, ...] | None:
    """One sample's output shape, where the model's single output has a fully known one."""
    outputs = getattr(model, "outputs", None) or []
    shape = tuple(outputs[0].shape[1:]) if len(outputs) == 1 else None
    return shape if shape and all(isinstance(n, int) for n in shape) else None


class BatchLint:
    """Lints the first batch at once; gathers label statistics over the first LABEL_BATCHES."""

    def __init__(self, model: keras.Model):
        self.model = model
        self.loss, self.from_logits = loss_of(model)
        self.activation, self.layer, self.units = output_activation(model)
        self.ignore_class = ignore_class_of(model)
        self.batches_seen = 0
        self._class_counts: np.ndarray | None = None
        self._batch_classes: list[tuple[int, int]] = []  # (classes, rows) of each batch, one class per sample
        self._moments = np.zeros(3)  # count, sum, sum of squares of regression targets / binary labels
        self._targets: list[np.ndarray] = []  # the first batches' labels, for the constant yardstick
        self._statistics_given = False
        self._scale_checked = False
        self.first_inputs: Any = None  # the first batches' inputs: the activation probe's batch

    @property
    def done(self) -> bool:
        return self.batches_seen >= LABEL_BATCHES

    def inspect(self, batch: Any) -> list[LintEvent]:
        """Events for this batch (checks on the first; label statistics after the last sampled one)."""
        self.batches_seen += 1
        inputs, labels = _split(gathered(batch))
        labels = _as_array(labels)
        events: list[LintEvent] = []
        self._grow_probe_batch(inputs)
        if self.batches_seen == 1:
            events += self._first_batch(labels)
        if not self._scale_checked and (self._probe_samples() >= SCALE_SAMPLES or self.done):
            events += self._input_scale()
        if labels is not None and (self.loss is not None or self._custom_classifier):
            self._gather(labels)
        if labels is not None and sum(len(t) for t in self._targets) < constant_prediction.MAX_ROWS:
            self._targets.append(labels)
        if self.batches_seen == LABEL_BATCHES:
            events += self.label_statistics()
        return events

    def _probe_samples(self) -> int:
        first = tf.nest.flatten(self.first_inputs)[0] if self.first_inputs is not None else None
        return int(first.shape[0] or 0) if tf.is_tensor(first) else 0

    def _input_scale(self) -> list[LintEvent]:
        """Input scale, judged on the first batches together (SCALE_SAMPLES samples, or what the
        fit had): with batch_size=1 one row that happens to be constant says nothing."""
        self._scale_checked = True
        inputs = _as_array(self.first_inputs)
        return check_input_scale(self.model, inputs) if inputs is not None else []

    def _grow_probe_batch(self, inputs: Any) -> None:
        if self.first_inputs is None:
            self.first_inputs = inputs
            return
        first = tf.nest.flatten(self.first_inputs)[0]
        if not tf.is_tensor(first) or first.shape[0] is None or first.shape[0] >= PROBE_SAMPLES:
            return
        try:  # per-replica or ragged values do not concatenate: keep the first batch
            self.first_inputs = tf.nest.map_structure(lambda a, b: tf.concat([a, b], 0), self.first_inputs, inputs)
        except Exception:
            return

    def _first_batch(self, labels: np.ndarray | None) -> list[LintEvent]:
        events = []
        if labels is not None and self.loss is not None:
            events += check_labels(self.loss, self.units, labels, self.ignore_class)
            if self.activation is not None:
                events += check_output_range(self.loss, self.activation, self.layer, labels)
        return events

    @property
    def _custom_classifier(self) -> bool:
        """A loss of the user's own (or a bare function) on several output units: the class counts
        still say what chance and a correct cross-entropy look like (rules/loss_metric.py)."""
        return self.loss is None and (self.units or 0) > 1

    def _gather(self, labels: np.ndarray) -> None:
        if self.loss in CATEGORICAL_LOSSES or self._custom_classifier:
            if self.ignore_class is not None:
                labels = labels[labels != self.ignore_class]
            one_hot = self.loss == LossKind.CATEGORICAL_CROSSENTROPY or (
                labels.ndim >= 2 and labels.shape[-1] == self.units
            )
            if one_hot and labels.ndim >= 2 and labels.shape[-1] > 1:  # one-hot (or soft) labels
                counts = labels.reshape(-1, labels.shape[-1]).sum(axis=0)
                if labels.ndim == 2:
                    self._batch_classes.append((len(np.unique(labels.argmax(axis=-1))), len(labels)))
            elif is_integral(labels) and labels.min() >= 0 and labels.max() < MAX_TRACKED_CLASSES:
                counts = np.bincount(labels.astype(np.int64).reshape(-1))
                if labels.ndim == 1 or labels.shape[1:] == (1,):
                    self._batch_classes.append((len(np.unique(labels)), len(labels)))
            else:
                return
            if self._class_counts is None:
                self._class_counts = np.zeros(len(counts))
            if len(counts) > len(self._class_counts):
                self._class_counts = np.pad(self._class_counts, (0, len(counts) - len(self._class_counts)))
            self._class_counts[: len(counts)] += counts
        elif self.loss in REGRESSION_LOSSES or self.loss == LossKind.BINARY_CROSSENTROPY:
            values = labels.astype(np.float64).reshape(-1)
            values = values[np.isfinite(values)]
            self._moments += (values.size, values.sum(), np.square(values).sum())

    def label_statistics(self) -> list[LintEvent]:
        """Once: class counts (classification) or target mean/variance (regression), what a
        constant prediction scores, and `single_class` when nearly every sampled label is one class."""
        if self._statistics_given or self.batches_seen == 0:
            return []
        self._statistics_given = True
        base = {"loss": self.loss, "units": self.units, "batches": self.batches_seen, **self._constant()}
        if self._class_counts is not None and self._class_counts.sum() > 0:
            counts = self._class_counts
            classes, rows = zip(*self._batch_classes) if self._batch_classes else ((), ())
            stats = LintEvent(
                0,
                LintCheck.LABEL_STATISTICS,
                class_counts=tuple(counts.tolist()),
                batch_classes=classes,
                batch_rows=rows,
                **base,
            )
            top = int(np.argmax(counts))
            share = float(counts[top] / counts.sum())
            classes_expected = max(self.units or 0, len(counts))
            if classes_expected > 1 and share >= SINGLE_CLASS_SHARE:
                single = LintEvent(
                    0,
                    LintCheck.SINGLE_CLASS,
                    label_class=top,
                    share=share,
                    labels=int(counts.sum()),
                    batches=self.batches_seen,
                )
                return [stats, single]
            return [stats]
        if self._moments[0] > 0:
            count, total, squares = self._moments
            mean = total / count
            variance = float(max(squares / count - mean**2, 0.0))
            return [
                LintEvent(0, LintCheck.LABEL_STATISTICS, count=int(count), mean=float(mean), variance=variance, **base)
            ]
        return [LintEvent(0, LintCheck.LABEL_STATISTICS, **base)] if "constant_loss" in base else []

    def _constant(self) -> dict[str, Any]:
        """`constant_loss` and `constant_how` where a constant prediction can be scored."""
        try:
            targets = np.concatenate([np.asarray(t) for t in self._targets]) if self._targets else None
        except ValueError:  # batches of different trailing shapes (sequences): no yardstick
            return {}
        loss = getattr(self.model, "loss", None)
        if isinstance(loss, str):
            loss = keras_of(self.model).losses.get(loss)
        if targets is None or not callable(loss):
            return {}
        found = constant_prediction.constant_score(
            loss, targets, self.units, self.loss, self.from_logits, _output_shape(self.model)
        )
        if not found:
            return {}
        floor = constant_prediction.floor_score(loss, targets, self.loss, self.from_logits, _output_shape(self.model))
        return {"constant_loss": found[0], "constant_how": found[1], **({"floor_loss": floor} if floor else {})}

    def finish(self) -> list[LintEvent]:
        """The input scale and label statistics of a fit shorter than the batches they sample."""
        return ([] if self._scale_checked else self._input_scale()) + self.label_statistics()
