"""The Health tab in a real headless Chromium (Debian's), driven by Playwright, over a real TensorBoard."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import LOAD_DEPENDENT
from tensorboard_process import get_json, running_tensorboard, wait_for
from test_bad_logdirs import cut_copy
from test_parts_off import raise_moved
from test_parts_off import train as train_tiny
from test_step_axis import keras_only_nan_run

from tb_trainhealth.callback.step.step_probe import StepProbe
from tb_trainhealth.contract.vocab import RunStatus

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"),
]

XSS_RUN = "<img src=x onerror=alert(1)>"
EPOCHS_RUN = "plain_keras_nan"  # Keras' TensorBoard callback alone, per-epoch scalars only
OOM_RUN = "oom_retry"
# Findings backed by events rather than a series; series the top chart must show, by run.
EVENT_RUNS = ("training_crash", "input_bound", "dead_relu")
LEADS = {
    "nan_input": {"layer_grad_norm"},
    OOM_RUN: {"host_memory_mb"},
    "input_bound": {"input_wait_ms", "step_time_ms"},
    "dead_relu": {"layer_grad_norm"},
}
GARBAGE_RUN = "garbage_only"  # its one event file is not an event file
NAN_FROM_START_RUN = "poisoned_inputs"  # a NaN column in every batch: nothing finite from step 1
CUT_COPY_RUN = "cut_copy"  # a finished run's file copied without its last bytes, long after the fit
GRADIENTS_OFF_RUN = "gradients_off"  # the gradient probe turned off by a (simulated) moved internal
RUNS = 6 + len(EVENT_RUNS) + 5
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def nan_from_the_first_step(log_dir: str) -> None:
    import keras
    import numpy as np

    from tb_trainhealth import HealthCallback

    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).random((128, 8), dtype=np.float32)
    x[:, 3] = np.nan
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, np.arange(128) % 3, batch_size=32, epochs=1, verbose=0, callbacks=[HealthCallback(log_dir)])


@pytest.fixture(scope="module")
def browser_logdir(scenario_logdir, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("browser")
    for run in ("nan_input", "overfitting", "healthy_mlp", "loss_plateau", *EVENT_RUNS):
        shutil.copytree(os.path.join(scenario_logdir, run), root / run)
    shutil.copytree(os.path.join(scenario_logdir, "loss_plateau"), root / XSS_RUN)
    keras_only_nan_run(str(root / EPOCHS_RUN), update_freq="epoch")
    nan_from_the_first_step(str(root / NAN_FROM_START_RUN))
    (finished,) = (root / "loss_plateau").iterdir()
    cut_copy(finished, root / CUT_COPY_RUN, mtime=time.time() + 15 * 60)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StepProbe, "attach", classmethod(raise_moved))
        train_tiny(root / GRADIENTS_OFF_RUN)
    (root / GARBAGE_RUN).mkdir()
    (root / GARBAGE_RUN / "events.out.tfevents.1.host").write_bytes(b"this is not an event file\n" * 40)
    # A real OOM (capped address space, its own process), retried at smaller batches.
    oom_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oom_training.py")
    subprocess.run(
        [sys.executable, oom_script, str(root / OOM_RUN), "256"], check=True, capture_output=True, timeout=600
    )
    return str(root)


@pytest.fixture(scope="module")
def page(browser_logdir):
    with running_tensorboard(browser_logdir, load_fast=False) as url:

        def diagnosed():  # all runs, none still "pending"
            statuses = [r["status"] for r in get_json(url + "/data/plugin/trainhealth/runs")["runs"]]
            return len(statuses) == RUNS and "pending" not in statuses

        assert wait_for(diagnosed)
        with playwright_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
            page = context.new_page()
            page.dialogs = []
            page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
            page.console_errors = []
            page.on("console", lambda msg: msg.type == "error" and page.console_errors.append(msg.text))
            page.goto(url + "/#trainhealth")
            page.tb_url = url
            yield page
            browser.close()


def health_frame(page):
    frame = page.frame_locator("iframe").first
    frame.locator("[data-testid=run-list]").wait_for(timeout=30_000)
    return frame


def test_runs_are_listed_worst_first(page):
    frame = health_frame(page)
    items = frame.locator("[data-testid=run-item]")
    items.nth(5).wait_for()
    statuses = [items.nth(i).get_attribute("data-status") for i in range(items.count())]
    assert statuses == sorted(
        statuses, key=lambda status: RunStatus(status).rank
    )  # an unreadable run among the ok ones
    assert statuses[0] == "critical" and items.nth(0).get_attribute("data-run") == "nan_input"


def test_finding_card_with_chart_onset_marker_and_a_copyable_plan_step(page):
    frame = health_frame(page)
    frame.locator("[data-testid=run-item][data-run=nan_input]").click()
    card = frame.locator("[data-testid=finding-card][data-code=nonfinite]")
    card.wait_for()
    assert "step 38" in card.inner_text()
    chart = card.locator("[data-testid=evidence-chart]")
    chart.locator("canvas").first.wait_for()
    assert chart.get_attribute("data-onset-step") == "38"
    step = frame.locator("[data-testid=plan-step]").filter(has=frame.locator("pre", has_text="np.isfinite")).first
    step.locator("[data-testid=copy-button]").click()
    copied = ""
    for _ in range(40):  # the clipboard write is asynchronous: poll for it (up to 2 s)
        copied = page.evaluate("navigator.clipboard.readText()")
        if copied:
            break
        page.wait_for_timeout(50)
    assert copied == step.locator("pre").inner_text() and "np.isfinite" in copied
    frame.locator("[data-testid=lead-chart] canvas").first.wait_for()


@pytest.mark.parametrize("run", ["nan_input", "overfitting"])
def test_the_plan_comes_first_and_finding_cards_point_to_its_steps(page, run):
    """Issue 52: one plan per run, "What to do" above everything else on its page, the route's steps
    in order, each with its trial marker; the cards carry no fixes of their own, only "→ plan step N"."""
    answer = get_json(page.tb_url + "/data/plugin/trainhealth/findings?run=" + run)
    assert answer["plan"] and all("fixes" not in f for f in answer["findings"])
    view = show_run(health_frame(page), run)
    plan = view.locator("[data-testid=plan]")
    assert view.locator(".th-card").first.get_attribute("data-testid") == "plan"  # before compare, charts, cards
    assert "What to do" in plan.locator(".th-card-head").inner_text()
    steps = plan.locator("[data-testid=plan-step]")
    assert [steps.nth(i).locator("[data-testid=plan-text]").inner_text() for i in range(steps.count())] == [
        step["text"] for step in answer["plan"]
    ]
    for i, step in enumerate(answer["plan"]):
        shown = steps.nth(i)
        assert shown.get_attribute("data-step") == str(i + 1)
        marker = shown.locator("[data-testid=trial-marker]")
        if not (answer["plan_note"] or any(s["tried"] for s in answer["plan"])):
            assert marker.count() == 0  # nothing was tried on this run: "not tried" would say nothing
        elif step["tried"]:
            assert marker.inner_text().startswith("tried on your data: ")
        else:
            assert marker.inner_text() == "not tried"
        measured = shown.locator("[data-testid=plan-measured]")
        assert (measured.inner_text() if measured.count() else None) == step["measured"]
        if step["code"]:
            assert shown.locator("pre").inner_text().strip() == step["code"].strip()
            assert shown.locator("[data-testid=copy-button]").count() == 1
    cards = view.locator("[data-testid=finding-card]")
    assert cards.count() == len(answer["findings"])
    assert view.locator("[data-testid=finding-card] .th-fixes, [data-testid=finding-card] pre").count() == 0
    for i, finding in enumerate(answer["findings"]):
        card = cards.nth(i)
        assert card.get_attribute("data-code") == finding["code"]
        ref = card.locator("[data-testid=plan-ref]")
        if finding["plan_steps"]:
            word = "step " if len(finding["plan_steps"]) == 1 else "steps "
            assert ref.inner_text() == "\u2192 plan " + word + ", ".join(map(str, finding["plan_steps"]))
        else:
            assert ref.count() == 0
        note = card.locator("[data-testid=trial-note]")
        assert (note.inner_text() if note.count() else None) == finding["trial_note"]
    assert any(f["plan_steps"] for f in answer["findings"])


def test_a_run_with_only_epoch_data_says_epoch_everywhere(page):
    """Header, card and chart marker use the run's own axis: epochs, numbered as Keras prints them."""
    frame = health_frame(page)
    frame.locator(f"[data-testid=run-item][data-run={EPOCHS_RUN}]").click()
    assert "epoch 5" in frame.locator(f"[data-testid=run-item][data-run={EPOCHS_RUN}]").inner_text()
    card = frame.locator("[data-testid=finding-card][data-code=nonfinite]")
    card.wait_for()
    assert "last epoch 5" in frame.locator(".th-run-header").inner_text()
    text = card.inner_text()
    said = text.split("Evidence")[0].lower().replace("plan step", "").replace("steps", "")  # "-> plan step 1"
    assert "since epoch 3" in text and "step" not in said
    chart = card.locator("[data-testid=evidence-chart]")
    chart.locator("canvas").first.wait_for()
    assert chart.get_attribute("data-onset-step") == "3"


