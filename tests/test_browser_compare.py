"""The Health tab's comparison with a baseline run, in a real headless Chromium over a real
TensorBoard: real runs trained with HealthCallback (compare_training.py), the baseline picked in
the run page's "Compare with..." select."""

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

# A copy of the baseline under a name that is HTML; after "base" in name order, so "best" still picks "base".
XSS_RUN = "~<img src=x onerror=alert(1)>"
RUNS = ("base", "tiny_lr", "small_lr", XSS_RUN)


@pytest.fixture(scope="module")
def compare_logdir(tmp_path_factory) -> str:
    from compare_training import write_runs

    root = tmp_path_factory.mktemp("browser_compare")
    write_runs(str(root), ("base", "tiny_lr", "small_lr"))
    shutil.copytree(root / "base", root / XSS_RUN)
    return str(root)


@pytest.fixture(scope="module")
def page(compare_logdir):
    with running_tensorboard(compare_logdir, load_fast=False) as url:

        def diagnosed():
            runs = get_json(url + "/data/plugin/trainhealth/runs")["runs"]
            return sorted(r["run"] for r in runs) == sorted(RUNS) and all(r["status"] != "pending" for r in runs)

        assert wait_for(diagnosed)
        with playwright_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1400})
            page.dialogs = []
            page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
            page.console_errors = []
            page.on("console", lambda msg: msg.type == "error" and page.console_errors.append(msg.text))
            page.on("pageerror", lambda err: page.console_errors.append(str(err)))
            page.goto(url + "/#trainhealth")
            yield page
            browser.close()


def open_run(frame, run: str):
    frame.locator(f"[data-testid=run-item][data-run={run}]").click()
    view = frame.locator(f"[data-testid=run-view][data-run={run}]")
    view.locator("[data-testid=compare-select]").wait_for()
    return view


def test_picking_the_baseline_shows_worse_the_learning_rate_first_and_both_curves(page, tmp_path):
    view = open_run(health_frame(page), "tiny_lr")
    view.locator("[data-testid=compare-select]").select_option("run:base")
    verdict = view.locator("[data-testid=compare-verdict]")
    verdict.wait_for()
    assert verdict.get_attribute("data-verdict") == "worse" and verdict.inner_text().lower() == "worse"
    assert "than base" in view.locator("[data-testid=compare]").inner_text()
    assert "val_accuracy" in view.locator("[data-testid=compare-why]").inner_text()
    rows = view.locator("[data-testid=compare-changes] tbody tr")
    assert rows.first.get_attribute("data-setting") == "learning_rate"
    assert [rows.first.locator("td").nth(i).inner_text() for i in (0, 1)] == ["0.003", "3e-6"]
    settings = [rows.nth(i).get_attribute("data-setting") for i in range(rows.count())]
    assert "EarlyStopping.patience" in settings[1:]  # changed too; sorts before learning_rate by name
    assert "learning_rate=0.003" in view.locator("[data-testid=compare] pre").first.inner_text()  # the fix
    chart = view.locator("[data-testid=compare] [data-testid=compare-chart]")
    chart.locator("canvas").first.wait_for()
    assert chart.locator("canvas").count() >= 3  # loss, validation loss, validation accuracy
    assert int(chart.get_attribute("data-parted-at")) > 0
    legend = chart.locator(".u-legend").first.inner_text()
    assert "run tiny_lr" in legend and "baseline base" in legend
    ratios = view.locator("[data-testid=compare-grad-ratio] li")
    assert ratios.count() == 2 and "\u00d7" in ratios.first.inner_text()
    metrics = view.locator("[data-testid=compare-metrics] tr[data-metric=val_accuracy]")
    assert float(metrics.locator("td").nth(1).inner_text()) < float(metrics.locator("td").nth(0).inner_text())
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    assert (tmp_path / "compare.png").stat().st_size > 10_000
    assert page.console_errors == []


def test_the_health_signals_that_moved_are_listed_under_the_settings_and_nothing_when_none_did(page):
    """tiny_lr's 1000x smaller rate left its layers' update ratios orders of magnitude below base's:
    the compare section lists the route's sentences, each naming its layer; a copy of base moved none."""
    frame = health_frame(page)
    view = open_run(frame, "tiny_lr")
    view.locator("[data-testid=compare-select]").select_option("run:base")
    moved = get_json(page.url.split("#")[0] + "data/plugin/trainhealth/compare?run=tiny_lr&baseline=base")
    assert moved["signal_changes"], moved["signal_changes"]  # the pair this test needs
    items = view.locator("[data-testid=compare] [data-testid=compare-signals] li")
    items.first.wait_for()
    assert [items.nth(i).inner_text() for i in range(items.count())] == [c["text"] for c in moved["signal_changes"]]
    for i, change in enumerate(moved["signal_changes"]):
        assert items.nth(i).inner_text().startswith(change["layer"] + ": ")
        assert items.nth(i).get_attribute("data-layer") == change["layer"]
    heading = view.locator("[data-testid=compare] .th-compare-table").first.inner_text()
    assert heading.index("Changed settings") < heading.index("Health signals that moved beyond what seeds move them")
    same = open_run(frame, "base")
    same.locator("[data-testid=compare-select]").select_option(label=XSS_RUN)
    same.locator("[data-testid=compare-verdict]").wait_for()
    assert same.locator("[data-testid=compare-signals]").count() == 0
    assert "Health signals" not in same.locator("[data-testid=compare]").inner_text()
    same.locator("[data-testid=compare-select]").select_option("")  # remembered per run: leave base unchosen
    assert page.console_errors == []


