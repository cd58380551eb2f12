"""Findings: what the rule engine says about a run, as plain data."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from tb_trainhealth.contract.vocab import RunStatus


class Severity(enum.IntEnum):
    INFO = 0
    WARNING = 1
    CRITICAL = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (use info, warning or critical)") from None


class Direction(enum.Enum):
    LOWER = "lower"
    RAISE = "raise"
    ADD = "add"
    REMOVE = "remove"
    CHANGE = "change"  # to another value, neither more nor less (an activation, a loss)


# Directions that undo each other on one setting: a plan never holds both.
_OPPOSITE = {
    Direction.LOWER: Direction.RAISE,
    Direction.RAISE: Direction.LOWER,
    Direction.ADD: Direction.REMOVE,
    Direction.REMOVE: Direction.ADD,
}


@dataclasses.dataclass(frozen=True)
class Intent:
    """What a fix changes, as data: which setting, which way. The run's plan (advice/plan.py)
    merges, orders and matches fixes with the trials that measured them by this, never by the
    sentence."""

    setting: str
    direction: Direction

    def opposes(self, other: Intent) -> bool:
        """The two point opposite ways on one setting (learning rate up and down)."""
        return self.setting == other.setting and _OPPOSITE.get(self.direction) == other.direction

    def to_dict(self) -> dict[str, str]:
        return {"setting": self.setting, "direction": self.direction.value}

    @classmethod
    def parse(cls, data: Any) -> Intent | None:
        """From `to_dict`'s form; None for anything else (a newer writer's direction)."""
        try:
            return cls(str(data["setting"]), Direction(data["direction"]))
        except (KeyError, TypeError, ValueError):
            return None


# The settings fixes name (Intent.setting).
LEARNING_RATE = "learning_rate"
CLIPNORM = "clipnorm"
EARLY_STOPPING = "early_stopping"
LR_SCHEDULE = "lr_schedule"
EPOCHS = "epochs"  # train longer (more steps at the same settings)
OUTPUT_ACTIVATION = "output_activation"
LOSS = "loss"  # the loss function, or its from_logits
INPUT_SCALE = "input_scale"  # standardise (or rescale) the inputs
TARGET_SCALE = "target_scale"  # standardise the regression targets
INITIALIZER = "initializer"
HIDDEN_ACTIVATION = "hidden_activation"  # a non-linearity between layers
REGULARIZATION = "regularization"  # dropout, weight penalties
RECOMPILE = "recompile"  # compile again after a trainable change
LABELS = "labels"  # the labels' encoding or content
TF_DATA = "tf_data"  # a tf.data pipeline's own settings (prefetch, parallel map, cache)
LOWER_RATE = Intent(LEARNING_RATE, Direction.LOWER)
RAISE_RATE = Intent(LEARNING_RATE, Direction.RAISE)
ADD_CLIPPING = Intent(CLIPNORM, Direction.ADD)
ADD_EARLY_STOPPING = Intent(EARLY_STOPPING, Direction.ADD)
ADD_LR_SCHEDULE = Intent(LR_SCHEDULE, Direction.ADD)
MORE_EPOCHS = Intent(EPOCHS, Direction.RAISE)
CHANGE_OUTPUT = Intent(OUTPUT_ACTIVATION, Direction.CHANGE)
CHANGE_LOSS = Intent(LOSS, Direction.CHANGE)
SCALE_INPUTS = Intent(INPUT_SCALE, Direction.ADD)
SCALE_TARGETS = Intent(TARGET_SCALE, Direction.ADD)
CHANGE_INITIALIZER = Intent(INITIALIZER, Direction.CHANGE)
ADD_NONLINEARITY = Intent(HIDDEN_ACTIVATION, Direction.ADD)
ADD_REGULARIZATION = Intent(REGULARIZATION, Direction.ADD)
REMOVE_REGULARIZATION = Intent(REGULARIZATION, Direction.REMOVE)
ADD_RECOMPILE = Intent(RECOMPILE, Direction.ADD)
CHANGE_LABELS = Intent(LABELS, Direction.CHANGE)
TUNE_TF_DATA = Intent(TF_DATA, Direction.CHANGE)
CHANGE_HIDDEN_ACTIVATION = Intent(HIDDEN_ACTIVATION, Direction.CHANGE)
ADD_CLASS_WEIGHTS = Intent("class_weight", Direction.ADD)
ADD_SHUFFLE = Intent("shuffle", Direction.ADD)  # shuffle the samples (inputs and labels together)
RAISE_BATCH_SIZE = Intent("batch_size", Direction.RAISE)


@dataclasses.dataclass(frozen=True)
class Fix:
    """One change a rule would suggest: a short sentence and, where one exists, code to paste;
    `intents` say what it changes (the sentence is how it is said). A finding's fixes are its
    candidates for the run's one plan (advice/plan.py), never shown as a list of their own."""

    text: str
    code: str | None = None
    intents: tuple[Intent, ...] = ()

    def does(self, intent: Intent) -> bool:
        return intent in self.intents


