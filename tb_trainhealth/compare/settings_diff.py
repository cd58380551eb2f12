"""Which recorded settings differ between two runs, layers matched even when Keras numbered them
differently (`dense_4` in one process is `dense` in a fresh one).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any

from tb_trainhealth.contract.run_info import RunInfo
from tb_trainhealth.contract.run_settings import LAYER_KEYS, RunSettings, Value

# Two floats closer than this (relative) are the same setting: a value written as 1e-3 in one
# script and 0.001 in another, or a fingerprint summed in another order.
SAME_RELATIVE = 1e-6
# Per sample statistics of the inputs are means over the data: a re-saved copy of the same data
# may differ in the last digits.
SAME_STATISTIC_RELATIVE = 1e-3
STATISTICS = ("input_mean", "input_std")
# Class shares (or the targets' mean and std) closer than this are the same distribution: the
# same data set re-split keeps its shares within a point.
SAME_SHARE = 0.01
LABEL_DISTRIBUTION = "label_distribution"
# The architecture as one setting: layer classes in order.
ARCHITECTURE = "layers"
# Said after a baseline layer's name where the run has no layer in its place (" (removed)").
REMOVED = " (removed)"


@dataclasses.dataclass(frozen=True)
class Change:
    setting: str
    baseline: Value
    run: Value
    layer_alone: bool = False  # a setting of a layer only one of the runs has (it comes with `layers`)

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "baseline": self.baseline, "run": self.run}


def changed_settings(
    run: RunSettings, baseline: RunSettings, run_info: RunInfo, baseline_info: RunInfo
) -> list[Change]:
    """Every setting that differs, in the run's layer names (unordered: `culprit` ranks them).
    Runs recorded before settings existed still compare what their run info holds."""
    ours, theirs = _flat(run, run_info), _flat(baseline, baseline_info)
    names = _layer_names(baseline.layers, run.layers)
    theirs = _renamed(theirs, names)
    # Layers only one run has: their settings come with the architecture, never on their own.
    alone = {name for name, _ in run.layers} - set(names.values()) | {n for n in names.values() if REMOVED in n}
    if run.layers and baseline.layers:
        ours[ARCHITECTURE], theirs[ARCHITECTURE] = _architecture(run.layers), _architecture(baseline.layers)
    changes = []
    for setting in sorted(set(ours) | set(theirs)):
        if (setting in ours) != (setting in theirs) and _argument_of_one_recording(setting, alone, run.layers):
            continue
        if not _same(setting, theirs.get(setting), ours.get(setting)):
            layer = setting.rpartition(".")[0]
            changes.append(Change(setting, theirs.get(setting), ours.get(setting), layer_alone=layer in alone))
    return changes


def _argument_of_one_recording(setting: str, alone: set[str], layers: tuple[tuple[str, str], ...]) -> bool:
    """A layer's constructor argument that one run recorded and the other did not, on a layer both
    have: one run was recorded before every argument was (before 2026-12), not a change."""
    layer, _, key = setting.rpartition(".")
    return key not in LAYER_KEYS and layer not in alone and any(name == layer for name, _ in layers)


def _flat(settings: RunSettings, info: RunInfo) -> dict[str, Value]:
    if settings.settings:
        return dict(settings.settings)
    from_info = {"optimizer": info.optimizer, "learning_rate": info.learning_rate, "loss": info.loss}
    return {key: value for key, value in from_info.items() if value is not None}


def _architecture(layers: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(cls for _, cls in layers)


def _layer_names(from_layers: tuple[tuple[str, str], ...], to_layers: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Each baseline layer's name in the run: by name where both runs have the same names, else by
    role: layers of the same class in the same place of the two class sequences (aligned, so that one
    layer added or removed does not shift the others). A baseline layer the run lacks keeps its name,
    marked `REMOVED`, so that it never takes the name of one of the run's."""
    if [name for name, _ in from_layers] == [name for name, _ in to_layers]:
        return {name: name for name, _ in from_layers}
    classes = difflib.SequenceMatcher(None, [c for _, c in from_layers], [c for _, c in to_layers], autojunk=False)
    names = {name: f"{name}{REMOVED}" for name, _ in from_layers}
    for block in classes.get_matching_blocks():
        for offset in range(block.size):
            names[from_layers[block.a + offset][0]] = to_layers[block.b + offset][0]
    return names


def _renamed(settings: dict[str, Value], names: dict[str, str]) -> dict[str, Value]:
    renamed = {}
    for key, value in settings.items():
        layer, dot, rest = key.rpartition(".")
        renamed[f"{names[layer]}.{rest}" if dot and layer in names else key] = value
    return renamed


def _same(setting: str, a: Value, b: Value) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        tolerance = SAME_STATISTIC_RELATIVE if setting in STATISTICS else SAME_RELATIVE
        return math.isclose(a, b, rel_tol=tolerance, abs_tol=1e-12)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return False
        if setting == LABEL_DISTRIBUTION:
            return all(abs(x - y) <= SAME_SHARE * max(1.0, abs(x), abs(y)) for x, y in zip(a, b))
        return all(math.isclose(x, y, rel_tol=SAME_RELATIVE, abs_tol=1e-12) for x, y in zip(a, b))
    return a == b
