"""RunSettings: every setting a comparison with another run needs, written once per `fit`.

Written by the callback under `tags.TAG_RUN_SETTINGS` as one JSON object
`{"layers": [[name, class], ...], "settings": {name: value}}`. Values are JSON scalars
(str, int, float, bool, null) or short lists of numbers. Setting names are Keras' own
words, prefixed by the layer or callback where they belong, so `tb-trainhealth compare`
can say "dense_1.activation: relu -> linear" without knowing every setting in advance:

- fit and compile: `optimizer` (class name), `learning_rate` (first value),
  `learning_rate_schedule` (class name, or absent), the optimizer's own config keys
  (`momentum`, `beta_1`, `epsilon`, `clipnorm`, `clipvalue`, `global_clipnorm`,
  `weight_decay`, ...), `loss` (name), `loss.<config key>` (`loss.from_logits`,
  `loss.label_smoothing`), `metrics` (sorted names joined by ", "), `batch_size`,
  `epochs`, `steps_per_epoch`, `initial_epoch`, `steps_per_execution`, `jit_compile`,
  `dtype_policy`, `distribution_strategy`; also `shuffle`, `run_eagerly`, `num_replicas_in_sync`
  and `learning_rate_schedule.<config key>` (`learning_rate_schedule.decay_steps`, ...);
- layers, by the layer's name: `<layer>.units`, `.filters`, `.kernel_size`, `.activation`,
  `.kernel_initializer`, `.bias_initializer`, `.kernel_regularizer`, `.bias_regularizer`,
  `.activity_regularizer`, `.rate` (dropout), `.use_bias`, `.dropout`, `.recurrent_dropout`,
  `.strides`, `.padding`, `.dilation_rate`, `.pool_size`, `.recurrent_activation`,
  `.recurrent_initializer`, `.recurrent_regularizer`, `.momentum`, `.epsilon`,
  `.return_sequences`, `.input_dim`, `.output_dim`, `.num_heads`, `.key_dim`, `.trainable`
  (only when False); and every other constructor argument the layer's `get_config()` gives as a
  scalar or a list of numbers (`.data_format`, `.go_backwards`, `.mask_zero`, `.target_shape`,
  `.dims`, `.axis`, ...: `LAYER_EXTRA`, recorded by callbacks since 2026-12; not its name, dtype or seed);
  initializers and regularizers as short strings ("GlorotUniform", "L2(l2=0.01)");
- other callbacks, by class name: `EarlyStopping.patience`, `EarlyStopping.monitor`,
  `EarlyStopping.min_delta`, `EarlyStopping.restore_best_weights`,
  `EarlyStopping.baseline`, `EarlyStopping.start_from_epoch`, `EarlyStopping.mode`,
  `ReduceLROnPlateau.factor`, `.patience`, `.min_lr`, `.min_delta`, `.cooldown`, `.monitor`, `.mode`,
  `LearningRateScheduler.schedule` (the function's name), ...; `callbacks` (sorted class names
  joined by ", ");
- data: `train_samples`, `validation_samples`, `input_shape` (per sample, as a string),
  `input_dtype`, `input_mean`, `input_std`, `label_distribution` (class shares, or the
  targets' [mean, std]), `validation_label_distribution` (the same, of the validation labels),
  `train_inputs` and `train_labels` (order-free fingerprints: the same data set in any order
  gives the same numbers, a changed one does not); for class labels `distinct_input_share`
  (distinct input rows / samples), `duplicate_label_conflict` (share of samples whose exact
  input row also occurs with another label) and `duplicate_label_ceiling` (the highest
  training accuracy those labels allow);
- where it ran: `tensorflow_version`, `keras_version`, `python_version`, `device`.

A setting the writer could not read is absent, never guessed. Read-side safe: no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

# Settings that describe the machine and libraries, not the experiment: a comparison lists them
# last (they rarely explain a worse run, but a new Keras sometimes does).
ENVIRONMENT = ("tensorflow_version", "keras_version", "python_version", "device")
# Settings that describe the data set, not the training procedure.
DATA = (
    "train_samples",
    "validation_samples",
    "input_shape",
    "input_dtype",
    "input_mean",
    "input_std",
    "label_distribution",
    "validation_label_distribution",
    "train_inputs",
    "train_labels",
    "distinct_input_share",
    "duplicate_label_conflict",
    "duplicate_label_ceiling",
)

# Layer config keys never recorded as settings: names, dtypes, input shapes, seeds (a seed passed
# to a Dropout is another draw, not another model), and `trainable` (recorded only when False).
LAYER_CONFIG_SKIPPED = frozenset(
    {"name", "trainable", "dtype", "dtype_policy", "batch_shape", "batch_input_shape", "input_shape", "seed"}
)
# Layer settings recorded by every callback version: a run recorded since 2026-12 records every other constructor
# argument too, so one of those absent on one side only means an older recording, not a change.
LAYER_KEYS = (
    "units",
    "filters",
    "kernel_size",
    "strides",
    "padding",
    "dilation_rate",
    "pool_size",
    "activation",
    "recurrent_activation",
    "use_bias",
    "kernel_initializer",
    "bias_initializer",
    "recurrent_initializer",
    "kernel_regularizer",
    "bias_regularizer",
    "recurrent_regularizer",
    "activity_regularizer",
    "rate",
    "dropout",
    "recurrent_dropout",
    "momentum",
    "epsilon",
    "return_sequences",
    "input_dim",
    "output_dim",
    "num_heads",
    "key_dim",
)

Value = Any  # str | int | float | bool | None | list[float]


def _is_value(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return (
        isinstance(value, list)
        and len(value) <= 1000
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    )


@dataclasses.dataclass(frozen=True)
class RunSettings:
    layers: tuple[tuple[str, str], ...] = ()  # (name, class name) of each layer, in model order
    settings: dict[str, Value] = dataclasses.field(default_factory=dict)

    def get(self, name: str) -> Value:
        """The setting's value; None where it is absent (the writer could not read it)."""
        return self.settings.get(name)

    def number(self, name: str) -> float | None:
        """The setting as a finite number; None where it is absent, not a number, or a bool."""
        value = self.settings.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return float(value)

    def to_json(self) -> dict[str, Any]:
        return {"layers": [list(layer) for layer in self.layers], "settings": dict(self.settings)}

    @classmethod
    def parse(cls, raw: Any) -> RunSettings:
        """Never fails on data from disk: malformed layers or settings are left out one by one."""
        if not isinstance(raw, dict):
            return cls()
        layers = tuple(
            (layer[0], layer[1])
            for layer in raw.get("layers") or []
            if isinstance(layer, list) and len(layer) == 2 and all(isinstance(part, str) for part in layer)
        )
        settings = raw.get("settings")
        values = (
            {key: value for key, value in settings.items() if isinstance(key, str) and _is_value(value)}
            if isinstance(settings, dict)
            else {}
        )
        return cls(layers=layers, settings=values)