def test_a_run_nan_from_its_first_step_says_so_instead_of_an_empty_chart(page):
    """Issue 35, item 6: no bare "No finite values"; the step it starts at, and the NaN's origin."""
    view = show_run(health_frame(page), NAN_FROM_START_RUN)
    lead = view.locator("[data-testid=lead-chart]")
    lead.locator(".th-chart-empty").first.wait_for()
    empty = lead.locator(".th-chart-empty").first.inner_text()
    assert "NaN/Inf from the first recorded step (step 1)" in empty, empty
    card = view.locator("[data-testid=finding-card][data-code=nonfinite]")
    assert "input batch holds NaN/Inf" in card.inner_text()


def test_a_truncated_copy_says_so_as_a_note_not_as_an_error(page):
    """Issue 35, item 12: the note `diagnose` prints is on the run's page too."""
    frame = health_frame(page)
    frame.locator(f"[data-testid=run-item][data-run={CUT_COPY_RUN}]").click()
    view = frame.locator(f"[data-testid=run-view][data-run={CUT_COPY_RUN}]")
    view.locator("[data-testid=run-notes]").wait_for()
    assert "a truncated copy, not a live run" in view.locator("[data-testid=run-notes]").inner_text()
    assert view.locator("[data-testid=run-errors]").count() == 0
    assert "ended_abruptly" not in view.inner_text()


