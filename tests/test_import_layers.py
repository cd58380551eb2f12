"""The package's parts import each other only along the edges below (docs/development.md draws
them): the contract at the bottom, the rules above the signals, the read side (rules, engine,
diagnosis, advice, compare, report) above those, the CLI and the plugin on top; the write side
(`callback/`) reaches the read side's judgement only through `callback/read_side.py` (and the
comparison through `callback/baseline.py`), at its first use, not when it is imported."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import ROOT, run_python

PACKAGE = Path(ROOT) / "tb_trainhealth"

# Each part (a sub-package, or a module at the top of the package) and the parts it may import.
ALLOWED: dict[str, set[str]] = {
    "contract": set(),
    "run_paths": set(),
    "storage": {"run_paths"},
    "signals": {"contract"},
    "findings": {"contract"},
    "series_math": {"signals"},
    "step_axis": {"contract", "signals"},
    "yardstick": {"contract", "series_math", "signals"},
    "tracking": {"findings"},
    "rules": {"contract", "findings", "series_math", "signals", "yardstick"},
    "engine": {"contract", "findings", "rules", "signals"},
    "read": {"contract", "run_paths", "signals", "step_axis", "storage"},
    "diagnosis": {"engine", "findings", "read", "rules", "signals"},
    "advice": {"contract", "findings", "signals"},
    "compare": {"contract", "diagnosis", "findings", "read", "run_paths", "series_math", "signals", "yardstick"},
    "report": {"advice", "contract", "diagnosis", "findings", "read", "signals"},
    "cli": {"advice", "compare", "contract", "diagnosis", "findings", "read", "report", "run_paths", "storage", "tracking"},
    "plugin": {"compare", "contract", "diagnosis", "read", "report", "run_paths", "signals", "storage"},
    "callback": {"contract", "findings", "run_paths", "signals", "storage", "tracking"},
    "__init__": {"callback"},
}
READ_SIDE = {"rules", "engine", "diagnosis", "advice", "compare", "report", "read", "cli", "plugin"}
# The write side's only doors to the read side, and what each may reach.
BRIDGES = {"callback/read_side.py": {"engine", "advice"}, "callback/baseline.py": {"compare", "diagnosis"}}


def _part(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _imported_parts(path: Path) -> set[str]:
    parts = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tb_trainhealth":
            names = node.module.split(".")[1:2] or [a.name for a in node.names]
            parts.update(n for n in names if n != "__version__")
        elif isinstance(node, ast.Import):
            parts.update(a.name.split(".")[1] for a in node.names if a.name.startswith("tb_trainhealth."))
    return parts


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_each_module_imports_only_along_the_allowed_edges(path):
    part = _part(path)
    assert part in ALLOWED, f"{part} is a new part of the package: give it its edges here and in docs/development.md"
    bridge = BRIDGES.get(str(path.relative_to(PACKAGE)), set())
    stray = _imported_parts(path) - ALLOWED[part] - bridge - {part}
    assert not stray, f"{path.relative_to(PACKAGE)} imports {sorted(stray)}"


def test_the_allowed_edges_have_no_cycle_and_the_write_side_reads_nothing_else():
    assert not ALLOWED["callback"] & READ_SIDE
    seen: dict[str, int] = {}

    def depth(part: str, path: tuple[str, ...] = ()) -> int:
        assert part not in path, f"cycle: {' -> '.join((*path, part))}"
        if part not in seen:
            seen[part] = 1 + max((depth(p, (*path, part)) for p in ALLOWED[part]), default=0)
        return seen[part]

    for part in ALLOWED:
        depth(part)


def test_importing_the_callback_loads_no_rule_and_no_reader():
    proc = run_python(
        "-c",
        "import json, sys; from tb_trainhealth import HealthCallback; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('tb_trainhealth.'))))",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "tb_trainhealth.callback.health_callback" in loaded
    read_side = [m for m in loaded if m.split(".")[1] in READ_SIDE]
    assert not read_side, read_side
