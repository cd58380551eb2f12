"""Names both sides must spell the same: lint checks, pipeline checks, loss kinds, the callback's parts.

The write side sets them, the rules look them up: an enum here instead of a string
literal typed on each side. Values are what is written to disk: never rename one.
"""

from __future__ import annotations

import enum


class Name(str, enum.Enum):
    """A name written to disk: compares, hashes, prints and serializes as its value."""

    def __str__(self) -> str:
        return self.value


class RunStatus(Name):
    """A run's badge, as the CLI's JSON and the tab's routes say it; `rank` orders runs worst first."""

    CRITICAL = "critical"
    WARNING = "warning"
    OK = "ok"
    UNREADABLE = "unreadable"  # nothing of it could be read: no finding, because nothing was looked at
    PENDING = "pending"  # the tab has not diagnosed it yet (a big logdir): it asks again soon

    @property
    def rank(self) -> int:
        """Worst first: an unreadable run ranks with the ok ones, a pending one last."""
        return _STATUS_RANK[self]


_STATUS_RANK = {
    RunStatus.CRITICAL: 0,
    RunStatus.WARNING: 1,
    RunStatus.OK: 2,
    RunStatus.UNREADABLE: 2,
    RunStatus.PENDING: 3,
}
# The statuses a diagnosis gives (unreadable and pending are the report's).
JUDGED_STATUSES = (RunStatus.CRITICAL, RunStatus.WARNING, RunStatus.OK)


class NonfiniteWhere(Name):
    """Where a step first held NaN/Inf (`NonfiniteEvent.where`): one event per place."""

    LOSS = "loss"
    GRADIENTS = "gradients"
    WEIGHTS = "weights"
    UNKNOWN = "unknown"  # a place a newer writer names: read, not dropped

    @classmethod
    def _missing_(cls, value: object) -> NonfiniteWhere:
        return cls.UNKNOWN


class NanOriginWhere(Name):
    """Where replaying the first NaN's batch found it came from (`NanOriginEvent.where`)."""

    INPUT = "input"
    LABELS = "labels"
    WEIGHTS = "weights"
    FORWARD = "forward"  # a layer's output, with the layer and op
    LOSS = "loss"
    UNKNOWN = "unknown"  # the replay found no NaN (or a place a newer writer names)

    @classmethod
    def _missing_(cls, value: object) -> NanOriginWhere:
        return cls.UNKNOWN

    @property
    def in_batch(self) -> bool:
        """The data itself held the NaN: no setting of the model made it."""
        return self in (NanOriginWhere.INPUT, NanOriginWhere.LABELS)


class FitStop(Name):
    """Why preflight's fit of one batch stopped (`LintEvent.fit_stopped`)."""

    REACHED = "reached"  # the loss got to the target
    STALLED = "stalled"  # it stopped falling
    STEPS = "steps"  # the step budget ran out
    TIME = "time"  # the time budget ran out
    NONFINITE = "nonfinite"  # the loss became NaN/Inf


class LintCheck(Name):
    """Train-start checks of the model and the first batches (`lint` events)."""

    # The last layer against the loss (rules/model_lint.py: output_loss_mismatch).
    PROBABILITIES_AS_LOGITS = "probabilities_as_logits"
    LOGITS_AS_PROBABILITIES = "logits_as_probabilities"
    SOFTMAX_SINGLE_UNIT = "softmax_single_unit"
    CATEGORICAL_SINGLE_UNIT = "categorical_single_unit"
    SIGMOID_WITH_CATEGORICAL = "sigmoid_with_categorical"
    RELU_WITH_CROSS_ENTROPY = "relu_with_cross_entropy"
    TARGETS_OUT_OF_OUTPUT_RANGE = "targets_out_of_output_range"
    # Layer settings (model_config).
    HIGH_DROPOUT = "high_dropout"
    DROPOUT_AFTER_OUTPUT = "dropout_after_output"
    # Two or more weighted layers and no non-linearity between them: the model is one linear map.
    LINEAR_STACK = "linear_stack"
    # Labels against the loss (label_problem).
    INTEGER_LABELS_FOR_CATEGORICAL = "integer_labels_for_categorical"
    ONEHOT_LABELS_FOR_SPARSE = "onehot_labels_for_sparse"
    # Label rows that are not one class each (several 1s, or none) under categorical_crossentropy.
    ROWS_NOT_ONE_CLASS = "rows_not_one_class"
    # Targets of 0 under mean_absolute_percentage_error, which divides by each target.
    ZERO_TARGETS_FOR_PERCENTAGE = "zero_targets_for_percentage"
    NEGATIVE_TARGETS_FOR_POISSON = "negative_targets_for_poisson"
    LABEL_OUT_OF_RANGE = "label_out_of_range"
    FRACTIONAL_SPARSE_LABELS = "fractional_sparse_labels"
    LABELS_OUTSIDE_UNIT_INTERVAL = "labels_outside_unit_interval"
    SINGLE_CLASS = "single_class"
    # Inputs (unnormalized_input).
    CONSTANT_INPUT = "constant_input"
    UNNORMALIZED_INPUT = "unnormalized_input"
    # Inputs orders of magnitude below unit scale (normalised twice, /255 of already-scaled data).
    TINY_INPUT = "tiny_input"
    # Not a problem: what the first batches' labels look like (class counts or target moments).
    LABEL_STATISTICS = "label_statistics"