def share_of_color(canvas, css_var: str, tolerance: int = 0) -> float:
    """The share of the canvas' pixels within `tolerance` of the colour of `css_var` (style.css)."""
    return canvas.evaluate(
        """(c, [name, tol]) => {
            const probe = document.createElement("canvas").getContext("2d");
            probe.fillStyle = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
            probe.fillRect(0, 0, 1, 1);
            const [r, g, b] = probe.getImageData(0, 0, 1, 1).data;
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4)
                if (Math.abs(d[i] - r) <= tol && Math.abs(d[i + 1] - g) <= tol && Math.abs(d[i + 2] - b) <= tol) n++;
            return n / (d.length / 4);
        }""",
        [css_var, tolerance],
    )


def drawn_overlay(chart, run: str, baseline: str, panels: list[str], parted_at: int) -> None:
    """Both runs' curves in each panel (the legend names them), the baseline's noise band shaded
    (pixels of its colour) and said, and the parting line (pixels of its colour, and its step)."""
    chart.locator("canvas").first.wait_for()
    assert chart.get_attribute("data-parted-at") == str(parted_at)
    boxes = chart.locator(".th-chart")
    assert [boxes.nth(i).get_attribute("data-series") for i in range(boxes.count())] == panels
    for i in range(boxes.count()):
        box = boxes.nth(i)
        legend = box.locator(".u-legend").inner_text()
        assert f"run {run}" in legend and f"baseline {baseline}" in legend
        canvas = box.locator("canvas").first
        assert box.get_attribute("data-band") == "1" and share_of_color(canvas, "--th-noise-band") > 0.03
        assert share_of_color(canvas, "--th-critical", tolerance=40) > 0.0001  # the dashed "parted" line
    notes = chart.locator("[data-testid=noise-band]")
    assert notes.count() == len(panels) and "two seeds" in notes.first.inner_text()


def test_the_worse_card_and_the_comparison_draw_both_runs_the_band_and_the_parting_line(page):
    """tiny_lr was compared with base at the end of its fit: the worse_than_baseline card, the first a
    reader sees, overlays both runs' training loss and the validation accuracy that decided, on the
    baseline's noise band, with the parting line where the compare route puts it; the comparison too."""
    view = open_run(health_frame(page), "tiny_lr")
    view.locator("[data-testid=compare-select]").select_option("")
    answer = get_json(page.url.split("#")[0] + "data/plugin/trainhealth/compare?run=tiny_lr&baseline=base")
    parted = answer["curves"]["parted_at"]
    assert isinstance(parted, int)
    card = view.locator("[data-testid=finding-card][data-code=worse_than_baseline]")
    overlay = card.locator("[data-testid=evidence-overlay]")
    assert overlay.get_attribute("data-baseline") == "base"
    drawn_overlay(
        overlay.locator("[data-testid=compare-chart]"), "tiny_lr", "base", ["loss", "epoch_val_accuracy"], parted
    )
    view.locator("[data-testid=compare-select]").select_option("run:base")
    section = view.locator("[data-testid=compare] [data-testid=compare-chart]")
    drawn_overlay(section, "tiny_lr", "base", ["loss", "epoch_val_accuracy", "epoch_val_loss"], parted)
    assert page.console_errors == []


def test_a_worse_lead_draws_both_runs_at_the_top_as_its_card_does(page):
    """small_lr's lead finding is worse_than_baseline: the chart at the top of its page draws what the
    card draws (both runs, the band, the parting line), not only this run's loss."""
    view = open_run(health_frame(page), "small_lr")
    answer = get_json(page.url.split("#")[0] + "data/plugin/trainhealth/compare?run=small_lr&baseline=base")
    lead = view.locator("[data-testid=lead-chart]")
    assert lead.get_attribute("data-code") == "worse_than_baseline" and lead.get_attribute("data-baseline") == "base"
    assert "against its baseline base" in lead.locator(".th-card-title").inner_text()
    chart = lead.locator("[data-testid=compare-chart]")
    drawn_overlay(chart, "small_lr", "base", answer["curves"]["evidence"], answer["curves"]["parted_at"])
    card = view.locator("[data-testid=finding-card][data-code=worse_than_baseline] [data-testid=compare-chart]")
    drawn_overlay(card, "small_lr", "base", answer["curves"]["evidence"], answer["curves"]["parted_at"])
    assert page.console_errors == []


