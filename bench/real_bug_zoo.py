"""The real-bug zoo (team issue 44): buggy programs people reported, with the fix they found.

Each case (`bench/real_bugs/`) is ported from a public report and runs as its author wrote it
and as fixed. For each seed the zoo trains both with HealthCallback, checks in numbers that the
fix is really better (the held-out score, the same measure for both), diagnoses both, and
scores: found (a warning or critical on the buggy run), exact (the worst finding's code is one
the case names), fixed warned (a warning or critical on the fixed run). It also prints how far
each run's best loss ended from what a constant prediction scores under its own loss (the
`worse_than_constant` yardstick): below 1 is better than a constant.

Usage:
    python bench/real_bug_zoo.py [--seeds 1] [--only NAME[,NAME]] [--keep DIR] [--verbose]
    python bench/real_bug_zoo.py --rediagnose DIR   # diagnose runs kept by --keep again, no training
Exit status: 0 when every verified buggy run is found and no fixed run is warned, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench.real_bugs.case import Case
from tb_trainhealth import engine
from tb_trainhealth.findings import Finding, Severity
from tb_trainhealth.read.logdir import open_logdir
from tb_trainhealth.read.reader import SignalReader
from tb_trainhealth.yardstick import judged_loss, yardstick

# The input wait depends on how busy the machine is, not on the program: reported, not scored.
LOAD_DEPENDENT = frozenset({"input_bound"})


def all_cases() -> list[Case]:
    from bench.real_bugs import deepmufl_cases, other_cases, subtle_cases

    return [*deepmufl_cases.CASES, *other_cases.CASES, *subtle_cases.CASES]


def diagnose(root: str) -> tuple[list[Finding], float | None]:
    """The findings of the run under `root`, and its best loss over the constant's (None: unknown)."""
    reader = SignalReader(open_logdir(root))
    findings, ratio = [], None
    for group in reader.groups():
        run = reader.read(group)
        findings += engine.diagnose(run)
        stick, judged = yardstick(run), judged_loss(run)
        if stick is not None and judged is not None:
            ratio = float(min(judged[1].values)) / stick.value
    return findings, ratio


def loud(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity >= Severity.WARNING and f.code not in LOAD_DEPENDENT]


def train(case: Case, buggy: bool, seed: int, root: str) -> tuple[float, float]:
    """(held-out score, seconds) of one version trained with HealthCallback into `root`."""
    from tb_trainhealth import HealthCallback

    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        score = case.run(buggy, seed, [HealthCallback(root)])
    return float(score), time.perf_counter() - started


def judge(case: Case, seed: int, scores: dict[str, float], roots: dict[str, str]) -> dict[str, Any]:
    result: dict[str, Any] = {"case": case.name, "seed": seed, "suspicious_fixed": case.suspicious_fixed}
    for key in ("buggy", "fixed"):
        findings, ratio = diagnose(roots[key])
        result[key] = {"score": scores[key], "findings": findings, "constant_ratio": ratio}
    buggy, fixed = result["buggy"], result["fixed"]
    result["verified"] = fixed["score"] - buggy["score"] >= case.margin
    result["found"] = bool(loud(buggy["findings"]))
    top = loud(buggy["findings"])[:1]
    result["exact"] = bool(top) and top[0].code in case.codes
    result["fixed_warned"] = bool(loud(fixed["findings"]))
    return result


def print_result(case: Case, r: dict[str, Any], verbose: bool) -> None:
    b, f = r["buggy"], r["fixed"]

    def ratio(v: float | None) -> str:
        return f"{v:.3g}" if v is not None else "-"

    print(
        f"{r['case']:40} s{r['seed']} {case.score_name} {b['score']:.3f} vs fixed {f['score']:.3f}"
        f"  verified={'Y' if r['verified'] else 'N'} found={'Y' if r['found'] else 'N'}"
        f" exact={'Y' if r['exact'] else 'N'} fixed_warned={'Y' if r['fixed_warned'] else 'N'}"
        f"  vs constant {ratio(b['constant_ratio'])} / {ratio(f['constant_ratio'])}"
    )
    for key in ("buggy", "fixed"):
        shown = r[key]["findings"] if verbose else loud(r[key]["findings"])
        for finding in shown:
            print(f"    {key:6} [{finding.severity.label}] {finding.code}: {finding.title[:150]}")
    sys.stdout.flush()


def summary(results: list[dict[str, Any]]) -> None:
    verified = [r for r in results if r["verified"]]
    n = len(verified)
    found, exact = sum(r["found"] for r in verified), sum(r["exact"] for r in verified)
    warned = sum(r["fixed_warned"] for r in results)
    print()
    print(
        f"verified pairs: {n} of {len(results)}; buggy found: {found} of {n} ({found / max(n, 1):.0%}); "
        f"exact: {exact} of {n} ({exact / max(n, 1):.0%}); fixed warned: {warned} of {len(results)}"
    )


def to_json(r: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in r.items() if k not in ("buggy", "fixed")}
    for key in ("buggy", "fixed"):
        out[key] = {
            "score": r[key]["score"],
            "constant_ratio": r[key]["constant_ratio"],
            "findings": [[f.code, f.severity.label, f.title] for f in r[key]["findings"]],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--only", default=None)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--keep", default=None, metavar="DIR", help="keep the logdirs (and scores) under DIR")
    parser.add_argument("--rediagnose", default=None, metavar="DIR", help="judge runs kept under DIR again")
    parser.add_argument("--json", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    cases = [c for c in all_cases() if not args.only or any(p in c.name for p in args.only.split(","))]
    kept = args.rediagnose or args.keep
    results = []
    for case in cases:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            with tempfile.TemporaryDirectory() as scratch:
                base = os.path.join(kept or scratch, f"{case.name}-s{seed}")
                roots = {key: os.path.join(base, key) for key in ("buggy", "fixed")}
                scores_file = os.path.join(base, "scores.json")
                if args.rediagnose:
                    if not os.path.exists(scores_file):
                        continue
                    with open(scores_file) as f:
                        scores = json.load(f)
                else:
                    try:
                        scores = {key: train(case, key == "buggy", seed, roots[key])[0] for key in roots}
                    except Exception as err:  # a case that no longer runs: said, and the zoo goes on
                        print(f"{case.name:40} s{seed} FAILED TO RUN: {type(err).__name__}: {err}")
                        continue
                    if kept:
                        with open(scores_file, "w") as f:
                            json.dump(scores, f)
                result = judge(case, seed, scores, roots)
            print_result(case, result, args.verbose)
            results.append(result)
    summary(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([to_json(r) for r in results], f, indent=1)
    ok = all(r["found"] for r in results if r["verified"]) and not any(r["fixed_warned"] for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