class PipelineCheck(Name):
    """Checks of the user's tf.data pipeline at train start (`pipeline_lint` events)."""

    NO_PREFETCH = "no_prefetch"
    SEQUENTIAL_MAP = "sequential_map"
    CACHE_AFTER_AUGMENTATION = "cache_after_augmentation"
    EXPENSIVE_MAP_NOT_CACHED = "expensive_map_not_cached"
    SHUFFLE_AFTER_BATCH = "shuffle_after_batch"
    SMALL_SHUFFLE_BUFFER = "small_shuffle_buffer"
    PER_ELEMENT_MAP = "per_element_map"


class Part(Name):
    """The callback's parts, each turned off on its own (`part_off` events): by an internal
    error (`ProbeGuard`), or because it cannot run in this setting (XLA, a platform)."""

    WRITER = "writer"  # the event file
    GRADIENTS = "gradients"  # the step probe: per-step loss, gradient and weight norms, NaN counts
    NAN_ORIGIN = "nan origin"  # the first-NaN replay
    MEMORY = "memory"  # host and device memory readings
    HOST_MEMORY = "host memory"  # host RSS alone (a platform without /proc or `resource`)
    EPOCH = "epoch"  # Keras' epoch logs
    WATCHDOG = "watchdog"  # the stall watchdog
    CRASHES = "crashes"  # the exception that ends training
    FIT_END = "fit_end"  # how each fit ended
    SETTINGS = "settings"  # the run's settings, for compare
    LINT = "lint"  # the model's last layer and settings at train start
    BATCH_LINT = "batch lint"  # the first batches' labels and inputs
    WEIGHT_INIT = "weight init"  # kernel statistics at train start
    PIPELINE_LINT = "pipeline lint"  # the tf.data pipeline
    ACTIVATIONS = "activations"  # dead / saturated units
    PREFLIGHT = "preflight"
    DIAGNOSIS = "diagnosis"  # the live diagnosis (printing, on_finding, stop_on)
    STOP_ON = "stop_on"
    BASELINE = "baseline"  # the end-of-fit comparison with HealthCallback(baseline=...)
    # The same at each epoch end: its own part, so that an error there never costs the final verdict.
    BASELINE_SO_FAR = "baseline so far"
    TRIALS = "trials"  # the candidate changes tried at the end of a failing fit (callback/trials/)


# How the reason of a gradients `part_off` begins when the fit ran Keras' train step traced before
# `trainable` was changed (it updates other variables than those marked trainable: recompile).
STALE_TRAIN_STEP = "trainable changed without compile"


class LossKind(Name):
    """Keras' built-in losses the checks understand, by their canonical function name."""

    SPARSE_CATEGORICAL_CROSSENTROPY = "sparse_categorical_crossentropy"
    CATEGORICAL_CROSSENTROPY = "categorical_crossentropy"
    BINARY_CROSSENTROPY = "binary_crossentropy"
    MEAN_SQUARED_ERROR = "mean_squared_error"
    MEAN_ABSOLUTE_ERROR = "mean_absolute_error"
    HUBER = "huber"
    MEAN_SQUARED_LOGARITHMIC_ERROR = "mean_squared_logarithmic_error"
    LOG_COSH = "log_cosh"
    MEAN_ABSOLUTE_PERCENTAGE_ERROR = "mean_absolute_percentage_error"
    POISSON = "poisson"

    @property
    def keras_class(self) -> str:
        """The `keras.losses` class name, for fixes to paste."""
        return _KERAS_CLASS[self]

    @property
    def is_probabilistic(self) -> bool:
        return self in PROBABILISTIC_LOSSES

    @classmethod
    def named(cls, name: str) -> LossKind | None:
        """A loss given to `compile` as a string (`"mse"`, `"sparse_categorical_crossentropy"`)."""
        name = name.lower()
        try:
            return cls(_ALIASES.get(name, name))
        except ValueError:
            return None

    @classmethod
    def of_class(cls, class_name: str) -> LossKind | None:
        """A loss given as a `keras.losses` instance, by its class name (`"MeanSquaredError"`)."""
        return next((kind for kind in cls if kind.keras_class == class_name), None)


PROBABILISTIC_LOSSES = frozenset(
    {LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, LossKind.CATEGORICAL_CROSSENTROPY, LossKind.BINARY_CROSSENTROPY}
)
CATEGORICAL_LOSSES = frozenset({LossKind.SPARSE_CATEGORICAL_CROSSENTROPY, LossKind.CATEGORICAL_CROSSENTROPY})
REGRESSION_LOSSES = frozenset(kind for kind in LossKind if kind not in PROBABILISTIC_LOSSES)

_KERAS_CLASS = {
    LossKind.SPARSE_CATEGORICAL_CROSSENTROPY: "SparseCategoricalCrossentropy",
    LossKind.CATEGORICAL_CROSSENTROPY: "CategoricalCrossentropy",
    LossKind.BINARY_CROSSENTROPY: "BinaryCrossentropy",
    LossKind.MEAN_SQUARED_ERROR: "MeanSquaredError",
    LossKind.MEAN_ABSOLUTE_ERROR: "MeanAbsoluteError",
    LossKind.HUBER: "Huber",
    LossKind.MEAN_SQUARED_LOGARITHMIC_ERROR: "MeanSquaredLogarithmicError",
    LossKind.LOG_COSH: "LogCosh",
    LossKind.MEAN_ABSOLUTE_PERCENTAGE_ERROR: "MeanAbsolutePercentageError",
    LossKind.POISSON: "Poisson",
}
_ALIASES = {
    "mse": "mean_squared_error",
    "mae": "mean_absolute_error",
    "msle": "mean_squared_logarithmic_error",
    "mape": "mean_absolute_percentage_error",
    "logcosh": "log_cosh",
    "huber_loss": "huber",
}
