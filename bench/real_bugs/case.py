"""What one real-bug case is: a program as its author wrote it, and as fixed.

A case's `run(buggy, seed, callbacks)` builds the data and the model, compiles and fits them as
the report did (scaled down to train in seconds on a CPU), passes `callbacks` to `fit`, and
returns the held-out score: one task measure computed the same way for both versions, whatever
loss either compiles with (accuracy for classification, R^2 for regression), higher is better.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    source: str  # where the report lives: a URL, "SO <question id>", or a repository path
    symptom: str  # what the author saw, in their words
    cause: str  # what was wrong
    fix: str  # what the accepted fix changed
    # Finding codes that name the cause (the worst finding on the buggy run should be one of them).
    codes: tuple[str, ...]
    run: Callable[[bool, int, list[Any]], float]  # (buggy, seed, callbacks) -> held-out score
    score_name: str = "accuracy"  # or "r2"
    # The fixed program must beat the buggy one by at least this much (score units).
    margin: float = 0.05
    # The fixed program looks suspicious but is fine (unscaled inputs that still learn, memory
    # that rises then levels off, a loss near the constant predictor on data with little signal).
    suspicious_fixed: bool = False
    # What the fix changed, as `tb-trainhealth compare` names recorded settings: the setting names,
    # or their last dotted part ("activation" for "dense_2.activation"), as compare_zoo's
    # `Variant.culprits` (bench/compare_real_bugs.py: named first or second on buggy vs fixed).
    fix_changes: tuple[str, ...] = ()
    # Where the fix changed nothing compare records as a setting (fix_changes empty): why.
    fix_unseen: str = ""
