"""README's example output is what the product prints: the whole block is `diagnose` today on the
same demo runs (nan_input trained once per session, oom_retry trained here as the demo does), made
by demo/readme_example.py, so the README cannot keep a line the product no longer prints (it showed
"NaN/Inf appeared in gradients and weights" and "dense_12 on 2 step(s)" after both had changed);
its NaN example's plan is the plan `diagnose` gives today (it once showed "lower the learning
rate" for a NaN input)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from conftest import ROOT, run_python

EXAMPLE = re.compile(r"<!-- example-output:start -->\n```\n(.*?)```\n<!-- example-output:end -->", re.S)


# What differs between two trainings of the same demo run and is not the product's wording: Keras
# numbers its layers in the order a process builds them (dense_12 in the demo's process), and the
# memory in use at an OOM is the machine's, and so is the step of the reading it comes from.
VOLATILE = (
    (re.compile(r"\bdense(?:_\d+)?\b"), "dense_N"),
    (re.compile(r"\b\d+ MB\b"), "N MB"),
    (re.compile(r"in use at step \d+"), "in use at step N"),
)


# And what the machine's load decides: on a busy machine a tiny MLP's steps wait for their batches
# (conftest.LOAD_DEPENDENT: the nan_input run read "waits for input 17%" beside the full suite and two
# benches), an info finding the demo on an idle machine does not have. Its block goes, and with it
# the finding count in the run's header line.
LOAD_DEPENDENT_BLOCK = re.compile(r"\n  \[info\] input_bound @[^\n]*(?:\n {6,}[^\n]*)*")


def normalized(text: str) -> list[str]:
    """The block's lines, the volatile parts replaced, each wrapped paragraph as one line (a longer
    layer name wraps a detail at another word)."""
    loaded = LOAD_DEPENDENT_BLOCK.findall(text)
    text = LOAD_DEPENDENT_BLOCK.sub("", text)
    if loaded:
        text = re.sub(r"\((\d+) finding\(s\)\)", lambda m: f"({int(m.group(1)) - len(loaded)} finding(s))", text, count=1)
    for pattern, stand_in in VOLATILE:
        text = pattern.sub(stand_in, text)
    return re.sub(r"\n {6,}(?=\S)", " ", text).splitlines()


def test_the_readme_example_is_what_diagnose_prints_today(scenario_logdir, tmp_path):
    from readme_example import RUNS, example_output

    logdir = tmp_path / "demo_logs"
    shutil.copytree(os.path.join(scenario_logdir, "nan_input"), logdir / "nan_input")
    done = run_python(os.path.join(ROOT, "tests", "oom_training.py"), str(logdir / "oom_retry"), "256")  # as the demo
    assert done.returncode == 0, done.stderr[-2000:]
    assert RUNS == ("nan_input", "oom_retry")
    shown = EXAMPLE.search((Path(ROOT) / "README.md").read_text()).group(1)
    assert normalized(shown) == normalized(example_output(str(logdir))), (
        "README's example output is not what diagnose prints now: "
        "python demo/make_demo_logs.py demo_logs && python demo/readme_example.py demo_logs"
    )
