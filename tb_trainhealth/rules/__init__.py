"""The rules: one small function per check, each RunSignals -> list[Finding]."""

from __future__ import annotations

from collections.abc import Callable

from tb_trainhealth.findings import Finding
from tb_trainhealth.rules.activations import check_dead_relu, check_saturated_activation
from tb_trainhealth.rules.crashes import check_oom, check_training_crash
from tb_trainhealth.rules.gradients import (
    check_exploding_gradients,
    check_vanishing_gradients,
)
from tb_trainhealth.rules.input_pipeline import check_input_bound, check_input_pipeline_config
from tb_trainhealth.rules.loss_curve import (
    check_loss_divergence,
    check_loss_oscillation,
    check_loss_plateau,
)
from tb_trainhealth.rules.memory import check_memory_growth
from tb_trainhealth.rules.model_lint import check_model_config, check_output_loss_mismatch
from tb_trainhealth.rules.numerics import check_nonfinite
from tb_trainhealth.rules.overfitting import check_overfitting
from tb_trainhealth.rules.training_data import check_label_problem, check_unnormalized_input
from tb_trainhealth.rules.undertrained import check_undertrained
from tb_trainhealth.signals import RunSignals

Rule = Callable[[RunSignals], list[Finding]]

ALL_RULES: tuple[Rule, ...] = (
    check_nonfinite,
    check_exploding_gradients,
    check_vanishing_gradients,
    check_loss_divergence,
    check_loss_plateau,
    check_loss_oscillation,
    check_overfitting,
    check_training_crash,
    check_oom,
    check_memory_growth,
    check_output_loss_mismatch,
    check_model_config,
    check_input_bound,
    check_input_pipeline_config,
    check_label_problem,
    check_unnormalized_input,
    check_undertrained,
    check_dead_relu,
    check_saturated_activation,
)