def test_a_part_turned_off_is_marked_on_the_run_page(page):
    """Issue 38, item 3: the tab says what the run lacks and why, above its charts."""
    view = show_run(health_frame(page), GRADIENTS_OFF_RUN)
    notice = view.locator("[data-testid=parts-off]")
    notice.wait_for()
    assert "gradient norms" in notice.inner_text() and "unavailable" in notice.inner_text()
    card = view.locator("[data-testid=finding-card][data-code=part_not_recorded]")
    assert "_trainable_variables" in card.inner_text()


def test_filter_narrows_the_run_list(page):
    frame = health_frame(page)
    frame.locator("[data-testid=run-filter]").fill("over")
    frame.locator("[data-testid=run-item]").first.wait_for()
    names = [
        frame.locator("[data-testid=run-item]").nth(i).get_attribute("data-run")
        for i in range(frame.locator("[data-testid=run-item]").count())
    ]
    assert names == ["overfitting"]
    frame.locator("[data-testid=run-filter]").fill("")


def test_html_in_a_run_name_renders_as_text(page):
    frame = health_frame(page)
    item = frame.locator("[data-testid=run-item]").filter(has_text=XSS_RUN)
    item.wait_for()
    item.click()
    assert frame.locator("img[src=x]").count() == 0
    assert page.dialogs == []


def test_screenshot_and_no_console_errors(page, tmp_path):
    frame = health_frame(page)
    frame.locator("[data-testid=run-item][data-run=overfitting]").click()
    frame.locator(
        "[data-testid=finding-card][data-code=overfitting] [data-testid=evidence-chart] canvas"
    ).first.wait_for()
    page.screenshot(path=str(tmp_path / "health-tab.png"))
    assert (tmp_path / "health-tab.png").stat().st_size > 10_000
    assert page.console_errors == []


