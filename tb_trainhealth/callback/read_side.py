"""The read side's judgement, as the write side uses it: the rule engine's findings (mid-fit, at a
fit's end, for the preflight and a baseline comparison) and the run's plan in words.

Every use of the rules from `callback/` goes through here, and the rules are imported at the first
use, not with the callback: `import tb_trainhealth` loads no rule module until a fit is diagnosed
(`tests/test_import_layers.py` holds both). The comparison with a baseline is the read side's too;
`callback/baseline.py` is the one other module that reaches it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tb_trainhealth.findings import Finding
    from tb_trainhealth.signals import RunSignals


def diagnose(run: RunSignals, final: bool) -> list[Finding]:
    """The engine's findings for what the run recorded so far (final: training has ended)."""
    from tb_trainhealth import engine

    return engine.diagnose(run, final=final)


def plan_in_words(run: RunSignals, findings: list[Finding]) -> list[str]:
    """The run's plan as the terminal shows it (empty: nothing to do)."""
    from tb_trainhealth.advice.plan import build_plan, plan_lines

    return plan_lines(build_plan(run, findings))
