"""`part_not_recorded`: a part of the callback was off, so some diagnoses cannot be made.

The callback turns a part off after an internal error (a Keras or TensorFlow internal that
moved, see `callback/frameworks/keras_private.py`) or where it cannot run (XLA, a platform),
and records a `part_off` event. Without this finding a run missing its gradient norms reads
as a run whose gradients were fine: the finding names what is missing and what it costs.
"""

from __future__ import annotations

from tb_trainhealth.contract.codes import Code
from tb_trainhealth.contract.events import Event, NonfiniteEvent, PartOffEvent
from tb_trainhealth.contract.vocab import STALE_TRAIN_STEP, Part
from tb_trainhealth.findings import Evidence, Finding, Fix, Severity
from tb_trainhealth.rules.fact_text import fact
from tb_trainhealth.signals import RunSignals

# Per part: (what the run lacks, what that costs).
_LOST: dict[str, tuple[str, str]] = {
    Part.WRITER: ("the event file stopped being written", "everything after this step is missing from the log"),
    Part.GRADIENTS: (
        "per-step loss, gradient norms (global and per layer) and weight norms not recorded",
        "exploding/vanishing-gradient and NaN-origin diagnoses are unavailable, and the loss rules "
        "see only the epoch logs",
    ),
    Part.NAN_ORIGIN: (
        "where the first NaN came from is not traced",
        "a nonfinite finding cannot name the input, layer or op a NaN started in",
    ),
    Part.MEMORY: ("memory readings not recorded", "memory_growth and the memory in use at an OOM are unavailable"),
    Part.HOST_MEMORY: (
        "host memory not recorded",
        "memory_growth of host memory is unavailable (device memory is still read on a GPU)",
    ),
    Part.EPOCH: (
        "Keras' epoch logs (metrics, validation) not recorded",
        "overfitting, undertrained and the other diagnoses of metrics and validation are unavailable",
    ),
    Part.WATCHDOG: (
        "the stall watchdog is not running",
        "a hang is not reported while it lasts (training_stalled), and a killed run cannot be told from "
        "a live one (ended_abruptly)",
    ),
    Part.CRASHES: (
        "an exception that ends training is not recorded",
        "training_crash is unavailable, and a crashed run may read as killed",
    ),
    Part.FIT_END: (
        "the end of a fit is not recorded",
        "a finished run may read as killed (ended_abruptly), and undertrained cannot see an early stop",
    ),
    Part.SETTINGS: (
        "the run's settings (optimizer, layers, data) not recorded",
        "tb-trainhealth compare cannot name which setting changed",
    ),
    Part.LINT: (
        "the model's last layer and settings not checked",
        "output_loss_mismatch and model_config are unavailable",
    ),
    Part.BATCH_LINT: (
        "the first batches' labels and inputs not checked",
        "label_problem, unnormalized_input, unnormalized_target and the label statistics other "
        "diagnoses use are unavailable",
    ),
    Part.WEIGHT_INIT: ("initial kernel statistics not recorded", "bad_initialization is unavailable"),
    Part.PIPELINE_LINT: ("the tf.data pipeline not checked", "input_pipeline_config is unavailable"),
    Part.ACTIVATIONS: ("dead and saturated units not measured", "dead_relu and saturated_activation are unavailable"),
    Part.PREFLIGHT: (
        "the preflight did not run",
        "initial_loss_off, cannot_fit_small_batch, input_ignored and no_gradient are unavailable",
    ),
    Part.DIAGNOSIS: (
        "the live diagnosis stopped",
        "nothing is printed while training and stop_on / on_finding do not fire (tb-trainhealth diagnose "
        "and the Health tab still judge the log)",
    ),
    Part.STOP_ON: ("stop_on is not applied", "training is not stopped on a finding (findings are still recorded)"),
    Part.BASELINE: (
        "the comparison with the baseline was not made",
        "worse_than_baseline is unavailable (run tb-trainhealth compare RUN BASELINE)",
    ),
    Part.BASELINE_SO_FAR: (
        "the run was not compared with the baseline at each epoch end",
        "a run behind its baseline is said at the end of the fit only",
    ),
}

