"""The label rules on runs compiled without an accuracy metric (issue 36): each kept run is
diagnosed as recorded and again with its accuracy series removed, as if compiled without
metrics=["accuracy"]. What the loss-only label check adds must be the shuffled-label runs,
never a healthy one.

Keep runs to judge first (each bench trains its own, with and without faults):

    python bench/learn_less_zoo.py --seeds 2 --keep /tmp/keep/zoo
    python bench/healthy_sweep.py --keep /tmp/keep/sweep
    python bench/labels_without_accuracy.py /tmp/keep/zoo /tmp/keep/sweep

A run counts as broken where its name says so (the zoo's `-broken`); every other run is healthy.
"""

from __future__ import annotations

import argparse
import sys

from tb_trainhealth import engine
from tb_trainhealth.contract import series as sig
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader

ACCURACY = (sig.EPOCH_ACCURACY, sig.EPOCH_VAL_ACCURACY)


def _alarms(findings: list[Finding]) -> set[str]:
    return {f.code for f in findings if f.severity >= Severity.WARNING and f.code != "input_bound"}


def judge(root: str) -> list[tuple[str, set[str], set[str], str]]:
    """(run, codes as recorded, codes without accuracy, the label finding's title) per run."""
    reader = SignalReader(open_logdir(root))
    rows = []
    for group in reader.groups():
        run = reader.read(group)
        recorded = engine.diagnose(run)
        for name in ACCURACY:
            run.series.pop(name, None)
        blind = engine.diagnose(run)
        label = next((f.title for f in blind if f.code == "label_problem"), "")
        rows.append((group.name, _alarms(recorded), _alarms(blind), label))
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", help="logdirs of kept runs")
    args = parser.parse_args(argv)
    healthy_flagged, healthy, broken_found, broken = 0, 0, 0, 0
    for root in args.roots:
        for name, recorded, blind, label in judge(root):
            is_broken = "-broken" in name
            added = blind - recorded
            if is_broken:
                broken += 1
                broken_found += bool(blind)
            else:
                healthy += 1
                healthy_flagged += bool(blind)
            if added or label or (is_broken and not blind) or (not is_broken and blind):
                kind = "broken" if is_broken else "healthy"
                print(f"{kind:7} {name:60} recorded={sorted(recorded)} no-accuracy={sorted(blind)}  {label[:90]}")
    print(
        f"without accuracy: healthy runs with a warning: {healthy_flagged} of {healthy}; "
        f"broken runs found: {broken_found} of {broken}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
