"""The rules, and what the engine needs to know about each (the registry).

One small function per check, each RunSignals -> list[Finding]. A `RuleSpec` says which
codes a rule gives and how the engine runs it, so the engine treats no rule specially.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.rules.activations import check_dead_relu, check_saturated_activation
from tb_trainhealth.rules.baseline import check_worse_than_baseline
from tb_trainhealth.rules.class_balance import check_majority_class
from tb_trainhealth.rules.constant_yardstick import check_far_worse_than_constant, check_worse_than_constant
from tb_trainhealth.rules.crashes import check_oom, check_training_crash
from tb_trainhealth.rules.data_scale import check_unnormalized_input, check_unnormalized_target
from tb_trainhealth.rules.gradients import check_exploding_gradients, check_vanishing_gradients
from tb_trainhealth.rules.initialization import check_bad_initialization
from tb_trainhealth.rules.input_pipeline import check_input_bound, check_input_pipeline_config
from tb_trainhealth.rules.loss_curve import check_loss_plateau
from tb_trainhealth.rules.loss_divergence import check_loss_divergence
from tb_trainhealth.rules.loss_metric import check_loss_metric_mismatch
from tb_trainhealth.rules.loss_oscillation import check_loss_oscillation
from tb_trainhealth.rules.memory import check_memory_growth
from tb_trainhealth.rules.model_lint import check_model_config, check_output_loss_mismatch
from tb_trainhealth.rules.numerics import check_nonfinite
from tb_trainhealth.rules.overfitting import check_overfitting
from tb_trainhealth.rules.parts_off import check_part_not_recorded, check_stale_train_step
from tb_trainhealth.rules.preflight import check_initial_loss_off, check_no_gradient
from tb_trainhealth.rules.preflight_fit import check_cannot_fit_small_batch, check_input_ignored
from tb_trainhealth.rules.stalls import check_ended_abruptly, check_training_stalled
from tb_trainhealth.rules.training_data import check_label_problem
from tb_trainhealth.rules.undertrained import check_undertrained
from tb_trainhealth.signals import RunSignals


@dataclasses.dataclass(frozen=True)
class RuleSpec:
    check: Callable[[RunSignals], list[Finding]]
    codes: tuple[str, ...]
    # Judged only once training has ended (a run still improving mid-run is just training).
    final_only: bool = False
    # Sees the run past its first NaN/Inf loss or weights; every other rule sees only the
    # steps before it (after it, every value is noise).
    sees_past_nan: bool = False
    # Another finding that explains this one's evidence: {code: at this severity or worse}.
    # When one is present, this rule's findings are dropped.
    defers_to: Mapping[str, Severity] = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.check.__name__


# The unnormalized_input finding a constant first batch gives: every unit sees the same
# input, so dead units and zero gradients below them follow from it.
_CONSTANT_INPUT = {Code.UNNORMALIZED_INPUT: Severity.CRITICAL}

# A run that crashed, blew up, or was set up wrongly was not "stopped while improving": more
# epochs are not the fix, the other finding's fix is.
_BROKEN_SET_UP = {
    Code.TRAINING_CRASH: Severity.CRITICAL,
    Code.OOM: Severity.CRITICAL,
    Code.NONFINITE: Severity.CRITICAL,
    Code.LOSS_DIVERGENCE: Severity.WARNING,
    Code.OUTPUT_LOSS_MISMATCH: Severity.WARNING,
    Code.LABEL_PROBLEM: Severity.CRITICAL,
    Code.UNNORMALIZED_INPUT: Severity.WARNING,
    Code.TRAINING_STALLED: Severity.CRITICAL,
    Code.ENDED_ABRUPTLY: Severity.CRITICAL,
    Code.BAD_INITIALIZATION: Severity.CRITICAL,
    Code.MAJORITY_CLASS: Severity.WARNING,
    Code.UNNORMALIZED_TARGET: Severity.WARNING,
    Code.LOSS_METRIC_MISMATCH: Severity.WARNING,
    Code.MODEL_CONFIG: Severity.WARNING,
}

# A cause found from the set-up explains the symptom rules' findings, which would
# otherwise name a wrong cause (lower the learning rate, overfitting, a plateau, dead units).
# Initial weights too large (or symmetric) explain the NaN, the blow-up before it, the plateau.
_BAD_INIT = {Code.BAD_INITIALIZATION: Severity.CRITICAL}
# A model stuck at the class prior or at the targets' mean, or a loss that measures something
# else: the plateau is that, not the learning rate.
_STUCK_AT_BASELINE = {
    Code.MODEL_CONFIG: Severity.WARNING,  # dropout or a weight penalty the run confirms holds it there
    Code.MAJORITY_CLASS: Severity.WARNING,
    Code.UNNORMALIZED_TARGET: Severity.WARNING,
    Code.LOSS_METRIC_MISMATCH: Severity.WARNING,
    Code.WORSE_THAN_CONSTANT: Severity.CRITICAL,  # ...far worse than one, or collapsed onto it: the plateau is that
}

# A first loss far off, or a fit stuck at the constant prediction, that the lint already explains
# (a wrong output activation, labels that do not fit the loss, unscaled inputs): the lint's
# finding says what to change.
_PREFLIGHT_EXPLAINED = {
    Code.OUTPUT_LOSS_MISMATCH: Severity.WARNING,
    Code.LABEL_PROBLEM: Severity.CRITICAL,
    Code.UNNORMALIZED_INPUT: Severity.WARNING,
    Code.BAD_INITIALIZATION: Severity.CRITICAL,
}

# What a cause explains: where both are found, the cause is listed first (in the CLI, the JSON and
# the tab), whatever their severities, so the user reads what to change before its symptoms.
_SYMPTOMS_OF_BAD_SCALE = (
    Code.NONFINITE,
    Code.EXPLODING_GRADIENTS,
    Code.LOSS_DIVERGENCE,
    Code.LOSS_OSCILLATION,
    Code.LOSS_PLATEAU,
    Code.DEAD_RELU,
    Code.SATURATED_ACTIVATION,
    Code.VANISHING_GRADIENTS,
    Code.WORSE_THAN_CONSTANT,
    Code.UNDERTRAINED,
)
EXPLAINS: Mapping[str, tuple[str, ...]] = {
    Code.BAD_INITIALIZATION: _SYMPTOMS_OF_BAD_SCALE,
    Code.UNNORMALIZED_INPUT: _SYMPTOMS_OF_BAD_SCALE,
    Code.UNNORMALIZED_TARGET: _SYMPTOMS_OF_BAD_SCALE,
    Code.OUTPUT_LOSS_MISMATCH: (
        Code.LOSS_PLATEAU,
        Code.WORSE_THAN_CONSTANT,
        Code.INITIAL_LOSS_OFF,
        Code.MAJORITY_CLASS,
        Code.NONFINITE,
        Code.LOSS_DIVERGENCE,
        Code.DEAD_RELU,
        Code.CANNOT_FIT_SMALL_BATCH,
        Code.UNDERTRAINED,
    ),
    Code.LABEL_PROBLEM: (
        Code.OVERFITTING,
        Code.LOSS_PLATEAU,
        Code.WORSE_THAN_CONSTANT,
        Code.NONFINITE,
        Code.MAJORITY_CLASS,
        Code.INITIAL_LOSS_OFF,
        Code.LOSS_METRIC_MISMATCH,
        Code.UNDERTRAINED,
    ),
    Code.EXPLODING_GRADIENTS: (Code.NONFINITE, Code.LOSS_DIVERGENCE, Code.LOSS_OSCILLATION, Code.DEAD_RELU, Code.WORSE_THAN_CONSTANT),
    Code.DEAD_RELU: (Code.LOSS_PLATEAU, Code.VANISHING_GRADIENTS, Code.WORSE_THAN_CONSTANT, Code.UNDERTRAINED, Code.MAJORITY_CLASS),
    Code.SATURATED_ACTIVATION: (Code.VANISHING_GRADIENTS, Code.LOSS_PLATEAU, Code.WORSE_THAN_CONSTANT, Code.UNDERTRAINED),
    # Gradients that never reach the first layers hold the loss where it is.
    Code.VANISHING_GRADIENTS: (Code.LOSS_PLATEAU, Code.WORSE_THAN_CONSTANT, Code.UNDERTRAINED),
    Code.MODEL_CONFIG: (Code.LOSS_PLATEAU, Code.WORSE_THAN_CONSTANT, Code.MAJORITY_CLASS, Code.UNDERTRAINED),
    Code.INPUT_PIPELINE_CONFIG: (Code.INPUT_BOUND,),
}

RULES: tuple[RuleSpec, ...] = (
    RuleSpec(check_nonfinite, (Code.NONFINITE,), sees_past_nan=True, defers_to=_BAD_INIT),
    RuleSpec(check_exploding_gradients, (Code.EXPLODING_GRADIENTS,), defers_to=_BAD_INIT),
    RuleSpec(
        check_vanishing_gradients,
        (Code.VANISHING_GRADIENTS,),
        defers_to={**_CONSTANT_INPUT, Code.DEAD_RELU: Severity.WARNING},  # zero gradients below dead units
    ),
    RuleSpec(check_loss_divergence, (Code.LOSS_DIVERGENCE,), defers_to=_BAD_INIT),
    RuleSpec(check_loss_plateau, (Code.LOSS_PLATEAU,), defers_to={**_BAD_INIT, **_STUCK_AT_BASELINE}),
    RuleSpec(check_loss_oscillation, (Code.LOSS_OSCILLATION,)),
    # Validation at chance from the first epoch is labels that do not belong to their inputs;
    # training and validation labels of other class shares, or inputs repeated with other labels,
    # open the same gap between the two: the labels are what to fix, not the regularisation.
    RuleSpec(check_overfitting, (Code.OVERFITTING,), defers_to={Code.LABEL_PROBLEM: Severity.WARNING}),
    RuleSpec(check_training_crash, (Code.TRAINING_CRASH,)),
    RuleSpec(check_oom, (Code.OOM,)),
    RuleSpec(check_memory_growth, (Code.MEMORY_GROWTH,)),
    RuleSpec(check_output_loss_mismatch, (Code.OUTPUT_LOSS_MISMATCH,)),
    RuleSpec(check_model_config, (Code.MODEL_CONFIG,)),
    RuleSpec(check_input_bound, (Code.INPUT_BOUND,)),
    RuleSpec(check_input_pipeline_config, (Code.INPUT_PIPELINE_CONFIG,)),
    RuleSpec(check_label_problem, (Code.LABEL_PROBLEM,)),
    RuleSpec(check_unnormalized_input, (Code.UNNORMALIZED_INPUT,)),
    RuleSpec(check_unnormalized_target, (Code.UNNORMALIZED_TARGET,)),
    RuleSpec(check_majority_class, (Code.MAJORITY_CLASS,), defers_to={Code.MODEL_CONFIG: Severity.WARNING}),
    RuleSpec(check_loss_metric_mismatch, (Code.LOSS_METRIC_MISMATCH,)),
    # A run no better than a constant prediction, where no other finding names why (a plateau
    # names a learning rate too small to move the weights).
    RuleSpec(
        check_worse_than_constant,
        (Code.WORSE_THAN_CONSTANT,),
        final_only=True,
        defers_to={
            **_BROKEN_SET_UP,
            **_BAD_INIT,
            Code.LOSS_DIVERGENCE: Severity.WARNING,
            Code.LOSS_PLATEAU: Severity.WARNING,
        },
    ),
    # ...far worse than it, or collapsed onto it after a blow-up: that, not a plateau, is what to fix.
    RuleSpec(
        check_far_worse_than_constant,
        (Code.WORSE_THAN_CONSTANT,),
        final_only=True,
        defers_to={**_BROKEN_SET_UP, **_BAD_INIT},
    ),
    RuleSpec(check_bad_initialization, (Code.BAD_INITIALIZATION,), sees_past_nan=True),
    RuleSpec(
        check_undertrained,
        (Code.UNDERTRAINED,),
        final_only=True,
        defers_to={**_BROKEN_SET_UP, Code.WORSE_THAN_CONSTANT: Severity.WARNING},  # more epochs of a worse model
    ),
    # Inputs scaled to almost nothing (or far too large) explain dead units too.
    # (Targets in the thousands throw the ReLUs dead with their huge first gradients.)
    RuleSpec(
        check_dead_relu,
        (Code.DEAD_RELU,),
        # A learning rate that threw the loss around, or a penalty that holds the weights at zero, killed them.
        defers_to={
            Code.UNNORMALIZED_INPUT: Severity.WARNING,
            Code.UNNORMALIZED_TARGET: Severity.WARNING,
            Code.LOSS_OSCILLATION: Severity.WARNING,
            Code.MODEL_CONFIG: Severity.WARNING,
            **_BAD_INIT,
        },
    ),
    RuleSpec(check_saturated_activation, (Code.SATURATED_ACTIVATION,)),
    # Preflight (before any training step). An initial loss explained by a lint finding, and a
    # small batch that cannot be fitted because the model ignores its input, are one problem.
    RuleSpec(check_initial_loss_off, (Code.INITIAL_LOSS_OFF,), defers_to=_PREFLIGHT_EXPLAINED),
    RuleSpec(check_cannot_fit_small_batch, (Code.CANNOT_FIT_SMALL_BATCH,), defers_to={Code.INPUT_IGNORED: Severity.CRITICAL}),
    RuleSpec(check_input_ignored, (Code.INPUT_IGNORED,), defers_to={**_CONSTANT_INPUT, **_PREFLIGHT_EXPLAINED}),
    RuleSpec(check_no_gradient, (Code.NO_GRADIENT,)),
    # About the process, not the values: they see past a NaN too.
    RuleSpec(check_training_stalled, (Code.TRAINING_STALLED,), sees_past_nan=True),
    RuleSpec(check_ended_abruptly, (Code.ENDED_ABRUPTLY,), sees_past_nan=True),
    # Judged by the callback at the end of a fit against the run the user named good.
    RuleSpec(check_worse_than_baseline, (Code.WORSE_THAN_BASELINE,), sees_past_nan=True),
    # What the run could not record (a part off): which diagnoses it cannot have.
    RuleSpec(check_part_not_recorded, (Code.PART_NOT_RECORDED,), sees_past_nan=True),
    # A fit that ran a train step traced before `trainable` changed (the callback left its probe out).
    RuleSpec(check_stale_train_step, (Code.MODEL_CONFIG,), sees_past_nan=True),
)
