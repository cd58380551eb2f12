"""Runs every demo scenario (several seeds) and prints what the rules find.

The evidence behind the rules' thresholds: healthy runs must stay quiet, each
broken run must get its code. Usage: python bench/rule_zoo.py [--seeds 3] [--only NAME]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "demo"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from scenarios import SCENARIOS, WRONG_CAUSE_SCENARIOS

from tb_trainhealth import engine
from tb_trainhealth.findings import Severity
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    misses = false_alarms = 0
    for scenario in SCENARIOS + WRONG_CAUSE_SCENARIOS:
        if args.only and args.only not in scenario.name:
            continue
        for seed in range(args.seeds):
            with tempfile.TemporaryDirectory() as root:
                started = time.perf_counter()
                scenario.train(os.path.join(root, "run"), seed=seed)
                seconds = time.perf_counter() - started
                reader = SignalReader(open_logdir(root))
                (group,) = reader.groups()
                signals = reader.read(group)
                findings = engine.diagnose(signals)
            loud = {f.code for f in findings if f.severity >= Severity.WARNING}
            missing = set(scenario.expected) - loud
            extra = loud - set(scenario.expected)
            misses += bool(missing)
            false_alarms += bool(extra) and not scenario.expected
            print(f"{scenario.name:26} seed={seed} {seconds:5.1f}s  missing={sorted(missing)} other={sorted(extra)}")
            for f in findings:
                print(f"    [{f.severity.label}] {f.code} @{f.step}: {f.title}")
            sys.stdout.flush()
    print(f"runs with a missed code: {misses}; healthy runs with a warning/critical: {false_alarms}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
