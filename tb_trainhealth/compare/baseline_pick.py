"""Which run to compare with when the user asks for "the best earlier run of this model": the Health
tab's `compare?baseline=best` and `tb-trainhealth compare LOGDIR --baseline best`, so nobody has to
remember which of twenty runs was the good one.

A baseline is of the same model only when the run and it agree on what makes a model that model
(`model_differences`): the layer classes in order (for runs recorded without them, by Keras'
TensorBoard callback: the model name, Keras' numbering aside, and the number of trainable layers),
the `input_shape` setting and the output units (the `.units` of the last layer that records them).
A setting is checked where both runs record it: a run that records none cannot differ in it. A run of
another input shape or another number of classes is another model: comparing with it would blame
the data, or the run's settings, for what the task changed.

Among the earlier runs of the same model the pick prefers, in order (`pick_baseline`): a run the user
marked as good (a file named MARKER, `.tb-trainhealth-good`, in its directory: `marked_good`), then
runs with no warning or critical finding (where their findings are known), then any; within that
group the best final validation accuracy wins (else the lowest final validation loss, else the lowest
training loss: RANKED_BY), ties going to the most recent run. Where none qualifies the answer says
why and names the earlier runs that came closest, with what differs.

"Earlier" is judged by `RunSignals.last_write`, the wall time of a run's newest data: a run's first
wall time is not in RunSignals, and the event files' start times are only readable with a local
logdir (not through TensorBoard's data provider, which the tab reads through). A run that finished
writing before this one last wrote counts as earlier; that holds for runs trained one after another,
the case this serves. A run whose last write is unknown is never earlier (and, unknown for the run
itself, no run is): a baseline picked by guesswork would make the verdict mean nothing.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.run_paths import is_local
from tb_trainhealth.signals import RunSignals

# What "best" means, in order: the first of these that any run of the group competing has decides,
# and only runs that have it compete. (series, higher is better, in words)
RANKED_BY = (
    (sig.EPOCH_VAL_ACCURACY, True, "final validation accuracy"),
    (sig.EPOCH_VAL_LOSS, False, "final validation loss"),
    (sig.EPOCH_LOSS, False, "final training loss"),
    (sig.LOSS, False, "final training loss"),
)
# A per-step training loss ends at the median of its last tenth: one noisy minibatch is not its level.
TAIL_SHARE = 0.1
# Keras numbers models built in one process: "sequential", "sequential_1", ... are one model.
_KERAS_NUMBER = re.compile(r"_\d+$")
# A file of this name in a run's directory (the log_dir given to HealthCallback) marks it as good.
MARKER = ".tb-trainhealth-good"
# Runs named as the closest where no earlier run is of the same model.
CLOSEST = 3

# How the baseline was chosen (`Choice.rule`).
NAMED = "named"  # the user named it
MARKED_GOOD = "marked_good"  # the best earlier run of the model marked as good
NO_WARNINGS = "no_warnings"  # the best earlier run of the model with no warning or critical finding
BEST = "best"  # the best earlier run of the model
NONE = "none"  # no earlier run of the model to compare with


@dataclasses.dataclass(frozen=True)
class Choice:
    """The baseline picked for a run (None: none) and how: `rule`, in words `why`; `model`, what the
    run's model is as "same model" compares it; `differs`, how the baseline's model differs from the
    run's (a named baseline can be of another model); `closest`, where none qualified, the earlier
    runs that came closest and what differs in each."""

    baseline: str | None
    rule: str
    why: str
    model: dict[str, Any]
    differs: tuple[str, ...] = ()
    closest: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "why": self.why,
            "model": dict(self.model),
            "differs": list(self.differs),
            "closest": [{"run": run, "differs": list(differs)} for run, differs in self.closest],
        }


def best_earlier_run(
    run: RunSignals,
    candidates: Sequence[RunSignals],
    findings: Mapping[str, Sequence[Finding]] | None = None,
    marked: Iterable[str] = (),
) -> str | None:
    """The name of the earlier run of the same model `pick_baseline` picks; None where there is none."""
    return pick_baseline(run, candidates, findings, marked).baseline


def pick_baseline(
    run: RunSignals,
    candidates: Sequence[RunSignals],
    findings: Mapping[str, Sequence[Finding]] | None = None,
    marked: Iterable[str] = (),
) -> Choice:
    """The baseline for `run` among `candidates` (the run itself among them is skipped), and how it
    was chosen. findings: each candidate's findings by run name (None: unknown, no run is preferred
    for having none); marked: the names of the runs marked as good (`marked_good`)."""
    model = model_of(run)
    earlier = [c for c in candidates if c.run != run.run and _earlier(c, run)]
    same = [c for c in earlier if not model_differences(c, run)]
    marked = set(marked)
    warned = None if findings is None else {name for name, found in findings.items() if _has_warning(found)}
    # Where the findings are known, only a run the diagnosis calls healthy is a baseline (or one the
    # user marked good): comparing with a broken run judges nothing (the demo's sorted_validation_split,
    # critical, came out "better" than a stalled run).
    groups = [
        (MARKED_GOOD, [c for c in same if c.run in marked], f"marked as good ({MARKER} in its directory)"),
        (NO_WARNINGS, [c for c in same if c.run not in (warned or set())], "with no warning or critical finding"),
        (BEST, same if warned is None else [], ""),
    ]
    for rule, group, how in groups:
        if rule == NO_WARNINGS and warned is None:
            continue
        picked = _ranked(group)
        if picked is None and rule == MARKED_GOOD and group:
            latest = max(group, key=lambda c: (c.last_write or 0.0, c.run))
            picked = latest.run, "the most recent, none ranked by a finite loss or accuracy"
        if picked is not None:
            name, by = picked
            among = f"{len(group)} earlier run(s) of the same model" + (f" {how}" if how else "")
            why = f"{name}: {by} among {among} ({describe(model)})"
            return Choice(name, rule, why, model)
    closest = _closest(run, earlier) if run.settings.layers or run.info.model else ()
    return Choice(None, NONE, why_none_is_earlier(run, candidates), model, closest=closest)


def named_choice(run: RunSignals, baseline: RunSignals) -> Choice:
    """A baseline the user named, with how its model differs from the run's (nothing: the same model)."""
    differs = tuple(model_differences(baseline, run))
    why = f"named by the user; {'not ' if differs else ''}the same model ({describe(model_of(run))})"
    if differs:
        why += f": {'; '.join(differs)}"
    return Choice(baseline.run, NAMED, why, model_of(run), differs=differs)


