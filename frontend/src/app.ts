// The tab's page: toolbar (summary, "Compare all runs", last update, Refresh), error banner, runs
// list and run view side by side (or the "Compare all runs" table in the run view's place). Wires
// them together: each poll updates the list, then keeps the selected run's view (or the table)
// current; a click in the list selects a run, a click on a row of the table opens its comparison.
import { fetchRuns, type LogdirProblem, type RunSummary } from "./api";
import { append, clear, h } from "./dom";
import { errorText } from "./format";
import { noRunsPage } from "./hints";
import { Poller } from "./polling";
import { CompareAllView } from "./compare_all";
import { RunList } from "./run_list";
import { RunView } from "./run_view";
import { store, stored, STORE_SELECTED, STORE_SHOWING_ALL } from "./storage";
import { followTheme } from "./theme";

export class App {
  private runs: RunSummary[] = [];
  private summaryText = "";
  private logdirProblem: LogdirProblem | null = null;
  private loaded = false;
  private selected: string | null = stored(STORE_SELECTED);
  private readonly runList = new RunList((run) => void this.select(run));
  private readonly runView = new RunView();
  private readonly compareAll = new CompareAllView((run, choice) => void this.openComparison(run, choice));
  private showingAll = stored(STORE_SHOWING_ALL) === "1";
  private readonly poller = new Poller(
    (force) => this.refresh(force),
    (busy) => {
      this.refreshButton.disabled = busy;
      this.refreshButton.textContent = busy ? "Refreshing..." : "Refresh";
    },
  );

  private readonly root = h("div", { class: "th-app" });
  private readonly summary = h("span", { class: "th-summary" });
  private readonly updated = h("span", { class: "th-updated", attrs: { "aria-live": "polite" } });
  private readonly refreshButton = h("button", {
    class: "th-button",
    testid: "refresh-button",
    text: "Refresh",
    title: "Reload runs and findings (also done every 30 s)",
    attrs: { type: "button" },
  });
  private readonly compareAllButton = h("button", {
    class: "th-button",
    testid: "compare-all-button",
    text: "Compare all runs",
    title: "Every run against one baseline (a run, or each run's best earlier run of its model), worst first",
    attrs: { type: "button" },
  });
  private readonly banner = h("div", { class: "th-banner", testid: "banner", attrs: { role: "alert", hidden: "" } });
  private readonly layout = h("div", { class: "th-layout" }, [this.runList.element, this.runView.element, this.compareAll.element]);

  private stopTheme: (() => void) | null = null;

  mount(): void {
    // Charts read their colours when drawn: a theme change redraws the run on screen.
    this.stopTheme = followTheme(() => void this.syncSelection(true));
    clear(document.body);
    document.body.classList.add("th-body");
    append(this.root, [
      h("header", { class: "th-toolbar" }, [
        h("span", { class: "th-title", text: "Training health" }),
        this.summary,
        this.compareAllButton,
        h("span", { class: "th-spacer" }),
        this.updated,
        this.refreshButton,
      ]),
      this.banner,
      this.layout,
    ]);
    document.body.appendChild(this.root);
    this.refreshButton.addEventListener("click", () => void this.poller.poll(true));
    this.compareAllButton.addEventListener("click", () => this.showAll(true));
    this.runView.message("Loading runs...");
    this.poller.start();
  }

  stop(): void {
    this.stopTheme?.();
    this.poller.stop();
    this.runView.reset();
  }

  /** One poll: reload the runs, then the selected run's view if it changed (or `force`). */
  private async refresh(force: boolean): Promise<boolean> {
    try {
      const { runs, summary, logdirProblem } = await fetchRuns();
      this.banner.hidden = true;
      this.banner.textContent = "";
      this.runs = runs;
      this.summaryText = summary;
      this.logdirProblem = logdirProblem;
      this.loaded = true;
      this.updated.textContent = "updated " + new Date().toLocaleTimeString();
      this.showRuns();
      await this.syncSelection(force);
      return runs.some((r) => r.status === "pending");
    } catch (err) {
      this.banner.textContent = "Could not load runs: " + errorText(err) + ". Retrying every 30 s; or press Refresh.";
      this.banner.hidden = false;
      if (!this.loaded) this.runView.message("No data yet.");
      return false;
    }
  }

  private showRuns(): void {
    const runs = this.runs;
    this.summary.textContent = runs.length === 0 ? "" : this.summaryText;
    this.runList.update(runs);
    this.runView.setRuns(runs.map((r) => r.run));
    this.compareAll.setRuns(runs.map((r) => r.run));
    if (runs.length === 0) {
      this.layout.hidden = true;
      this.runView.reset();
      const shown = this.root.querySelector(".th-empty-page");
      const kind = this.logdirProblem ? "no-logdir" : "no-runs";
      if (shown?.getAttribute("data-kind") !== kind || shown.getAttribute("data-problem") !== (this.logdirProblem?.kind ?? null)) {
        shown?.remove();
        this.root.appendChild(noRunsPage(this.logdirProblem));
      }
      return;
    }
    this.layout.hidden = false;
    this.root.querySelector(".th-empty-page")?.remove();
    if (this.logdirProblem) {
      // Runs shown, but the bucket lists no more (the server says why and what to do): said above them.
      this.banner.textContent = this.logdirProblem.text;
      this.banner.hidden = false;
    }
    this.runList.markSelected(this.showingAll ? null : this.selected);
  }

  private async syncSelection(force: boolean): Promise<void> {
    if (this.showingAll) {
      if (this.runs.length > 0) this.showAll(false);
      return;
    }
    if (this.selected === null || !this.runs.some((r) => r.run === this.selected)) {
      this.selected = this.runs[0]?.run ?? null;
      this.runList.markSelected(this.selected);
    }
    const run = this.runs.find((r) => r.run === this.selected);
    if (!run) return;
    if (force || !this.runView.isCurrent(run)) await this.runView.load(run.run, run, true);
  }

  /** Puts the "Compare all runs" table in the run view's place; `replace`: anew (else swapped in when fetched). */
  private showAll(replace: boolean): void {
    this.showingAll = true;
    store(STORE_SHOWING_ALL, "1");
    this.runView.element.hidden = true;
    this.compareAllButton.setAttribute("aria-pressed", "true");
    this.runList.markSelected(null);
    this.compareAll.show(replace);
  }

  private showRunView(): void {
    if (!this.showingAll) return;
    this.showingAll = false;
    store(STORE_SHOWING_ALL, "0");
    this.compareAll.hide();
    this.compareAllButton.setAttribute("aria-pressed", "false");
    this.runView.element.hidden = false;
  }

  /** A row of the table: the run's page, comparing it with `choice` (a "Compare with..." option). */
  private async openComparison(run: string, choice: string): Promise<void> {
    this.runView.compareWith(run, choice);
    await this.select(run, true);
  }

  private async select(run: string, reload = false): Promise<void> {
    const fromTable = this.showingAll;
    this.showRunView();
    if (run === this.selected && this.runView.shows(run) && !reload && !fromTable) return;
    this.selected = run;
    store(STORE_SELECTED, run);
    this.runList.markSelected(run);
    await this.runView.load(run, this.runs.find((r) => r.run === run), false);
  }
}