@dataclasses.dataclass(frozen=True)
class Fact:
    """One measured fact behind a finding, as text (the CLI prints it, the tab tabulates it):
    findings backed by events (an OOM, a crash, a lint check) have facts instead of a chart."""

    label: str
    value: str


@dataclasses.dataclass(frozen=True)
class Evidence:
    """Which series show the problem, and over which range of the run's axis (batch steps,
    or epochs numbered from 1 on runs that only have per-epoch data); the layer it names; the
    check (a lint or pipeline check id) it comes from; and the measured facts."""

    series: tuple[str, ...]
    start_step: int | None = None
    end_step: int | None = None
    layer: str | None = None
    facts: tuple[Fact, ...] = ()
    check: str | None = None


@dataclasses.dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    step: int | None
    title: str
    detail: str
    evidence: Evidence
    fixes: tuple[Fix, ...] = ()
    # Onset as an epoch number (from 1, as Keras prints "Epoch 9/20") on runs that only
    # have per-epoch data; `step` is then None. `step` is always a batch step.
    epoch: int | None = None

    @property
    def onset(self) -> int | None:
        """Where the finding starts on its run's axis (the step, or the epoch)."""
        return self.step if self.step is not None else self.epoch

    @property
    def onset_text(self) -> str:
        """ " @ step 399", " @ epoch 9", or "" when the finding has no onset."""
        if self.step is not None:
            return f" @ step {self.step}"
        return f" @ epoch {self.epoch}" if self.epoch is not None else ""

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        """Identity across repeated diagnoses of a growing run (code, layer and check)."""
        return (self.code, self.evidence.layer, self.evidence.check)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.label,
            "step": self.step,
            "epoch": self.epoch,
            "title": self.title,
            "detail": self.detail,
            "evidence": {
                "series": list(self.evidence.series),
                "start_step": self.evidence.start_step,
                "end_step": self.evidence.end_step,
                "layer": self.evidence.layer,
                "check": self.evidence.check,
                "facts": [{"label": f.label, "value": f.value} for f in self.evidence.facts],
            },
            # The record's form keeps the rule's candidates (events, compare); a run's report shows
            # its one plan instead (report/run_report.py).
            "fixes": [fix_to_dict(f) for f in self.fixes],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        evidence = data.get("evidence") or {}
        return cls(
            code=str(data["code"]),
            severity=Severity.parse(str(data["severity"])),
            step=None if data.get("step") is None else int(data["step"]),
            title=str(data.get("title", "")),
            detail=str(data.get("detail", "")),
            evidence=Evidence(
                series=tuple(str(s) for s in evidence.get("series", ())),
                start_step=evidence.get("start_step"),
                end_step=evidence.get("end_step"),
                layer=evidence.get("layer"),
                facts=tuple(Fact(str(f["label"]), str(f["value"])) for f in evidence.get("facts", ())),
                check=evidence.get("check"),
            ),
            fixes=tuple(_fix_from_dict(f) for f in data.get("fixes", ()) if isinstance(f, dict) and "text" in f),
            epoch=None if data.get("epoch") is None else int(data["epoch"]),
        )


def fix_to_dict(fix: Fix) -> dict[str, Any]:
    return {"text": fix.text, "code": fix.code, "intents": [i.to_dict() for i in fix.intents]}


def _fix_from_dict(data: dict[str, Any]) -> Fix:
    intents = (Intent.parse(i) for i in data.get("intents") or ())
    return Fix(str(data["text"]), data.get("code"), tuple(i for i in intents if i is not None))


def run_status(findings: list[Finding]) -> RunStatus:
    """The run's badge: the worst severity at or above warning, else ok."""
    worst = max((f.severity for f in findings), default=Severity.INFO)
    return RunStatus(worst.label) if worst >= Severity.WARNING else RunStatus.OK