def why_none_is_earlier(run: RunSignals, candidates: Sequence[RunSignals] = ()) -> str:
    """Why `best_earlier_run` finds no run for `run`, in plain words, naming the earlier runs among
    `candidates` that came closest and what differs in each."""
    if run.last_write is None:
        return "this run's write times are unknown, so no run can be told to be earlier"
    if not (run.settings.layers or run.info.model):
        return "this run records no model (layer classes or model name) to find earlier runs of"
    earlier = [c for c in candidates if c.run != run.run and _earlier(c, run)]
    what = f"no earlier run of the same model ({describe(model_of(run))})"
    if any(not model_differences(c, run) for c in earlier):
        return f"{what} logs a finite validation accuracy, validation loss or training loss to rank it by"
    if not earlier:
        return f"{what}: no run ended before this one" if candidates else what
    closest = "; ".join(f"{name}: {', '.join(differs)}" for name, differs in _closest(run, earlier))
    return f"{what}; closest: {closest}"


def model_of(signals: RunSignals) -> dict[str, Any]:
    """What "same model" compares of a run: its layer classes in order (None: not recorded), model
    name, `input_shape` setting and output units (`.units` of its last layer that records them)."""
    layers = [cls for _, cls in signals.settings.layers]
    units = _output_units(signals)
    return {
        "layers": layers or None,
        "model": signals.info.model,
        "input_shape": _input_shape(signals),
        "output_units": int(units) if units is not None and units.is_integer() else units,
    }


def describe(model: Mapping[str, Any]) -> str:
    """A model as `model_of` gives it, in words: what the comparison went by."""
    layers = model["layers"]
    parts = [f"layer classes {_classes(layers)}" if layers else f"model {model['model'] or '(none recorded)'}"]
    parts.append(f"input_shape {model['input_shape'] or 'not recorded'}")
    parts.append(f"output units {model['output_units'] if model['output_units'] is not None else 'not recorded'}")
    return ", ".join(parts)


