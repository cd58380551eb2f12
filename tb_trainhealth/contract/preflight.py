"""What the preflight's measuring (write side) and its rules (read side) must agree on.

The write side stops the small-batch fit at these constants, skips the zeroed control once the
fit proves the input is used, and computes the expected first loss with the regression
allowance; the rules (`rules.preflight`, `rules.preflight_fit`) judge what it measured with the
same numbers. Read-side safe: no TensorFlow.
"""

from __future__ import annotations

from tb_trainhealth.contract.vocab import LossKind

# -- the initial loss ------------------------------------------------------------------------
# Regression outputs of a freshly initialised head are not 0 but of about unit scale on
# unit-scale features: that much is added to mean(y^2) (MSE) or mean|y| (MAE) before comparing,
# so small targets (y in [0, 0.1]) are not called off.
REGRESSION_OUTPUT_ALLOWANCE = 1.0


def loss_is_regression(loss: LossKind | None) -> bool:
    return loss is not None and not loss.is_probabilistic


# -- overfitting one small batch -------------------------------------------------------------
# The fit stops once the loss is this share of the reference (above the floor): the best
# constant prediction's loss on the batch (label entropy, target variance) or, where that is
# unknown or degenerate, the first loss. In bench/preflight_sweep.py healthy set-ups reached it
# in 12-570 steps with Adam at 1e-3, 1100-1400 at 1e-4 or for targets around 300, 540-770 with
# SGD(0.01).
FIT_FRACTION = 0.1
# The fit also stops when, over the last STALL_WINDOW steps, its loss fell by less than
# STALL_SHARE of what was left above the floor: flat. A learning rate of 1e-7 removes ~0.01% per
# window; of the 93 healthy runs only 17-parameter linear heads on a frozen backbone stalled (not
# judged: MIN_PARAMS_PER_SAMPLE). Only a stalled fit, or one that used all MAX_FIT_STEPS, is
# judged: one cut short by the time budget while still falling is not (a miss costs less than a
# false alarm).
STALL_WINDOW = 200
STALL_SHARE = 0.01
# At most this many steps (with the time budget). Heads on a frozen backbone's features are the
# slowest healthy fits: 0.11-0.36 of the reference after 3000 steps (9-10 s on 2 busy cores).
MAX_FIT_STEPS = 3000

# -- input dependence ------------------------------------------------------------------------
# A fit at or below this share of the constant prediction's loss (above the floor) proves the
# model uses its input (a model that sees every sample alike cannot go below it): no zeroed
# control needed.
INPUT_USE_PROVEN = 0.5
