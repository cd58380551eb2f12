"""Which run to compare with when the user asks for "the best earlier run of this model": the Health
tab's `compare?baseline=best`, so nobody has to remember which of twenty runs was the good one.

"Earlier" is judged by `RunSignals.last_write`, the wall time of a run's newest data: a run's first
wall time is not in RunSignals, and the event files' start times are only readable with a local
logdir (not through TensorBoard's data provider, which the tab reads through). A run that finished
writing before this one last wrote counts as earlier; that holds for runs trained one after another,
the case this serves. A run whose last write is unknown is never earlier (and, unknown for the run
itself, no run is): a baseline picked by guesswork would make the verdict mean nothing.
"""

from __future__ import annotations

import math
import re

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.signals import RunSignals

# What "best" means, in order: the first of these that any same-model earlier run has decides, and
# only runs that have it compete. (series, higher is better)
RANKED_BY = (
    (sig.EPOCH_VAL_ACCURACY, True),
    (sig.EPOCH_VAL_LOSS, False),
    (sig.EPOCH_LOSS, False),
    (sig.LOSS, False),
)
# A per-step training loss ends at the median of its last tenth: one noisy minibatch is not its level.
TAIL_SHARE = 0.1
# Keras numbers models built in one process: "sequential", "sequential_1", ... are one model.
_KERAS_NUMBER = re.compile(r"_\d+$")


def best_earlier_run(run: RunSignals, candidates: list[RunSignals]) -> str | None:
    """The name of the earlier run of the same model with the best final validation accuracy (else
    lowest final validation loss, else lowest final training loss); None where there is none."""
    earlier = [c for c in candidates if c.run != run.run and _earlier(c, run) and same_model(c, run)]
    for name, higher in RANKED_BY:
        scored = [(score, c.run) for c in earlier if (score := _final(c, name)) is not None]
        if scored:
            # Best first; ties go to the most recent run, then by name for a stable answer.
            latest = {c.run: c.last_write or 0.0 for c in earlier}
            return min(scored, key=lambda s: (-s[0] if higher else s[0], -latest[s[1]], s[1]))[1]
    return None


def why_none_is_earlier(run: RunSignals) -> str:
    """Why `best_earlier_run` finds no run for `run`, in plain words."""
    if run.last_write is None:
        return "this run's write times are unknown, so no run can be told to be earlier"
    if run.settings.layers or run.info.model:
        return "no earlier run of the same model exists (same layer classes, or same model name and layer count)"
    return "this run records no model (layer classes or model name) to find earlier runs of"


def same_model(a: RunSignals, b: RunSignals) -> bool:
    """Same layer classes in the same order, as the callback recorded them; for runs recorded
    without them, the same model name (Keras' numbering aside) and number of trainable layers."""
    if a.settings.layers and b.settings.layers:
        return [cls for _, cls in a.settings.layers] == [cls for _, cls in b.settings.layers]
    if a.info.model is None or b.info.model is None:
        return False
    same_name = _KERAS_NUMBER.sub("", a.info.model) == _KERAS_NUMBER.sub("", b.info.model)
    return same_name and len(a.layers) == len(b.layers)


def _earlier(candidate: RunSignals, run: RunSignals) -> bool:
    return candidate.last_write is not None and run.last_write is not None and candidate.last_write < run.last_write


def _final(signals: RunSignals, name: str) -> float | None:
    """The series' last value (a per-step loss: the median of its tail); None if absent or not finite."""
    series = signals.get(name)
    if series is None:
        return None
    if name == sig.LOSS:
        tail = series.values[-max(1, math.ceil(TAIL_SHARE * len(series))) :]
        value = float(np.median(tail))
    else:
        value = float(series.values[-1])
    return value if math.isfinite(value) else None