def model_differences(candidate: RunSignals, run: RunSignals) -> list[str]:
    """How `candidate`'s model differs from `run`'s, in words (the candidate's value first); none:
    the same model. Each part is checked where both runs record it; a run that records neither
    layer classes nor a model name differs from every run."""
    differs = []
    ours, theirs = run.settings.layers, candidate.settings.layers
    if ours and theirs:
        a, b = [cls for _, cls in theirs], [cls for _, cls in ours]
        if a != b:
            differs.append(_layers_differ(a, b))
    elif run.info.model is None or candidate.info.model is None:
        differs.append("no layer classes or model name recorded in both runs to compare")
    else:
        a, b = _KERAS_NUMBER.sub("", candidate.info.model), _KERAS_NUMBER.sub("", run.info.model)
        if a != b:
            differs.append(f"model {a} vs this run's {b}")
        elif len(candidate.layers) != len(run.layers):
            differs.append(f"{len(candidate.layers)} trainable layers vs this run's {len(run.layers)}")
    shapes = _input_shape(candidate), _input_shape(run)
    if None not in shapes and shapes[0] != shapes[1]:
        differs.append(f"input_shape {shapes[0]} vs this run's {shapes[1]}")
    units = _output_units(candidate), _output_units(run)
    if None not in units and units[0] != units[1]:
        differs.append(f"output units {_number(units[0])} vs this run's {_number(units[1])}")
    return differs


def same_model(a: RunSignals, b: RunSignals) -> bool:
    """The same model (`model_differences`): architecture, input shape and output units agree."""
    return not model_differences(a, b)


def same_architecture(a: RunSignals, b: RunSignals) -> bool:
    """Same layer classes in the same order, as the callback recorded them; for runs recorded
    without them, the same model name (Keras' numbering aside) and number of trainable layers.
    (Layers match by position in two such runs, whatever their input and output sizes.)"""
    if a.settings.layers and b.settings.layers:
        return [cls for _, cls in a.settings.layers] == [cls for _, cls in b.settings.layers]
    if a.info.model is None or b.info.model is None:
        return False
    same_name = _KERAS_NUMBER.sub("", a.info.model) == _KERAS_NUMBER.sub("", b.info.model)
    return same_name and len(a.layers) == len(b.layers)


def marked_good(logdir: str, runs: Iterable[str]) -> set[str]:
    """The runs (named as TensorBoard names them under a local `logdir`) whose directory holds a
    file named MARKER: `touch logs/run3/.tb-trainhealth-good`. None for a logdir that is a URL."""
    if not logdir or not is_local(logdir):
        return set()
    return {run for run in runs if os.path.isfile(os.path.join(logdir, *run.split("/"), MARKER))}


def _has_warning(findings: Sequence[Finding]) -> bool:
    return any(finding.severity >= Severity.WARNING for finding in findings)


def _ranked(group: Sequence[RunSignals]) -> tuple[str, str] | None:
    """The best run of `group` by RANKED_BY, and what it won by; None where none has a value."""
    for name, higher, words in RANKED_BY:
        scored = [(score, c.run) for c in group if (score := _final(c, name)) is not None]
        if scored:
            # Best first; ties go to the most recent run, then by name for a stable answer.
            latest = {c.run: c.last_write or 0.0 for c in group}
            score, best = min(scored, key=lambda s: (-s[0] if higher else s[0], -latest[s[1]], s[1]))
            return best, f"the best {words} ({score:.4g})"
    return None


def _closest(run: RunSignals, earlier: Sequence[RunSignals]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The earlier runs that differ from `run`'s model in the fewest ways, the most recent first."""
    differing = [(tuple(model_differences(c, run)), c) for c in earlier]
    differing = [(differs, c) for differs, c in differing if differs]
    differing.sort(key=lambda d: (len(d[0]), -(d[1].last_write or 0.0), d[1].run))
    return tuple((c.run, differs) for differs, c in differing[:CLOSEST])


def _layers_differ(theirs: list[str], ours: list[str]) -> str:
    counts = f"{len(theirs)} layers vs this run's {len(ours)}"
    first = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), None)
    where = f"layer {first + 1}: {theirs[first]} vs this run's {ours[first]}" if first is not None else ""
    if len(theirs) == len(ours):
        return f"layer classes differ ({where})"
    return f"{counts} ({where})" if where else counts


def _classes(layers: Sequence[str]) -> str:
    return ", ".join(layers) if len(layers) <= 6 else f"{', '.join(layers[:3])}, ... {layers[-1]} ({len(layers)})"


def _input_shape(signals: RunSignals) -> str | None:
    value = signals.settings.get("input_shape")
    return value if isinstance(value, str) and value else None


def _output_units(signals: RunSignals) -> float | None:
    for name, _ in reversed(signals.settings.layers):
        units = signals.settings.number(f"{name}.units")
        if units is not None:
            return units
    return None


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


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
