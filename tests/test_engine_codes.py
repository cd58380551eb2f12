"""A rule gives only the codes its `RuleSpec` declares: under the test suite the engine fails at
once on any other (conftest sets TB_TRAINHEALTH_STRICT_CODES); for a user it keeps the finding and
the run says which rule is at fault."""

from __future__ import annotations

import pytest

from tb_trainhealth import engine
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
