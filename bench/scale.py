"""`tb-trainhealth diagnose` on a huge logdir: wall time and peak memory of the whole process tree.

Builds (once, cached under --logdir) 100 runs x 100,000 steps of a 100-layer model laid out
as HealthCallback writes them (~4.9 GiB; it prints the size), then times `diagnose --json` as a user runs it
(each run read from its files, read/file_provider.py, in a process per core) and, on the first
--compare runs only, side by side with TensorBoard's loaders (TB_TRAINHEALTH_LOADER=tensorboard:
the Rust data server, and the Python ingester without it), scaled per run.
Peak memory is the largest sum of RSS over the CLI and its children, sampled every 50 ms.
Each `diagnose` is timed beside a plain read of the same bytes in the same run (`cat` of every
event file to /dev/null, just before it), and the ratio is printed: machine noise cancels.
Targets (issue 57): at most 3x the plain read, under 15 s on 2 cores, at most 512 MiB.

Usage: python bench/scale.py [--logdir /tmp/tbth_scale] [--runs 100] [--steps 100000] [--compare 3]
The Health tab's routes on the same logdir:
    python bench/routes_latency.py --logdir /tmp/tbth_scale --runs 100 --steps 100000 --layers 100
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from synthetic_logs import write_logdir

POLL_SECONDS = 0.05
PAGE = os.sysconf("SC_PAGE_SIZE")


def _tree_rss(root: int) -> int:
    """Resident bytes of `root` and every descendant (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * PAGE
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def run_cli(logdir: str, env: dict[str, str]) -> tuple[float, int, dict]:
    """(wall seconds, peak tree RSS bytes, parsed JSON) of one `diagnose --json`; `cpu_seconds()`
    after it: the CPU time it and its children took (a busy machine stretches wall time, not this)."""
    command = [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", logdir, "--json"]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, env={**os.environ, **env})
        peak = 0
        while process.poll() is None:
            peak = max(peak, _tree_rss(process.pid))
            time.sleep(POLL_SECONDS)
        wall = time.perf_counter() - started
        if process.returncode not in (0, 1):
            raise SystemExit(f"diagnose exited {process.returncode}")
        out.seek(0)
        return wall, peak, json.load(out)


def plain_read(logdir: str) -> float:
    """Wall seconds of `cat` of every event file under `logdir` to /dev/null (symlinks followed)."""
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(logdir, followlinks=True) for f in names)
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        for i in range(0, len(files), 500):
            subprocess.run(["cat", *files[i : i + 500]], stdout=sink, check=True)
    return time.perf_counter() - started


def cpu_seconds() -> float:
    """User + system seconds of every child process waited for so far (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def subset(logdir: str, runs: int) -> str:
    """A logdir of symlinks to the first `runs` runs."""
    target = tempfile.mkdtemp(prefix="tbth_subset_")
    for name in sorted(os.listdir(logdir))[:runs]:
        os.symlink(os.path.join(logdir, name), os.path.join(target, name))
    return target


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--logdir", default="/tmp/tbth_scale")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--layers", type=int, default=100)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--compare", type=int, default=3, help="runs also read with the Python ingester")
    args = parser.parse_args()
    started = time.perf_counter()
    write_logdir(args.logdir, args.runs, args.steps, args.layers, args.events)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(args.logdir) for f in files)
    print(f"logdir: {args.runs} runs x {args.steps} steps x {args.layers} layers, {size / 2**30:.1f} GiB "
          f"(ready in {time.perf_counter() - started:.0f} s)")  # fmt: skip

    plain = plain_read(args.logdir)
    before = cpu_seconds()
    wall, peak, payload = run_cli(args.logdir, {})
    cpu = cpu_seconds() - before
    flagged = sum(r["status"] != "ok" for r in payload["runs"])
    print(f"plain read (cat), all files: {plain:6.1f} s")
    print(f"diagnose, all {len(payload['runs'])} runs:  {wall:6.1f} s  peak {peak / 2**20:6.0f} MiB  "
          f"({flagged} runs flagged)  {wall / plain:.1f}x the plain read; targets <= 3x, < 15 s, <= 512 MiB")  # fmt: skip
    print(f"  CPU time of diagnose and its children: {cpu:.1f} s ({cpu / (os.cpu_count() or 1):.1f} s per core)")
    if args.compare:
        few = subset(args.logdir, args.compare)
        few_plain = plain_read(few)
        tensorboard = {"TB_TRAINHEALTH_LOADER": "tensorboard"}
        files_wall, files_peak, _ = run_cli(few, {})
        fast_wall, fast_peak, _ = run_cli(few, tensorboard)
        slow_wall, slow_peak, _ = run_cli(few, {**tensorboard, "TENSORBOARD_DATA_SERVER_BINARY": "/nonexistent"})
        print(f"first {args.compare} runs, plain read:      {few_plain:6.1f} s")
        print(f"first {args.compare} runs, from the files:  {files_wall:6.1f} s  peak {files_peak / 2**20:6.0f} MiB"
              f"  ({files_wall / few_plain:.1f}x the plain read)")  # fmt: skip
        print(f"first {args.compare} runs, data server:     {fast_wall:6.1f} s  peak {fast_peak / 2**20:6.0f} MiB"
              f"  ({fast_wall / few_plain:.1f}x the plain read)")  # fmt: skip
        print(f"first {args.compare} runs, Python ingester: {slow_wall:6.1f} s  peak {slow_peak / 2**20:6.0f} MiB"
              f"  ({slow_wall / fast_wall:.1f}x the data server; ~{slow_wall / args.compare * args.runs:.0f} s for all)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
