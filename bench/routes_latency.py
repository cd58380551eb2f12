"""Latency of the Health tab's routes on a big logdir, against a real `tensorboard` process.

Builds (once, cached under --logdir) 50 runs x 20,000 steps with per-layer series and
events, starts TensorBoard, and times the runs route and a run's findings route, cold
(first request after start: runs not diagnosed within ~2 s come back "pending", and
the time until every run is diagnosed is printed too) and warm (median of 10). Targets: warm runs < 300 ms,
warm findings < 500 ms. Usage: python bench/routes_latency.py [--load-fast false]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from synthetic_logs import write_logdir
from tensorboard_process import get_json, running_tensorboard, wait_for


def timed(url: str) -> tuple[float, object]:
    started = time.perf_counter()
    payload = get_json(url)
    return (time.perf_counter() - started) * 1000, payload


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--logdir", default="/tmp/tbth_bench_50x20k")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--layer-every", type=int, default=10)
    parser.add_argument("--load-fast", default="true", choices=["true", "false"])
    args = parser.parse_args()
    started = time.perf_counter()
    write_logdir(args.logdir, args.runs, args.steps, args.layers, events=20, layer_every=args.layer_every)
    print(f"logdir ready in {time.perf_counter() - started:.0f}s: {args.runs} runs x {args.steps} steps")
    with running_tensorboard(args.logdir, load_fast=args.load_fast == "true") as url:
        wait_for(lambda: len(get_json(url + "/data/runs")) >= args.runs, timeout=600)
        plugin = url + "/data/plugin/trainhealth"

        last = f"run_{args.runs - 1:03d}"

        def fully_loaded() -> bool:  # only diagnoses the last run: every other one stays cold
            try:
                steps = get_json(f"{plugin}/series?run={last}&names=loss&points=2")["series"]["loss"]["steps"]
            except OSError:
                return False
            return steps[-1] == args.steps

        wait_for(fully_loaded, timeout=900, interval=2)
        cold_findings, _ = timed(plugin + "/findings?run=run_001")  # first request for this run
        started = time.perf_counter()
        cold_runs, payload = timed(plugin + "/runs")  # answers within ~2 s, the rest "pending"
        first_pending = [r["status"] for r in payload["runs"]].count("pending")
        while any(r["status"] == "pending" for r in payload["runs"]):
            time.sleep(0.5)
            payload = get_json(plugin + "/runs")
        complete_s = time.perf_counter() - started
        warm_runs = sorted(timed(plugin + "/runs")[0] for _ in range(10))[5]
        warm_findings = sorted(timed(plugin + "/findings?run=run_001")[0] for _ in range(10))[5]
        time.sleep(5.5)  # past the plugin's listing TTL: a warm request that re-lists every run's tags
        relist_runs, _ = timed(plugin + "/runs")
        statuses = [r["status"] for r in payload["runs"]]
    print(
        f"load_fast={args.load_fast}: {len(statuses)} runs, {statuses.count('warning') + statuses.count('critical')} flagged"
    )
    print(f"runs route      cold {cold_runs:8.1f} ms   warm {warm_runs:7.1f} ms  (target < 300 ms)")
    print(f"  cold: {first_pending} runs pending in the first answer, all diagnosed after {complete_s:.1f} s")
    print(f"findings route  cold {cold_findings:8.1f} ms   warm {warm_findings:7.1f} ms  (target < 500 ms)")
    print(f"runs route, warm diagnoses but a fresh tag listing (every 5 s): {relist_runs:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