def test_a_run_still_training_updates_without_a_page_reload(page, browser_logdir):
    """New data lands in a run (a crash event): the tab shows it after a poll, no page reload."""
    import json

    import numpy as np
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    from tb_trainhealth.contract import tags

    frame = health_frame(page)
    item = frame.locator("[data-testid=run-item][data-run=healthy_mlp]")
    assert item.get_attribute("data-status") == "ok"
    page.evaluate("window.__not_reloaded = true")
    crash = [
        {
            "kind": "crash",
            "step": 10_000,
            "phase": "training",
            "error_type": "NotFoundError",
            "message": "/data/part-7.csv; No such file or directory",
        }
    ]
    writer = EventFileWriter(os.path.join(browser_logdir, "healthy_mlp"))
    value = summary_pb2.Summary.Value(
        tag=tags.TAG_EVENTS,
        metadata=tags.record_metadata(),
        tensor=tensor_util.make_tensor_proto(np.array(json.dumps(crash).encode(), dtype=object)),
    )
    writer.add_event(event_pb2.Event(step=10_000, wall_time=1e9, summary=summary_pb2.Summary(value=[value])))
    writer.close()

    def updated():
        frame.locator("[data-testid=refresh-button]").click()
        page.wait_for_timeout(1000)
        return item.get_attribute("data-status") == "critical"

    assert wait_for(updated, timeout=60, interval=1)
    item.click()
    frame.locator("[data-testid=finding-card][data-code=training_crash]").wait_for()
    assert page.evaluate("window.__not_reloaded") is True


def show_run(frame, run: str):
    frame.locator(f"[data-testid=run-item][data-run='{run}']").click()
    view = frame.locator(f"[data-testid=run-view][data-run='{run}']")
    view.locator("[data-testid=finding-card]").first.wait_for()
    return view


@pytest.mark.parametrize("run", [OOM_RUN, *EVENT_RUNS])
def test_every_card_shows_its_evidence_and_whole_fixes(page, run):
    """OOM, crash, pipeline and dead-unit findings show their measured facts; no fix is clipped."""
    view = show_run(health_frame(page), run)
    cards = view.locator("[data-testid=finding-card]")
    for i in range(cards.count()):
        evidence = cards.nth(i).locator("[data-testid=evidence-chart]")
        text = evidence.inner_text()
        assert "not in this run's data" not in text and "No series to plot" not in text, text
        assert evidence.get_attribute("data-series") or int(evidence.get_attribute("data-facts")) > 0
    facts = view.locator("[data-testid=evidence-facts]")
    assert facts.count() >= 1 and facts.first.locator("tr").count() >= 1
    overflowing = view.evaluate(
        "v => Array.from(v.querySelectorAll('pre')).filter(p => p.scrollWidth > p.clientWidth).map(p => p.textContent)"
    )
    assert overflowing == []


@pytest.mark.parametrize("run", sorted(LEADS))
def test_top_chart_follows_the_worst_finding(page, run):
    view = show_run(health_frame(page), run)
    lead = view.locator("[data-testid=lead-chart]")
    lead.locator("canvas").first.wait_for()
    worst = view.locator("[data-testid=finding-card]").first.get_attribute("data-code")
    expected = LEADS["input_bound"] if worst in LOAD_DEPENDENT else LEADS[run]  # (a loaded machine starves input)
    assert expected <= set(lead.get_attribute("data-series").split(",")), worst


def test_timeline_lists_the_oom_retries_in_step_order(page):
    view = show_run(health_frame(page), OOM_RUN)
    entries = view.locator("[data-testid=timeline] li")
    kinds = [entries.nth(i).get_attribute("data-kind") for i in range(entries.count())]
    assert kinds.count("oom") >= 1
    steps = [int(entries.nth(i).locator(".th-timeline-step").inner_text().split()[-1]) for i in range(entries.count())]
    assert steps == sorted(steps)


