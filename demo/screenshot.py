"""Saves docs/health-tab.png: the Health tab over a demo logdir, in headless Chromium.

Usage: python demo/screenshot.py [LOGDIR] [RUN]   (needs Debian's chromium and playwright)
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


def main(argv: list[str]) -> int:
    logdir = argv[1] if len(argv) > 1 else "demo_logs"
    run = argv[2] if len(argv) > 2 else "nan_input"
    out = os.path.join(HERE, "..", "docs", "health-tab.png")
    with running_tensorboard(logdir, load_fast=False) as url:
        wait_for(lambda: get_json(url + "/data/plugin/trainhealth/runs")["runs"])
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(url + "/#trainhealth")
            frame = page.frame_locator("iframe").first
            frame.locator(f"[data-testid=run-item][data-run='{run}']").click()
            frame.locator("[data-testid=finding-card] [data-testid=evidence-chart] canvas").first.wait_for()
            page.wait_for_timeout(500)
            page.screenshot(path=out)
            browser.close()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
