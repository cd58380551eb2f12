"""`HealthCallback(baseline=...)` during the fit, replayed on bench/compare_zoo.py's runs: at each
epoch end of each run, the check the callback makes (`compare.so_far`: the run so far against the
baseline at the same step), on the run's own event files cut at that step.

A false alarm costs more than a miss: every benign pair (another seed, Nadam, batch 64, lr x2, ...)
and every pair of two baseline seeds of one set-up, both ways, must never be said behind at any
epoch. For the harmful changes that did hurt on both seeds, it prints at which epoch each was
first said behind, out of how many. Usage:

    python bench/compare_zoo.py --keep /tmp/cmp_zoo      # trains the zoo (minutes)
    python bench/baseline_during_fit.py /tmp/cmp_zoo
"""

from __future__ import annotations

import itertools
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.compare_zoo import NOISE_SEEDS, SETUPS, VARIANTS, hurt
from tb_trainhealth.compare.runs import compare_directories, diagnosed_directory
from tb_trainhealth.compare.so_far import Yardstick, judged_so_far
from tb_trainhealth.contract import series as sig
from tb_trainhealth.signals import RunSignals


def first_behind(run: RunSignals, baseline: RunSignals) -> tuple[int | None, int]:
    """(the first epoch, from 1, at which the run so far is said behind, or None; its epochs)."""
    stick = Yardstick.of(run, baseline)
    epochs = run.get(sig.EPOCH_LOSS)
    steps = [] if epochs is None else [int(s) for s in epochs.steps]
    for epoch, step in enumerate(steps, 1):
        judged = judged_so_far(run.before(step + 1), baseline, stick)
        if judged is not None and judged.judgement.verdict.value == "worse":
            return epoch, len(steps)
    return None, len(steps)


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else "/tmp/cmp_zoo"
    read = {}

    def signals(path: str) -> RunSignals:
        if path not in read:
            read[path] = diagnosed_directory(path, "run").signals
        return read[path]

    alarms = quiet = caught = harmful = 0
    for setup in SETUPS:
        where = os.path.join(root, setup.name)
        for a, b in itertools.permutations(range(NOISE_SEEDS), 2):
            run, baseline = os.path.join(where, f"baseline_{a}"), os.path.join(where, f"baseline_{b}")
            epoch, total = first_behind(signals(run), signals(baseline))
            quiet += epoch is None
            alarms += epoch is not None
            flag = f"  <- FALSE ALARM at epoch {epoch}" if epoch is not None else ""
            print(f"  {setup.name:10} seed {a} vs seed {b:<10} never behind in {total} epochs{flag}" if not flag else
                  f"  {setup.name:10} seed {a} vs seed {b:<10}{flag}")  # fmt: skip
        for variant in VARIANTS:
            if variant.only and setup.name not in variant.only:
                continue
            pairs = [(os.path.join(where, f"{variant.name}_{s}"), os.path.join(where, f"baseline_{(s + 1) % 2}"))
                     for s in range(2)]  # fmt: skip
            if variant.harmful and not all(hurt(compare_directories(*pair)) for pair in pairs):
                continue
            for run, baseline in pairs:
                epoch, total = first_behind(signals(run), signals(baseline))
                name = f"{setup.name:10} {variant.name:18}"
                if variant.harmful:
                    harmful += 1
                    caught += epoch is not None and epoch < total
                    said = f"behind from epoch {epoch} of {total}" if epoch is not None else f"never behind ({total})"
                    print(f"  {name} harmful: {said}")
                else:
                    quiet += epoch is None
                    alarms += epoch is not None
                    print(f"  {name} benign:  " + (f"<- FALSE ALARM at epoch {epoch}" if epoch else "never behind"))
    print(f"\nbenign pairs and seed pairs said behind at some epoch: {alarms} of {alarms + quiet}")
    print(f"harmful pairs (that hurt on both seeds) said behind before their last epoch: {caught} of {harmful}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
