"""setup.py promises what bench/compat.py showed: docs/supported-versions.md's table (the bench's
output) has a passing row at each lower bound of setup.py and on each Python it allows, so a bound
moved without running the bench again fails here. No install, no network: the bench is run by hand."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

from bench import compat  # (stdlib only at import: starts no TensorFlow)

SUPPORTED = (Path(ROOT) / "docs" / "supported-versions.md").read_text()
# What the bench calls each package in its row labels.
SHOWN_AS = {
    "tensorflow": "TF",
    "keras": "Keras",
    "tf-keras": "tf_keras",
    "tensorboard": "TensorBoard",
    "protobuf": "protobuf",
    "numpy": "numpy",
}


def rows() -> list[list[str]]:
    assert SUPPORTED.startswith("# Supported versions\n")
    lines = [line for line in SUPPORTED.splitlines() if line.startswith("| ") and not line.startswith("| versions")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def shown(package: str) -> list[str]:
    """Every version of `package` the table's rows name."""
    return [m for row in rows() for m in re.findall(rf"\b{re.escape(SHOWN_AS[package])} ([0-9][0-9.]*)", row[0])]


def test_every_cell_of_the_support_table_passed():
    assert rows() and all(len(row) == len(compat.PARTS) + 1 for row in rows())
    assert all(cell in (compat.OK, compat.NOT_CHECKED) for row in rows() for cell in row[1:]), rows()


def test_each_lower_bound_of_setup_py_has_a_row_at_that_release():
    promises = compat.setup_promises()
    extras = promises["extras_require"]
    requirements = [*promises["install_requires"], *extras["tf"], compat.by_name(extras["test"], "tf-keras")]
    for requirement in requirements:
        name, bound = compat.lower_bound(requirement)
        if name not in SHOWN_AS:
            continue
        versions = shown(name)
        lowest = min(versions, key=compat.release)
        assert compat.release(lowest) >= compat.release(bound), (requirement, versions)
        # the same release line as the bound: 2.16 -> 2.16.1 (2.16.0 never reached PyPI), 3.7 -> 3.7.0
        assert compat.release(lowest)[: len(compat.release(bound))] == compat.release(bound), (requirement, versions)


def test_each_python_the_bench_runs_has_a_row_and_the_lowest_is_python_requires():
    pythons = {".".join(v.split(".")[:2]) for row in rows() for v in re.findall(r"Python ([0-9.]+)", row[0])}
    assert pythons == set(compat.PYTHONS)
    assert (
        min(pythons, key=compat.release) == compat.lower_bound("python" + compat.setup_promises()["python_requires"])[1]
    )
