"""The tab names finding codes in one module, `frontend/src/codes.ts`: each there is a code the
package gives, and no other module spells a code itself (a renamed code is then one change the
suite checks, not a card that silently stops matching)."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

from tb_trainhealth.contract.codes import Code

SOURCES = Path(ROOT) / "frontend" / "src"
CODES = {code.value for code in Code}
LITERAL = re.compile(r"""["']([a-z][a-z0-9]*(?:_[a-z0-9]+)+)["']""")


def test_every_code_the_tab_names_is_one_the_package_gives():
    named = dict(re.findall(r'export const (\w+) = "([^"]+)";', (SOURCES / "codes.ts").read_text()))
    assert named and set(named.values()) <= CODES, set(named.values()) - CODES
    assert all(Code[name] == value for name, value in named.items())  # the enum's own names


def test_no_other_module_spells_a_code():
    spelled = {
        (path.name, literal)
        for path in SOURCES.glob("*.ts")
        if path.name != "codes.ts"
        for literal in LITERAL.findall(path.read_text())
        if literal in CODES
    }
    assert not spelled, sorted(spelled)