INTERNAL_ERROR_FIX = Fix(
    "Nothing to change in your training: tb-trainhealth turned this part off after an internal error "
    "(the traceback is in the training log). A newer tb-trainhealth may bring it back; a report with the "
    "reason above helps.",
    "pip install -U tb-trainhealth",
)
# Parts ruled out by a setting the user can change for a run that needs them.
_SETTING_FIXES = {
    Part.NAN_ORIGIN: Fix(
        "To have the first NaN traced, rerun the failing set-up on one device without XLA.",
        "model.compile(optimizer, loss, jit_compile=False)",
    ),
    Part.PREFLIGHT: Fix("Run the preflight on a Keras 3 model (pip install keras>=3)."),
}


# Parts a setting rules out by design (documented: the first-NaN replay under XLA or a strategy)
# are named only where the run needed them: every healthy run on a GPU (XLA by default) would
# otherwise carry the same note. An internal error is always named.
_NEEDED_ONLY_WITH: dict[str, type[Event]] = {Part.NAN_ORIGIN: NonfiniteEvent}


def lost_with(part: str) -> tuple[str, str]:
    """(what the run lacks, what that costs) without `part`; a part named by a newer writer too."""
    return _LOST.get(part, (f"the {part} part is off", "the diagnoses that need it are unavailable"))


def check_part_not_recorded(run: RunSignals) -> list[Finding]:
    """One info finding per part that was off (at the first step it was) where it cost the run something."""
    first: dict[str, PartOffEvent] = {}
    for event in run.events_of(PartOffEvent):
        first.setdefault(event.part, event)
    return [_finding(event) for event in first.values() if _cost_something(run, event)]


def _cost_something(run: RunSignals, event: PartOffEvent) -> bool:
    needed_with = _NEEDED_ONLY_WITH.get(event.part)
    return event.error or needed_with is None or bool(run.events_of(needed_with))


def _finding(event: PartOffEvent) -> Finding:
    what, lost = lost_with(event.part)
    keras = f" (Keras {event.keras_version})" if event.keras_version and event.error else ""
    fix = INTERNAL_ERROR_FIX if event.error else _SETTING_FIXES.get(event.part)
    return Finding(
        code=Code.PART_NOT_RECORDED,
        severity=Severity.INFO,
        step=event.step,
        title=f"{what[0].upper()}{what[1:]} (from step {event.step})",
        detail=f"{what[0].upper()}{what[1:]}: {event.reason}{keras}. For this run, {lost}.",
        evidence=Evidence(
            (),
            event.step,
            None,
            facts=fact("part", event.part)
            + fact("reason", event.reason)
            + fact("cause", "internal error" if event.error else "setting or platform")
            + fact("keras", event.keras_version),
            check=event.part,
        ),
        fixes=(fix,) if fix is not None else (),
    )


RECOMPILE_FIX = Fix(
    "Compile again after changing `trainable` (Keras keeps the train step it traced until then).",
    "for layer in base.layers:\n    layer.trainable = True\nmodel.compile(optimizer, loss, metrics=metrics)",
)


def check_stale_train_step(run: RunSignals) -> list[Finding]:
    """`model_config` (warning): a fit ran Keras' train step traced before `trainable` changed, so
    it updates other variables than those marked trainable now (unfrozen layers stay frozen, frozen
    ones keep training). The callback left its probe out of that fit and said why (`STALE_TRAIN_STEP`)."""
    stale = [
        e
        for e in run.events_of(PartOffEvent)
        if e.part == Part.GRADIENTS and not e.error and e.reason.startswith(STALE_TRAIN_STEP)
    ]
    if not stale:
        return []
    event = stale[0]
    return [
        Finding(
            code=Code.MODEL_CONFIG,
            severity=Severity.WARNING,
            step=event.step,
            title=f"Trainable changed without compile: the fit from step {event.step} trains other variables "
            "than those marked trainable",
            detail=f"{event.reason[len(STALE_TRAIN_STEP) + 2 :]}. Keras reuses the train step it traced "
            "until the model is compiled again.",
            evidence=Evidence((), event.step, None, facts=fact("reason", event.reason), check=event.part),
            fixes=(RECOMPILE_FIX,),
        )
    ]
