"""Do two versions of tb-trainhealth diagnose a logdir the same way? (A refactor must not change any.)

    python bench/same_diagnoses.py LOGDIR --before REV [--after REV] [--allow CODE ...] [--repo DIR]

Runs `tb-trainhealth diagnose LOGDIR --json` with the code at git revision REV (exported with
`git archive` into a temporary directory) and with the current working tree (or `--after REV`),
each in a fresh Python process that imports that copy first, and compares per run: status,
errors, event_counts and, per finding, code, severity, step, title, detail, evidence and fixes.
Prints a short diff for each run that differs and a summary line.

--allow CODE (repeatable): ignore differences in findings of that code, and a status change
they alone explain (a deliberate bug fix); they are still printed, marked "allowed".

Exit status: 0 the same (but for allowed codes), 1 different, 2 could not compare (a version
failed to run, not a git repository, unknown revision).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

FINDING_FIELDS = ("code", "severity", "step", "title", "detail", "evidence", "fixes")
RUN_FIELDS = ("errors", "event_counts")
SEVERITY_STATUS = {"critical": "critical", "warning": "warning"}  # info and nothing: "ok"
STATUS_RANK = {"ok": 0, "warning": 1, "critical": 2}
RUNNER = (
    "import sys; sys.path.insert(0, sys.argv[1]); from tb_trainhealth.cli import main; "
    "sys.exit(main(['diagnose', sys.argv[2], '--json']))"
)
SHOWN_CHARS = 160


class CannotCompare(Exception):
    pass


def git(repo: str, *args: str) -> str:
    done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise CannotCompare(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def export(repo: str, rev: str, into: str) -> str:
    """The tree of `rev` under `into`; returns a label like 'HEAD (5294823)'."""
    commit = git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    archive = subprocess.Popen(["git", "-C", repo, "archive", commit], stdout=subprocess.PIPE)
    untar = subprocess.run(["tar", "-x", "-C", into], stdin=archive.stdout, capture_output=True)
    archive.stdout.close()
    if archive.wait() != 0 or untar.returncode != 0:
        raise CannotCompare(f"could not export {rev}: {untar.stderr.decode(errors='replace').strip()}")
    return f"{rev} ({commit[:7]})"


def diagnose(code_dir: str, logdir: str, label: str) -> dict[str, dict[str, Any]]:
    """{run: its JSON result} from `tb-trainhealth diagnose LOGDIR --json` run on the code in code_dir."""
    with tempfile.TemporaryDirectory() as cwd:  # nothing but code_dir shadows the installed package
        done = subprocess.run([sys.executable, "-c", RUNNER, code_dir, logdir], capture_output=True, text=True, cwd=cwd)
    try:
        runs = json.loads(done.stdout)["runs"]
    except (ValueError, KeyError, TypeError):
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise CannotCompare(f"{label}: the CLI exited {done.returncode} without JSON:\n{tail}") from None
    if done.returncode not in (0, 1):
        raise CannotCompare(f"{label}: the CLI exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return {run["run"]: run for run in runs}


def shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def headline(finding: dict[str, Any]) -> str:
    at = f" @ step {finding.get('step')}" if finding.get("step") is not None else ""
    return f"{finding.get('code')} [{finding.get('severity')}]{at}: {shown(finding.get('title'))}"


def status_of(findings: list[dict[str, Any]]) -> str:
    worst = max((STATUS_RANK[SEVERITY_STATUS.get(f.get("severity"), "ok")] for f in findings), default=0)
    return next(status for status, rank in STATUS_RANK.items() if rank == worst)


def compare_findings(before: list[dict], after: list[dict]) -> dict[str, list[str]]:
    """Diff lines per finding code (findings of one code are paired in order)."""
    lines: dict[str, list[str]] = collections.defaultdict(list)
    by_code_before, by_code_after = collections.defaultdict(list), collections.defaultdict(list)
    for finding in before:
        by_code_before[finding.get("code")].append(finding)
    for finding in after:
        by_code_after[finding.get("code")].append(finding)
    for code in sorted(set(by_code_before) | set(by_code_after), key=str):
        old, new = by_code_before[code], by_code_after[code]
        for index in range(max(len(old), len(new))):
            if index >= len(new):
                lines[code].append(f"- {headline(old[index])}")
            elif index >= len(old):
                lines[code].append(f"+ {headline(new[index])}")
            else:
                for field in FINDING_FIELDS:
                    if old[index].get(field) != new[index].get(field):
                        which = f"{code}#{index + 1}" if max(len(old), len(new)) > 1 else code
                        lines[code].append(
                            f"~ {which} {field}: {shown(old[index].get(field))} -> {shown(new[index].get(field))}"
                        )
    return lines


def compare_run(before: dict[str, Any], after: dict[str, Any], allow: set[str]) -> tuple[list[str], list[str]]:
    """(differences, allowed differences) of one run, as printable lines."""
    differences, allowed = [], []
    old_findings, new_findings = before.get("findings", []), after.get("findings", [])
    if before.get("status") != after.get("status"):
        line = f"status: {before.get('status')} -> {after.get('status')}"
        kept_old = [f for f in old_findings if f.get("code") not in allow]
        kept_new = [f for f in new_findings if f.get("code") not in allow]
        explained = (
            bool(allow)
            and status_of(old_findings) == before.get("status")
            and status_of(new_findings) == after.get("status")
            and status_of(kept_old) == status_of(kept_new)
        )
        (allowed if explained else differences).append(line)
    for field in RUN_FIELDS:
        if before.get(field) != after.get(field):
            differences.append(f"{field}: {shown(before.get(field))} -> {shown(after.get(field))}")
    for code, lines in compare_findings(old_findings, new_findings).items():
        (allowed if code in allow else differences).extend(lines)
    old_order = [f.get("code") for f in old_findings if f.get("code") not in allow]
    new_order = [f.get("code") for f in new_findings if f.get("code") not in allow]
    if old_order != new_order and sorted(map(str, old_order)) == sorted(map(str, new_order)):
        differences.append(f"finding order: {old_order} -> {new_order}")
    return differences, allowed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logdir")
    parser.add_argument("--before", required=True, help="git revision to compare against (e.g. HEAD)")
    parser.add_argument("--after", default=None, help="git revision to compare (default: the working tree)")
    parser.add_argument("--allow", action="append", default=[], metavar="CODE", help="ignore this finding code")
    parser.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = parser.parse_args(argv)
    allow = set(args.allow)
    logdir = os.path.abspath(args.logdir)
    try:
        repo = git(args.repo, "rev-parse", "--show-toplevel")
        with tempfile.TemporaryDirectory(prefix="same-diagnoses-") as tmp:
            before_dir, after_dir = os.path.join(tmp, "before"), os.path.join(tmp, "after")
            os.makedirs(before_dir)
            before_label = export(repo, args.before, before_dir)
            if args.after is None:
                after_dir, after_label = repo, "working tree"
            else:
                os.makedirs(after_dir)
                after_label = export(repo, args.after, after_dir)
            before = diagnose(before_dir, logdir, before_label)
            after = diagnose(after_dir, logdir, after_label)
    except CannotCompare as err:
        print(f"same_diagnoses: cannot compare: {err}", file=sys.stderr)
        return 2

    different = allowed_only = 0
    for run in sorted(set(before) | set(after)):
        if run not in after or run not in before:
            different += 1
            print(f"run {run}: only {'before' if run in before else 'after'}")
            continue
        differences, allowed = compare_run(before[run], after[run], allow)
        if differences:
            different += 1
            print(f"run {run}: differs")
        elif allowed:
            allowed_only += 1
            print(f"run {run}: differs in allowed findings only")
        for line in differences:
            print(f"  {line}")
        for line in allowed:
            print(f"  (allowed) {line}")
    runs = len(set(before) | set(after))
    same = runs - different - allowed_only
    allowed_note = f", {allowed_only} differ in allowed codes only ({', '.join(sorted(allow))})" if allow else ""
    verdict = "SAME" if different == 0 else "DIFFERENT"
    print(
        f"{verdict}: {runs} run(s) in {logdir}, {same} identical{allowed_note}, {different} different "
        f"(before: {before_label}, after: {after_label})"
    )
    return 0 if different == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
