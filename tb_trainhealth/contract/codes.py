"""Every finding code, once: the rules give them, the CLI's JSON, the tab and the docs key on them.

A code is written to disk (in recorded findings) and is the stable contract `docs/codes.md` lists:
never rename one. `RuleSpec.codes` says which a rule may give (the engine enforces it); the tab's
own list is pinned to this one (tests/test_frontend_codes.py).
"""

from __future__ import annotations

from tb_trainhealth.contract.vocab import Name


class Code(Name):
    NONFINITE = "nonfinite"
    EXPLODING_GRADIENTS = "exploding_gradients"
    VANISHING_GRADIENTS = "vanishing_gradients"
    LOSS_DIVERGENCE = "loss_divergence"
    LOSS_PLATEAU = "loss_plateau"
    LOSS_OSCILLATION = "loss_oscillation"
    OVERFITTING = "overfitting"
    TRAINING_CRASH = "training_crash"
    OOM = "oom"
    MEMORY_GROWTH = "memory_growth"
    OUTPUT_LOSS_MISMATCH = "output_loss_mismatch"
    MODEL_CONFIG = "model_config"
    INPUT_BOUND = "input_bound"
    INPUT_PIPELINE_CONFIG = "input_pipeline_config"
    LABEL_PROBLEM = "label_problem"
    UNNORMALIZED_INPUT = "unnormalized_input"
    UNNORMALIZED_TARGET = "unnormalized_target"
    MAJORITY_CLASS = "majority_class"
    LOSS_METRIC_MISMATCH = "loss_metric_mismatch"
    WORSE_THAN_CONSTANT = "worse_than_constant"
    BAD_INITIALIZATION = "bad_initialization"
    UNDERTRAINED = "undertrained"
    DEAD_RELU = "dead_relu"
    SATURATED_ACTIVATION = "saturated_activation"
    INITIAL_LOSS_OFF = "initial_loss_off"
    CANNOT_FIT_SMALL_BATCH = "cannot_fit_small_batch"
    INPUT_IGNORED = "input_ignored"
    NO_GRADIENT = "no_gradient"
    TRAINING_STALLED = "training_stalled"
    ENDED_ABRUPTLY = "ended_abruptly"
    WORSE_THAN_BASELINE = "worse_than_baseline"
    PART_NOT_RECORDED = "part_not_recorded"