def test_dark_mode_follows_tensorboard_and_the_system(page):
    """Opened with a dark system theme (TensorBoard turns dark too): the tab is dark, text light."""
    dark = page.context.browser.new_page(viewport={"width": 1400, "height": 1000}, color_scheme="dark")
    try:
        dark.goto(page.url)
        frame = health_frame(dark)
        view = show_run(frame, "nan_input")
        view.locator("[data-testid=lead-chart] canvas").first.wait_for()

        def luminance(css: str) -> float:
            r, g, b = (float(x) for x in css[css.index("(") + 1 : css.index(")")].split(",")[:3])
            return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255

        assert frame.locator("html").get_attribute("data-theme") == "dark"
        body = frame.locator("body").evaluate("b => getComputedStyle(b).backgroundColor")
        card = view.locator("[data-testid=finding-card]").first.evaluate("c => getComputedStyle(c).color")
        assert luminance(body) < 0.25 and luminance(card) > 0.6, (body, card)
        # TensorBoard's own toggle wins: its page turns light, the tab follows.
        dark.evaluate("document.body.classList.remove('dark-mode')")
        assert wait_for(lambda: frame.locator("html").get_attribute("data-theme") == "light", timeout=10)
    finally:
        dark.close()


def test_a_run_whose_files_cannot_be_read_is_listed_with_its_error(page):
    frame = health_frame(page)
    item = frame.locator(f"[data-testid=run-item][data-run={GARBAGE_RUN}]")
    item.wait_for()
    assert "unreadable" in item.inner_text().lower() and item.get_attribute("data-status") == "unreadable"
    badge = item.locator(".th-badge").first  # the word fits inside its pill
    assert badge.evaluate("b => b.scrollWidth <= b.clientWidth"), badge.evaluate("b => [b.scrollWidth, b.clientWidth]")
    item.click()
    errors = frame.locator(f"[data-testid=run-view][data-run={GARBAGE_RUN}] [data-testid=run-errors]")
    errors.wait_for()
    assert "events.out.tfevents.1.host" in errors.inner_text() and "unreadable" in errors.inner_text().lower()
    assert "unreadable" in frame.locator(".th-summary").inner_text()


@contextlib.contextmanager
def _empty_state(page, url: str):
    """The tab's empty state (no runs, or why none can be listed) on a second page of the module's
    browser (one Playwright per process), closed after."""
    other = page.context.new_page()
    try:
        other.goto(url + "/#trainhealth")
        empty = other.frame_locator("iframe").first.locator("[data-testid=empty-state]")
        empty.wait_for(timeout=30_000)
        yield empty
    finally:
        other.close()


def test_a_logdir_that_does_not_exist_is_said_not_no_runs(page, tmp_path):
    """TensorBoard started on a mistyped --logdir: the tab says the folder does not exist (issue 47),
    not "no training runs yet", which would send the user looking for a bug in training. (A second
    page of the module's browser: one Playwright per process.)"""
    missing = str(tmp_path / "no_such_logdir")
    with running_tensorboard(missing, load_fast=False) as url:
        assert "does not exist" in get_json(url + "/data/plugin/trainhealth/runs")["logdir_problem"]
        with _empty_state(page, url) as empty:
            assert empty.get_attribute("data-kind") == "no-logdir"
            assert empty.locator("h2").inner_text() == "The logdir does not exist"
            assert f"The logdir {missing} does not exist" in empty.inner_text()


def test_a_bucket_nothing_here_reads_is_headed_as_such_not_as_a_missing_folder(page):
    """TensorBoard without TensorFlow (as docs/object-storage.md has it) on a scheme nothing here reads:
    the heading says the bucket cannot be read, the route's sentence what to do; no local-folder advice."""
    bucket = "az://container/logs"
    with running_tensorboard(bucket, load_fast=False, without_tensorflow=True) as url:
        assert get_json(url + "/data/plugin/trainhealth/runs")["logdir_problem_kind"] == "bucket_unreadable"
        with _empty_state(page, url) as empty:
            assert empty.get_attribute("data-problem") == "bucket_unreadable"
            assert empty.locator("h2").inner_text() == "This TensorBoard cannot read the bucket"
            text = empty.inner_text()
            assert f"cannot reach {bucket}" in text and "does not exist" not in text and "--logdir logs" not in text
