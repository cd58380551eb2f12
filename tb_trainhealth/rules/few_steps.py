"""`undertrained` where the step count is why: too few optimizer steps in all.

A batch that holds much of the training set takes one or two steps an epoch, and a run of a
handful of steps has trained nothing yet; both are settings to change, so both are warnings.
"""

from __future__ import annotations

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import ADD_EARLY_STOPPING, MORE_EPOCHS, Finding, Fix
from tb_trainhealth.rules.run_setup import optimizer_steps
from tb_trainhealth.rules.still_falling import share_per_epoch, undertrained_warning
from tb_trainhealth.series_math import finite_part
from tb_trainhealth.signals import RunSignals, Series
from tb_trainhealth.yardstick import yardstick

# Too few optimizer steps in all: fewer than FEW_STEPS, with both losses still falling steadily
# (rank correlation over the last TAIL_FRACTION of epochs at most MAX_RANK_CORRELATION) and still
# gaining, per epoch, at least FEW_STEPS_SHARE of the improvement so far (the level test,
# MIN_RELATIVE_DROP, is left out: a full-batch run moves its loss by ~1% an epoch). Measured
# (`bench/learn_less_zoo.py`): a CNN trained with batch_size = the 600-sample training set for
# 12 epochs (12 steps): 8.5% (training) and 9.6% (validation) per epoch, validation accuracy 0.68
# against its twin's 1.0. The healthy sweep's smallest runs take 150+ steps and end flat.
# A warning only where the batch size is why (a batch of at least FEW_STEPS_BATCH_SHARE of the
# training set: 4 steps an epoch or fewer); with smaller batches the step count is the epochs the
# author chose, judged like any run (a note: test_common_mistakes' 6 epochs of 13 steps).
FEW_STEPS = 100
FEW_STEPS_SHARE = 0.04
FEW_STEPS_BATCH_SHARE = 0.25
# Under this many optimizer steps in all no trend can be judged, and no model is trained: a run
# that ends there with its loss still at least UNTRAINED_SHARE of the constant prediction's is
# undertrained by its step count alone (real-bug zoo dm_iris_one_epoch: 1 epoch, 3 steps, validation
# loss 0.74x the constant's). A model that already fits (a tiny, easy task) is not reported; nor are
# the test suite's short healthy fits (8-16 steps), which a step count alone cannot tell apart.
TOO_FEW_TO_JUDGE = 5
UNTRAINED_SHARE = 0.1


def _few_steps_reason(run: RunSignals, steps: int) -> str:
    samples, batch = run.settings.number("train_samples"), run.settings.number("batch_size")
    epochs = len(run.get(sig.EPOCH_LOSS) or ())
    if samples and batch and batch >= samples / 2:
        return f"batch_size={int(batch)} holds {batch / samples:.0%} of the {int(samples)} training samples: one or two steps per epoch"
    if samples and batch:
        return f"{int(samples)} training samples in batches of {int(batch)}, {epochs} epochs"
    return f"{epochs} epochs"


MORE_STEPS_FIX = Fix(
    "Take more optimizer steps: more epochs, with early stopping to find the end.",
    "model.fit(..., epochs=200, callbacks=[keras.callbacks.EarlyStopping(monitor='val_loss', "
    "patience=10, restore_best_weights=True)])",
    (ADD_EARLY_STOPPING, MORE_EPOCHS),
)


def _far_too_few_steps(run: RunSignals, steps: int, train: Series) -> list[Finding]:
    stick, val = yardstick(run), run.get(sig.EPOCH_VAL_LOSS)
    ended = finite_part(val if val is not None else train)
    if stick is None or not len(ended):
        return []
    gain = 1 - float(np.min(ended.values)) / stick.value  # (one epoch is all there may be: no judged_loss)
    if gain > 1 - UNTRAINED_SHARE:
        return []
    step = int(train.steps[-1])
    return [
        undertrained_warning(
            run,
            step,
            title=f"Only {steps} optimizer steps in all: the model has barely started training",
            detail=(
                f"The whole run took {steps} optimizer steps ({_few_steps_reason(run, steps)}), too few to judge any "
                f"trend and far too few to train a model: its best loss is still {1 - gain:.0%} of what a constant "
                "prediction scores."
            ),
            fixes=(MORE_STEPS_FIX,),
            series=(sig.EPOCH_LOSS,),
        )
    ]


def too_few_steps(run: RunSignals, train: Series, val: Series | None) -> list[Finding]:
    steps = optimizer_steps(run)
    if steps is not None and steps < TOO_FEW_TO_JUDGE and (far := _far_too_few_steps(run, steps, train)):
        return far
    samples, batch = run.settings.number("train_samples"), run.settings.number("batch_size")
    if steps is None or steps >= FEW_STEPS or val is None:
        return []
    if not (samples and batch and batch >= FEW_STEPS_BATCH_SHARE * samples):
        return []
    shares = [share_per_epoch(train, 0.0), share_per_epoch(val, 0.0)]
    if any(s is None or s < FEW_STEPS_SHARE for s in shares):
        return []
    share = min(s for s in shares if s is not None)
    step = int(train.steps[-1])
    fixes = [MORE_STEPS_FIX]
    if batch > 64:
        fixes.insert(0, Fix("Use a smaller batch: more (noisier) steps per epoch.", "model.fit(..., batch_size=32)"))
    return [
        undertrained_warning(
            run,
            step,
            title=f"Only {steps} optimizer steps in all, and the loss was still falling at every epoch",
            detail=(
                f"The whole run took {steps} optimizer steps ({_few_steps_reason(run, steps)}). Training and validation "
                f"loss still fell steadily at the end, each of the last epochs delivering {share:.0%} of all the "
                "improvement so far: the model stopped long before it could have."
            ),
            fixes=tuple(fixes),
        )
    ]
