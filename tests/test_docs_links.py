"""README and the pages under docs/ link to each other and to files of the repository: every relative
link (and image) points at a file or folder that exists, every `#anchor` at a heading of the page it
names, and every page under docs/ is linked from README or from the docs index, so a page moved or
renamed, or a heading reworded, cannot leave a dead link behind."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import ROOT

ROOT_PATH = Path(ROOT)
PAGES = [ROOT_PATH / "README.md", *sorted((ROOT_PATH / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, ...


def prose(text: str) -> str:
    """`text` without its fenced code blocks."""
    return re.sub(r"^```.*?^```[ \t]*$", "", text, flags=re.S | re.M)


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text()))


def anchors(page: Path) -> set[str]:
    """The `#anchors` GitHub gives the headings of `page` (a repeated heading gets -1, -2, ...)."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", prose(page.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def broken(page: Path) -> list[str]:
    problems = []
    for target in links(page):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / unquote(path)).resolve() if path else page
        if not resolved.exists():
            problems.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: no heading #{anchor} there")
    return problems


def test_there_are_pages_and_links_to_check():
    assert len(PAGES) > 1
    assert sum(len(links(page)) for page in PAGES) > len(PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT_PATH)))
def test_every_relative_link_resolves(page):
    assert broken(page) == []


def test_every_docs_page_is_linked_from_readme_or_the_docs_index():
    index_pages = [ROOT_PATH / "README.md", ROOT_PATH / "docs" / "README.md"]
    linked = {
        (page.parent / unquote(target.partition("#")[0])).resolve()
        for page in index_pages
        for target in links(page)
        if not EXTERNAL.match(target) and target.partition("#")[0]
    }
    orphans = [str(p.relative_to(ROOT_PATH)) for p in PAGES if p.resolve() not in linked and p not in index_pages]
    assert orphans == []


def test_a_dead_link_and_a_dead_anchor_are_caught(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\n## A section: here\n")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md) [ok](a.md#a-section-here) [ok](#b) [x](https://example.com/none)\n"
        "[gone](missing.md) [no heading](a.md#nowhere) ![img](gone.png)\n\n## B\n\n```\n[in code](ignored.md)\n```\n"
    )
    assert broken(page) == [
        "missing.md: no such file",
        "a.md#nowhere: no heading #nowhere there",
        "gone.png: no such file",
    ]
