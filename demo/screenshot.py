"""Saves the README's screenshot (docs/health-tab.png), one page per kind of problem
(docs/screenshots/RUN.png, and RUN-dark.png in dark mode) and the card of a run worse than its
baseline (docs/screenshots/worse-than-baseline.png): the Health tab over a demo logdir, in
headless Chromium, from the current build.

Usage: python demo/screenshot.py [LOGDIR]   (needs Debian's chromium and playwright;
       make LOGDIR first with python demo/make_demo_logs.py LOGDIR)
"""

from __future__ import annotations

import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from playwright.sync_api import sync_playwright
from tensorboard_process import get_json, running_tensorboard, wait_for

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
README_RUN = "nan_input"
WORSE_RUN = "lr_exponent_typo"  # compared with last_good_run by HealthCallback(baseline=...)
# One run per kind of evidence: per-layer gradients, memory + OOM attempts, a crash, a
# badly built pipeline, dead units, a stall; (run, also in dark mode).
PAGES = [
    ("nan_input", True),
    ("oom_retry", False),
    ("training_crash", True),
    ("input_bound", False),
    ("dead_relu", False),
    ("paused_input", False),
]


def _shoot(browser, url: str, run: str, path: str, dark: bool) -> None:
    page = browser.new_page(viewport={"width": 1440, "height": 1000}, color_scheme="dark" if dark else "light")
    page.goto(url + "/#trainhealth")
    frame = page.frame_locator("iframe").first
    frame.locator(f"[data-testid=run-item][data-run='{run}']").click()
    frame.locator(f"[data-testid=run-view][data-run='{run}'] [data-testid=finding-card]").first.wait_for()
    page.wait_for_timeout(800)  # charts draw on the next frame
    page.screenshot(path=path)
    page.close()
    print(f"wrote {os.path.relpath(path)}")


def _shoot_worse_card(browser, url: str, path: str) -> None:
    """The worse_than_baseline card: both runs' curves, the baseline's noise band, the parting line."""
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(url + "/#trainhealth")
    frame = page.frame_locator("iframe").first
    frame.locator(f"[data-testid=run-item][data-run='{WORSE_RUN}']").click()
    card = frame.locator("[data-testid=finding-card][data-code=worse_than_baseline]")
    card.locator("[data-testid=evidence-overlay] canvas").first.wait_for()
    page.wait_for_timeout(800)  # charts draw on the next frame
    card.screenshot(path=path)
    page.close()
    print(f"wrote {os.path.relpath(path)}")


def main(argv: list[str]) -> int:
    logdir = argv[1] if len(argv) > 1 else "demo_logs"
    docs = os.path.join(HERE, "..", "docs")
    os.makedirs(os.path.join(docs, "screenshots"), exist_ok=True)
    with running_tensorboard(logdir, load_fast=False) as url:

        def diagnosed() -> bool:
            runs = get_json(url + "/data/plugin/trainhealth/runs")["runs"]
            return bool(runs) and all(r["status"] != "pending" for r in runs)

        wait_for(diagnosed, timeout=300)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
            _shoot(browser, url, README_RUN, os.path.join(docs, "health-tab.png"), dark=False)
            for run, dark_too in PAGES:
                _shoot(browser, url, run, os.path.join(docs, "screenshots", f"{run}.png"), dark=False)
                if dark_too:
                    _shoot(browser, url, run, os.path.join(docs, "screenshots", f"{run}-dark.png"), dark=True)
            _shoot_worse_card(browser, url, os.path.join(docs, "screenshots", "worse-than-baseline.png"))
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
