"""A rule gives only the codes its `RuleSpec` declares: under the test suite the engine fails at
once on any other (conftest sets TB_TRAINHEALTH_STRICT_CODES); for a user it keeps the finding and
the run says which rule is at fault. Every code is a member of `contract.codes.Code`, and no module
outside the contract spells one as a bare string."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

from tb_trainhealth import engine
from tb_trainhealth.contract.codes import Code
from tb_trainhealth.findings import Evidence, Finding, Severity
from tb_trainhealth.rules import RULES, RuleSpec
from tb_trainhealth.signals import RunSignals


def _gives_plateau(run: RunSignals) -> list[Finding]:
    return [Finding("loss_plateau", Severity.WARNING, 1, "t", "d", Evidence(("loss",)))]


def test_a_code_the_spec_does_not_declare_fails_the_suite_and_is_kept_but_named_for_a_user(monkeypatch):
    rule = RuleSpec(_gives_plateau, codes=("loss_divergence",))
    with pytest.raises(engine.UndeclaredCode, match=r"_gives_plateau gave code\(s\) loss_plateau"):
        engine.diagnose(RunSignals("r"), rules=(rule,))
    monkeypatch.delenv(engine.STRICT_CODES_VARIABLE)
    run = RunSignals("r")
    (kept,) = engine.diagnose(run, rules=(rule,))
    assert kept.code == "loss_plateau" and run.errors == [
        "rule _gives_plateau gave code(s) loss_plateau its spec does not declare"
    ]
    assert engine.diagnose(RunSignals("r"), rules=(RuleSpec(_gives_plateau, codes=("loss_plateau",)),))


def test_every_spec_declares_at_least_one_code():
    assert all(rule.codes for rule in RULES)


def test_every_code_a_rule_declares_is_one_of_the_contract():
    declared = {code for rule in RULES for code in rule.codes}
    assert all(isinstance(code, Code) for code in declared), [c for c in declared if not isinstance(c, Code)]
    assert declared == set(Code)  # (and no code in the contract that no rule gives)


def test_no_module_outside_the_contract_spells_a_code_as_a_string():
    """Renaming a code is one change in contract/codes.py that every use follows (docstrings and
    sentences may name codes: only a string that is exactly a code counts)."""
    values = {code.value for code in Code}
    package = Path(ROOT) / "tb_trainhealth"
    spelled = []
    for path in package.rglob("*.py"):
        if "contract" in path.relative_to(package).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in values:
                spelled.append(f"{path.relative_to(package)}:{node.lineno} {node.value!r}")
    assert not spelled, spelled
