"""The words of a comparison: a setting's value as text, and the fix that sets it back, with the
line of Keras to paste."""

from __future__ import annotations

import dataclasses

from tb_trainhealth.compare.culprit import OPTIMIZER_OWN
from tb_trainhealth.compare.settings_diff import Change
from tb_trainhealth.contract.run_settings import DATA, RunSettings, Value
from tb_trainhealth.findings import LEARNING_RATE, LOSS, Direction, Fix, Intent

FIT_ARGUMENTS = ("batch_size", "epochs", "steps_per_epoch", "initial_epoch")
# What an optimizer's constructor takes: the rate, its own settings, decay and clipping.
OPTIMIZER_ARGUMENTS = {"learning_rate", "weight_decay", "clipnorm", "clipvalue", "global_clipnorm"} | OPTIMIZER_OWN


def value(setting_value: Value) -> str:
    """As a user would type it: 0.001, "relu", None (not set), [0.5, 0.5]."""
    if setting_value is None:
        return "not set"
    if isinstance(setting_value, float):
        return f"{setting_value:.4g}"
    if isinstance(setting_value, list):
        return "[" + ", ".join(f"{v:.3g}" for v in setting_value[:6]) + (", ...]" if len(setting_value) > 6 else "]")
    return str(setting_value)


# Order-free fingerprints of the data set: their numbers mean nothing to a reader, only that they moved.
FINGERPRINT_WORDS = {"train_inputs": "other training inputs", "train_labels": "other training labels"}


def change_text(change: Change) -> str:
    """A change as a reader wants it: "dense.activation: relu -> linear"; data in words, class
    shares as percentages, a fingerprint as what moved."""
    setting, old, new = change.setting, change.baseline, change.run
    if setting in FINGERPRINT_WORDS and old is not None and new is not None:
        return f"{setting}: {FINGERPRINT_WORDS[setting]} (another set, or the same rows changed)"
    if setting.endswith("label_distribution") and isinstance(old, list) and isinstance(new, list):
        return f"{setting}: {_distribution(old)} -> {_distribution(new)}"
    return f"{setting}: {value(old)} -> {value(new)}"


def cause_text(change: Change) -> str:
    """A change as "likely cause ..." says it, in the pair's title and the many-runs line alike."""
    return change_text(change).replace(":", "", 1)


def _distribution(values: list[float]) -> str:
    """Class shares as percentages; a regression's [mean, std] as words."""
    if len(values) == 2 and not (min(values) >= 0 and abs(sum(values) - 1) < 0.02):
        return f"targets' mean {values[0]:.3g}, std {values[1]:.3g}"
    shown = " / ".join(f"{share:.0%}" for share in values[:6]) + (" / ..." if len(values) > 6 else "")
    return f"class shares {shown}"


def _python(setting_value: Value) -> str:
    return repr(setting_value) if not isinstance(setting_value, float) else f"{setting_value:.6g}"


def set_back(change: Change, run: RunSettings) -> Fix:
    """Set the setting back to the baseline's value: the sentence, the code and what it changes
    (so the run's plan can tell it from, or merge it with, the rules' advice on the same setting)."""
    fix = _set_back(change, run)
    return dataclasses.replace(fix, intents=back_intents(change)) if change.setting not in DATA else fix


def back_intents(change: Change) -> tuple[Intent, ...]:
    """Back to the baseline's value: a number raised or lowered, a callback removed, else changed."""
    owner, _, key = change.setting.rpartition(".")
    old, new = change.baseline, change.run
    if old is None and owner[:1].isupper():
        return (Intent(owner, Direction.REMOVE),)
    name = key if owner[:1].isupper() or owner == "learning_rate_schedule" else change.setting
    name = {"learning_rate": LEARNING_RATE, "loss": LOSS}.get(name, name)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old, new))
    if numbers and old != new:
        return (Intent(name, Direction.RAISE if old > new else Direction.LOWER),)
    return (Intent(name, Direction.CHANGE),)


def _set_back(change: Change, run: RunSettings) -> Fix:
    setting, old = change.setting, change.baseline
    back = f"Set {setting} back to the baseline's {value(old)}"
    if setting in DATA:
        return Fix(
            f"The training data differ from the baseline's ({change_text(change)}): "
            "check the step that builds them (a filter, a join, the label mapping, a split) against the baseline's."
        )
    owner, _, key = setting.rpartition(".")
    if old is None:  # the run set what the baseline did not
        what = f"the {owner} callback" if owner[:1].isupper() else setting
        return Fix(f"Remove {what}: the baseline ran without it ({setting} = {value(change.run)} here).")
    if setting in FIT_ARGUMENTS:
        return Fix(back + ".", f"model.fit(x, y, {setting}={_python(old)}, ...)")
    optimizer = run.settings.get("optimizer")
    if setting == "optimizer":
        return Fix(back + ".", f"model.compile(optimizer=keras.optimizers.{old}(), loss=..., metrics=[...])")
    if setting in OPTIMIZER_ARGUMENTS:
        name = optimizer if isinstance(optimizer, str) else "Adam"
        return Fix(back + ".", f"optimizer = keras.optimizers.{name}({setting}={_python(old)})")
    if setting == "loss":
        return Fix(back + ".", f"model.compile(optimizer=..., loss={_python(old)}, metrics=[...])")
    if owner == "loss":
        return Fix(back + ".", f"loss = keras.losses.{run.settings.get('loss', 'Loss')}({key}={_python(old)})")
    if owner == "learning_rate_schedule" or setting == "learning_rate_schedule":
        schedule = run.settings.get("learning_rate_schedule") if owner else old
        argument = f"{key}={_python(old)}, ..." if owner else "..."
        return Fix(back + ".", f"learning_rate = keras.optimizers.schedules.{schedule}({argument})")
    if owner and owner[:1].isupper():  # a callback: "EarlyStopping.patience"
        return Fix(back + ".", f"keras.callbacks.{owner}({key}={_python(old)}, ...)")
    if owner:
        cls = next((c for name, c in run.layers if name == owner), "Layer")
        return Fix(back + f" (layer {owner!r}).", f"keras.layers.{cls}(..., {key}={_python(old)})")
    return Fix(back + ".")
