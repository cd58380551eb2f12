"""Rewrites README's example CLI output (between its `example-output` markers) from a demo
logdir, so the README shows what the current version prints.

Usage: python demo/readme_example.py [LOGDIR]   (default demo_logs; make it with make_demo_logs.py)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "README.md")
RUNS = ("nan_input", "oom_retry")  # a NaN traced to its batch; a real OOM retried at smaller batches
BLOCK = re.compile(r"(<!-- example-output:start -->\n```\n).*?(```\n<!-- example-output:end -->)", re.S)


def example_output(logdir: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        for run in RUNS:
            shutil.copytree(os.path.join(logdir, run), os.path.join(tmp, run))
        proc = subprocess.run(
            [sys.executable, "-m", "tb_trainhealth.cli", "diagnose", tmp], capture_output=True, text=True, check=False
        )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"tb-trainhealth diagnose failed: {proc.stderr.strip()}")
    return proc.stdout.replace(tmp, "logs")


def main(argv: list[str]) -> int:
    logdir = argv[1] if len(argv) > 1 else "demo_logs"
    with open(README, encoding="utf-8") as f:
        text = f.read()
    if not BLOCK.search(text):
        raise SystemExit("README.md has no example-output markers")
    text = BLOCK.sub(lambda m: m.group(1) + example_output(logdir) + m.group(2), text)
    with open(README, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"rewrote README.md's example output from {', '.join(RUNS)} in {logdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
