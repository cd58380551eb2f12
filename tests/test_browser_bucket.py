"""The Health tab over a bucket whose store goes away while the tab shows its runs: TensorBoard's own
reloader stops at the first storage error and lists nothing new again, so the tab says the listing
fails, why, and what to do, above the runs it still shows. A real TensorBoard (without TensorFlow:
boto3 reads s3://) over moto on loopback, behind a proxy whose port is closed mid-session, in
Debian's Chromium."""

from __future__ import annotations

import subprocess
import sys

import pytest
from bucket_emulators import BUCKET, client_environment, environment, running_emulator, switchable_proxy
from conftest import ROOT
from tensorboard_process import get_json, running_tensorboard, wait_for
from test_browser import CHROMIUM, CHROMIUM_ARGS, health_frame

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.bucket,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"),
]


def test_the_tab_says_the_bucket_lists_no_more_above_the_runs_it_shows(tmp_path):
    script = f"import scenarios; scenarios.nan_input({str(tmp_path / 'run')!r})"
    train = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert train.returncode == 0, train.stderr[-2000:]
    with running_emulator("s3") as emulator, switchable_proxy(emulator.endpoint) as proxy:
        with environment(emulator.env):
            emulator.filesystem().put(str(tmp_path / "run"), f"{BUCKET}/logs/run1", recursive=True)
        logdir = f"s3://{BUCKET}/logs"
        with (
            environment(client_environment("s3", proxy.endpoint)),
            running_tensorboard(logdir, load_fast=False, without_tensorflow=True) as url,
        ):
            listed = lambda: [r["run"] for r in get_json(url + "/data/plugin/trainhealth/runs")["runs"]]  # noqa: E731
            assert wait_for(lambda: listed() == ["run1"])
            with playwright_api.sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(url + "/#trainhealth")
                frame = health_frame(page)
                banner = frame.locator("[data-testid=banner]")
                assert banner.is_hidden()
                proxy.down()
                refresh = frame.locator("[data-testid=refresh-button]")
                for _ in range(60):  # (the listing is asked again at most every 30 s)
                    if banner.is_visible():
                        break
                    refresh.click()
                    page.wait_for_timeout(2000)
                said = banner.text_content() or ""
                shown = frame.locator("[data-testid=run-list]").text_content() or ""
                browser.close()
    assert f"cannot list s3://{BUCKET}/logs any more" in said and "restart tensorboard" in said, said
    assert "does not answer" in said, said
    assert "run1" in shown  # the runs stay, as last read
