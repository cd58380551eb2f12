"""The comparison controls as a newcomer's script finds them (issue 55): by role and label, not by
test id, and a "Compare all runs" table longer than the screen scrolls to its last row, which
opens. Real TensorBoard, headless Chromium; 40 runs: a trained base and tiny_lr
(compare_training.py) and copies of tiny_lr."""

from __future__ import annotations

import shutil

import pytest
from tensorboard_process import get_json, running_tensorboard, wait_for
from test_browser import CHROMIUM, CHROMIUM_ARGS, health_frame

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"),
]

COPIES = [f"tiny_lr_{i:02d}" for i in range(38)]
VIEWPORT = {"width": 1280, "height": 720}  # a laptop's screen


@pytest.fixture(scope="module")
def long_logdir(tmp_path_factory) -> str:
    from compare_training import write_runs

    root = tmp_path_factory.mktemp("browser_long_compare")
    write_runs(str(root), ("base", "tiny_lr"))
    for name in COPIES:
        shutil.copytree(root / "tiny_lr", root / name)
    return str(root)


@pytest.fixture(scope="module")
def page(long_logdir):
    with running_tensorboard(long_logdir, load_fast=False) as url:

        def diagnosed():
            runs = get_json(url + "/data/plugin/trainhealth/runs")["runs"]
            return len(runs) == 2 + len(COPIES) and all(r["status"] != "pending" for r in runs)

        assert wait_for(diagnosed)
        with playwright_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=VIEWPORT)
            page.console_errors = []
            page.on("pageerror", lambda err: page.console_errors.append(str(err)))
            page.goto(url + "/#trainhealth")
            yield page
            browser.close()


def test_a_long_compare_all_table_scrolls_to_its_last_row_which_opens(page):
    frame = health_frame(page)
    frame.get_by_role("button", name="Compare all runs").click()
    table = frame.get_by_role("table")
    table.wait_for()
    frame.get_by_label("Compare all runs with\u2026").select_option(label="base")
    rows = table.locator("tbody tr")
    wait_for(lambda: rows.count() == 1 + len(COPIES))
    last = rows.last
    assert last.bounding_box()["y"] > VIEWPORT["height"]  # below the first screen: the table must scroll
    last.scroll_into_view_if_needed()
    box = last.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"], box
    run = last.get_attribute("data-run")
    last.click()
    frame.locator(f"[data-testid=run-view][data-run={run}]").wait_for()
    assert page.console_errors == []


def test_the_compare_with_select_is_found_by_its_label_and_role(page):
    frame = health_frame(page)
    frame.get_by_role("listitem").filter(has_text="tiny_lr_00").first.click()
    by_label = frame.get_by_label("Compare with\u2026")
    by_role = frame.get_by_role("combobox", name="Compare with")
    for found in (by_label, by_role):
        found.wait_for()
        assert found.count() == 1
    by_role.select_option(label="base")
    frame.locator("[data-testid=compare-verdict][data-verdict=worse]").wait_for()
    assert page.console_errors == []