def test_the_choice_is_remembered_per_run_across_reloads(page):
    frame = health_frame(page)
    view = open_run(frame, "tiny_lr")
    view.locator("[data-testid=compare-select]").select_option("run:base")
    view.locator("[data-testid=compare-verdict]").wait_for()
    other = open_run(frame, "base")
    assert other.locator("[data-testid=compare-select]").input_value() == ""  # not chosen for this run
    assert other.locator("[data-testid=compare-verdict]").count() == 0
    page.reload()
    view = open_run(health_frame(page), "tiny_lr")
    assert view.locator("[data-testid=compare-select]").input_value() == "run:base"
    view.locator("[data-testid=compare-verdict][data-verdict=worse]").wait_for()
    assert page.console_errors == []


def test_best_earlier_run_picks_the_baseline_and_says_when_there_is_none(page):
    frame = health_frame(page)
    view = open_run(frame, "tiny_lr")
    view.locator("[data-testid=compare-select]").select_option("@best")
    view.locator("[data-testid=compare-verdict][data-verdict=worse]").wait_for()
    text = view.locator("[data-testid=compare]").inner_text()
    assert "than base" in text and "best earlier run of this model" in text
    first = open_run(frame, "base")
    first.locator("[data-testid=compare-select]").select_option("@best")
    none = first.locator("[data-testid=compare-none]")
    none.wait_for()
    assert "no earlier run of the same model" in none.inner_text()
    assert page.console_errors == []


def test_a_baseline_named_like_html_renders_as_text(page):
    view = open_run(health_frame(page), "tiny_lr")
    select = view.locator("[data-testid=compare-select]")
    select.select_option(label=XSS_RUN)
    view.locator("[data-testid=compare-verdict]").wait_for()
    assert ("than " + XSS_RUN) in view.locator("[data-testid=compare]").inner_text()
    assert health_frame(page).locator("img[src=x]").count() == 0 and page.dialogs == []
    assert page.console_errors == []


def test_compare_all_runs_shows_the_routes_rows_worst_first_and_a_click_opens_one(page):
    """The "Compare all runs" table: the compare_all route's rows in its order (the worse runs first), its
    words as text (a run named like HTML too); a click on a row opens that run's comparison with its baseline."""
    frame = health_frame(page)
    frame.locator("[data-testid=compare-all-button]").click()
    table = frame.locator("[data-testid=compare-all]")
    for option, baseline in (("run:base", "base"), ("@best", "best")):
        table.locator("[data-testid=compare-all-baseline]").select_option(option)
        table.locator("[data-testid=compare-all-table]").wait_for()
        expected = get_json(page.url.split("#")[0] + "data/plugin/trainhealth/compare_all?baseline=" + baseline)
        expected = expected["comparisons"]
        rows = table.locator("[data-testid=compare-all-table] tbody tr")
        assert [rows.nth(i).get_attribute("data-run") for i in range(rows.count())] == [c["run"] for c in expected]
        assert [rows.nth(i).get_attribute("data-verdict") for i in range(rows.count())] == [
            c["verdict"] for c in expected
        ]
        assert [c["run"] for c in expected[:2]] == ["tiny_lr", "small_lr"] and expected[0]["verdict"] == "worse"
        for i, c in enumerate(expected):
            cells = rows.nth(i).locator("td, th")
            assert cells.nth(0).inner_text().lower() == c["verdict"] and cells.nth(1).inner_text() == c["run"]
            assert cells.nth(2).text_content() == (c["baseline"] or "\u2014") + c["baseline_choice"]["rule"]
            assert cells.nth(2).get_attribute("title") == c["baseline_choice"]["why"]
            assert cells.nth(3).text_content() == cells.nth(3).get_attribute("title") == c["why"]
            assert cells.nth(4).text_content() == (c["likely_cause"] or "")
        if baseline == "base":
            assert "base" not in [c["run"] for c in expected]  # not against itself
    assert XSS_RUN in [c["run"] for c in expected]
    assert frame.locator("img[src=x]").count() == 0 and page.dialogs == []
    rows.first.click()  # tiny_lr, worse than base
    view = frame.locator("[data-testid=run-view][data-run=tiny_lr]")
    view.locator("[data-testid=compare-verdict][data-verdict=worse]").wait_for()
    assert table.is_hidden() and "than " + expected[0]["baseline"] in view.locator("[data-testid=compare]").inner_text()
    assert view.locator("[data-testid=compare-select]").input_value() == "run:" + expected[0]["baseline"]
    view.locator("[data-testid=compare-select]").select_option("")  # remembered per run: leave tiny_lr unchosen
    assert page.console_errors == []
