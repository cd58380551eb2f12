"""README and its pages under docs/ say what the code does: the tables of finding codes and the
description of `diagnose --json` are checked against the rule registry and the JSON the CLI writes,
so the two cannot drift apart again (a code left out, a row pasted into another, a key never written);
README's first screen holds the two set-up commands above the picture, the second of them the one CI runs
(every test), and the quick set's command.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import ROOT

from tb_trainhealth.cli.diagnose import EPILOG
from tb_trainhealth.cli.json_report import render_json
from tb_trainhealth.compare.comparison import CODE as COMPARE_CODE
from tb_trainhealth.contract.events import NonfiniteEvent
from tb_trainhealth.contract.vocab import JUDGED_STATUSES, RunStatus
from tb_trainhealth.findings import Evidence, Fact, Finding, Fix, Severity
from tb_trainhealth.read import event_files
from tb_trainhealth.report.run_report import RunReport
from tb_trainhealth.rules import RULES
from tb_trainhealth.signals import RunSignals

README = (Path(ROOT) / "README.md").read_text()
DOCS = Path(ROOT) / "docs"
CODE_NAME = re.compile(r"`([a-z]+(?:_[a-z]+)+|[a-z]+)`")
KEY = re.compile(r'"(\w+)"')


def registry_codes() -> set[str]:
    """Every finding code the package gives: the rule registry's and `compare`'s."""
    return {code for rule in RULES for code in rule.codes} | {COMPARE_CODE}


def page(name: str) -> str:
    """The text of docs/`name`."""
    return (DOCS / name).read_text()


def tables(text: str) -> list[list[list[str]]]:
    """Each Markdown table in `text` as rows of cells, its header row first (no separator row)."""
    found, rows = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            if not re.fullmatch(r"\|(\s*-+\s*\|)+", line):
                rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            found, rows = [*found, rows], []
    return found


def code_tables() -> list[tuple[str, list[list[str]]]]:
    """(file, table) for every table of README and docs/*.md with a "code" column."""
    texts = {"README.md": README} | {f"docs/{p.name}": p.read_text() for p in sorted(DOCS.glob("*.md"))}
    return [(name, table) for name, text in texts.items() for table in tables(text) if "code" in table[0]]


def sample_reports() -> list[RunReport]:
    """One run as `diagnose_logdir` gives it, with a finding, a file error and an event that fill every field."""
    finding = Finding(
        code="nonfinite",
        severity=Severity.CRITICAL,
        step=38,
        title="NaN",
        detail="NaN in the loss",
        evidence=Evidence(("loss",), 1, 38, layer="dense", facts=(Fact("first NaN", "38"),), check="first_batch"),
        fixes=(Fix("Lower the learning rate.", "lr = 1e-4"),),
    )
    problem = event_files.FileProblem("run/events.out.tfevents.1.host", event_files.TRUNCATED, "truncated: ...")
    signals = RunSignals("run", events=[NonfiniteEvent(step=38, where="loss")])
    return [RunReport.told("run", signals, [finding], [], [problem])]


def written_run() -> dict:
    return json.loads(render_json(sample_reports()))["runs"][0]


def finding_keys(finding: dict) -> set[str]:
    """A finding's keys with those of its evidence and facts."""
    evidence = finding["evidence"]
    return {*finding, *evidence, *evidence["facts"][0]}


def test_the_codes_table_has_one_row_for_every_code_the_package_gives():
    assert page("codes.md").startswith("# Finding codes\n")
    (table,) = tables(page("codes.md"))
    header, *rows = table
    assert header == ["code", "what it means", "severity", "based on"]
    assert [row for row in rows if len(row) != len(header)] == []  # no row pasted into another
    codes = [CODE_NAME.fullmatch(row[0]).group(1) for row in rows]
    assert len(codes) == len(set(codes))
    assert set(codes) == registry_codes()


# preflight.md's row for the train-start lint, whose codes are those of mistakes.md's table
LINT_ROW_CODES = "the codes of that page's table"


@pytest.mark.parametrize("name", ["docs/mistakes.md", "docs/preflight.md"])
def test_the_pages_of_mistakes_have_a_table_of_codes(name):
    assert [table for where, table in code_tables() if where == name], f"no table with a code column in {name}"


def test_tables_of_mistakes_name_only_known_codes():
    for _, (header, *rows) in code_tables():
        column = header.index("code")
        assert [row for row in rows if len(row) != len(header)] == []  # no row pasted into another
        named = [CODE_NAME.findall(row[column]) for row in rows]
        assert all(names or row[column] == LINT_ROW_CODES for names, row in zip(named, rows))
        assert {code for names in named for code in names} <= registry_codes()


def described_json() -> str:
    (shape,) = re.findall(r'`(\{"runs": \[\{.*?\}\]\})`', page("cli.md"), re.S)
    return shape


def test_readme_names_exactly_the_run_keys_diagnose_json_writes():
    assert set(KEY.findall(described_json())) - {"runs"} == set(written_run())


def test_readme_names_every_key_of_a_finding_and_of_a_file_error():
    cli_section = page("cli.md")
    start = cli_section.index("each finding has")
    sentence = cli_section[start : cli_section.index("Text output", start)]
    described = set(re.findall(r"`(\w+)`", sentence)) | set(KEY.findall(sentence))
    run = written_run()
    assert finding_keys(run["findings"][0]) <= described
    (file_errors,) = re.findall(r"`file_errors` \(`(\{[^}]*\})`", cli_section)
    assert set(KEY.findall(file_errors)) == set(run["file_errors"][0])


def test_readme_lists_every_status_and_file_problem_kind():
    cli_section = page("cli.md")
    (statuses,) = re.findall(r"\(`status`: ([^;]*);", cli_section)
    assert CODE_NAME.findall(statuses) == [*JUDGED_STATUSES, RunStatus.UNREADABLE]
    (kinds,) = re.findall(r'`\{"file", "error", "kind"\}`, kind ([^)]*)\)', cli_section, re.S)
    assert set(CODE_NAME.findall(kinds)) == {*event_files.ERROR_KINDS, *event_files.NOTE_KINDS}


def test_help_describes_the_same_json():
    (runs,) = re.findall(r'\{"runs": \[\{(.*?)\}, \.\.\.\]\}', EPILOG, re.S)
    assert set(KEY.findall(runs)) == set(written_run())
    finding = EPILOG[EPILOG.index("A finding:") :]
    assert set(KEY.findall(finding)) == finding_keys(written_run()["findings"][0])
    statuses = EPILOG[EPILOG.index('"status":') : EPILOG.index("(nothing")]
    assert KEY.findall(statuses)[1:] == [*JUDGED_STATUSES, RunStatus.UNREADABLE]


# Figures of speed or size ("20x faster", "25% smaller") must say which bench measures them.
SPEED_CLAIM = re.compile(r"\d+(?:\.\d+)?x (?:faster|slower)|\d+% (?:faster|slower|smaller|larger)")
# Where this test looks: README, its pages under docs/, and the read side, rules, CLI, contract and benches. (callback/,
# plugin/ and compare/ are left to their owners: callback/record/summary_bytes.py still has two.)
CHECKED = ("tb_trainhealth/read", "tb_trainhealth/rules", "tb_trainhealth/cli", "tb_trainhealth/contract", "bench")


def paragraphs() -> list[tuple[str, str]]:
    """(file, paragraph) of README, docs/*.md and every checked module: text between blank lines."""
    modules = sorted(p for d in CHECKED for p in (Path(ROOT) / d).rglob("*.py"))
    files = [Path(ROOT) / "README.md", *sorted(DOCS.glob("*.md")), *modules]
    return [(str(f.relative_to(ROOT)), block) for f in files for block in re.split(r"\n\s*\n", f.read_text())]


def test_speed_and_size_claims_name_the_bench_that_measures_them():
    unbacked = [
        (f, claim) for f, block in paragraphs() for claim in SPEED_CLAIM.findall(block) if "bench/" not in block
    ]
    assert unbacked == []


def test_the_scale_logdir_has_one_size_everywhere():
    def size(path: str, pattern: str) -> str:
        (found,) = re.findall(pattern, (Path(ROOT) / path).read_text())
        return found

    sizes = {
        size("docs/cli.md", r"\((\d+\.\d+) GiB as `HealthCallback` writes them\)"),
        size("bench/scale.py", r"\(~(\d+\.\d+) GiB; it prints the size\)"),
        size("tb_trainhealth/read/event_files.py", r"bench/scale.py's ~(\d+\.\d+) GiB"),
    }
    assert len(sizes) == 1


# README's set-up commands, as "## Set up" gives them: one runs the demo and the Health tab, one the tests.
DEMO_COMMAND = "pip install -e '.[tf]' && python demo/make_demo_logs.py demo_logs && tb-trainhealth diagnose demo_logs"
TEST_COMMAND = "pip install -e '.[tf,test]' && pytest -q"
QUICK_COMMAND = 'pytest -q -m "not slow"'  # the quick set (pytest.ini's markers)


def test_the_first_screen_shows_the_tab_and_both_set_up_commands_and_ci_runs_the_test_command():
    first_screen = "\n".join(README.splitlines()[:40])
    commands = re.findall(r"^```\n(.*?)\n```$", first_screen, re.S | re.M)
    assert "![The Health tab](docs/health-tab.png)" in first_screen
    # set-up above the picture: on a laptop's first screen
    assert first_screen.index("## Set up") < first_screen.index("![The Health tab]")
    assert f"`{QUICK_COMMAND}`" in first_screen
    assert any(command.startswith(DEMO_COMMAND) for command in commands), commands
    assert TEST_COMMAND in commands
    ci_run = (Path(ROOT) / ".ci" / "run").read_text().strip().splitlines()
    assert ci_run[-1] == TEST_COMMAND


def test_the_quick_set_leaves_out_the_slow_markers_and_they_are_registered():
    ini = (Path(ROOT) / "pytest.ini").read_text()
    for marker in ("slow", "browser", "bucket"):
        assert re.search(rf"^    {marker}: ", ini, re.M), marker
