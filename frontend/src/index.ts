// The "Health" tab. TensorBoard loads this ES module into an iframe whose <base href> is
// the plugin's route prefix and calls render().
import uplotCss from "uplot/dist/uPlot.min.css";
import appCss from "./style.css";
import {
  ApiError,
  fetchFindings,
  fetchRuns,
  fetchSeries,
  type Finding,
  type RunFindings,
  type RunSummary,
  type SeriesData,
  type Severity,
  type Status,
} from "./api";
import { depthColor, mountPanel, scalarColor, type ChartHandle, type Line, type PanelSpec } from "./charts";
import { append, clear, codeBlock, fmtStep, h } from "./dom";

const POLL_MS = 30_000;
const PENDING_POLL_MS = 2_000; // while the server is still diagnosing some runs
const POINTS = 500;
const LAYER_GRAD = "layer_grad_norm";
const SNIPPET = 'from tb_trainhealth import HealthCallback\nmodel.fit(..., callbacks=[HealthCallback(log_dir="logs/run1")])';
const STORE_SELECTED = "tb-trainhealth.selected";
const STORE_FILTER = "tb-trainhealth.filter";

export const SEVERITY_COLOR: Record<Severity | Status, string> = {
  critical: "#c62828",
  warning: "#ef6c00",
  ok: "#2e7d32",
  info: "#757575",
  pending: "#9e9e9e",
};

function stored(key: string): string | null {
  try {
    return window.sessionStorage.getItem(key);
  } catch {
    return null;
  }
}

function store(key: string, value: string): void {
  try {
    window.sessionStorage.setItem(key, value);
  } catch {
    // storage unavailable (sandboxed iframe, private mode): selection just isn't remembered
  }
}

function errorText(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  return err instanceof Error ? err.message : String(err);
}

function plural(n: number, word: string): string {
  return n + " " + word + (n === 1 ? "" : "s");
}

function badge(level: Severity | Status, extraClass = ""): HTMLElement {
  return h("span", { class: "th-badge th-badge-" + level + (extraClass ? " " + extraClass : ""), text: level });
}

function runKey(r: RunSummary): string {
  return [r.status, r.last_step, r.counts.critical, r.counts.warning, r.counts.info, r.has_health_data, r.errors.join("\n")].join("|");
}

function totalFindings(r: RunSummary): number {
  return r.counts.critical + r.counts.warning + r.counts.info;
}

class App {
  private runs: RunSummary[] = [];
  private loaded = false;
  private selected: string | null = stored(STORE_SELECTED);
  private filter = stored(STORE_FILTER) ?? "";
  private shownKey: string | null = null; // runKey of the run view on screen
  private shownRun: string | null = null;
  private charts: ChartHandle[] = [];
  private viewToken = 0;
  private polling = false;
  private timer: number | undefined;
  private items = new Map<string, HTMLElement>();

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
  private readonly banner = h("div", { class: "th-banner", attrs: { role: "alert", hidden: "" } });
  private readonly filterInput = h("input", {
    class: "th-filter",
    testid: "run-filter",
    attrs: { type: "search", placeholder: "Filter runs", "aria-label": "Filter runs by name", spellcheck: "false", autocomplete: "off" },
  });
  private readonly list = h("ul", { class: "th-run-list", testid: "run-list", attrs: { "aria-label": "Runs, worst first" } });
  private readonly noMatch = h("div", { class: "th-nomatch", text: "No runs match the filter.", attrs: { hidden: "" } });
  private readonly sidebar = h("aside", { class: "th-sidebar" }, [
    h("div", { class: "th-sidebar-head" }, [this.filterInput]),
    this.list,
    this.noMatch,
  ]);
  private readonly main = h("main", { class: "th-main" });
  private readonly layout = h("div", { class: "th-layout" }, [this.sidebar, this.main]);

  mount(): void {
    clear(document.body);
    document.body.classList.add("th-body");
    append(this.root, [
      h("header", { class: "th-toolbar" }, [
        h("span", { class: "th-title", text: "Training health" }),
        this.summary,
        h("span", { class: "th-spacer" }),
        this.updated,
        this.refreshButton,
      ]),
      this.banner,
      this.layout,
    ]);
    document.body.appendChild(this.root);
    this.filterInput.value = this.filter;
    this.filterInput.addEventListener("input", () => {
      this.filter = this.filterInput.value;
      store(STORE_FILTER, this.filter);
      this.applyFilter();
    });
    this.refreshButton.addEventListener("click", () => void this.poll(true));
    this.list.addEventListener("keydown", (ev) => this.onListKey(ev));
    this.main.appendChild(h("div", { class: "th-loading", text: "Loading runs..." }));
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") void this.poll(false);
    });
    this.timer = window.setInterval(() => {
      if (document.visibilityState !== "hidden") void this.poll(false);
    }, POLL_MS);
    void this.poll(false);
  }

  // ---- polling ----------------------------------------------------------------------
  private async poll(force: boolean): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    this.refreshButton.disabled = true;
    this.refreshButton.textContent = "Refreshing...";
    try {
      const runs = await fetchRuns();
      this.hideBanner();
      this.runs = runs;
      this.loaded = true;
      this.updated.textContent = "updated " + new Date().toLocaleTimeString();
      this.renderRuns();
      await this.syncSelection(force);
      if (runs.some((r) => r.status === "pending")) {
        window.setTimeout(() => {
          if (document.visibilityState !== "hidden") void this.poll(false);
        }, PENDING_POLL_MS);
      }
    } catch (err) {
      this.showBanner("Could not load runs: " + errorText(err) + ". Retrying every 30 s; or press Refresh.");
      if (!this.loaded) {
        clear(this.main);
        this.main.appendChild(h("div", { class: "th-loading", text: "No data yet." }));
      }
    } finally {
      this.polling = false;
      this.refreshButton.disabled = false;
      this.refreshButton.textContent = "Refresh";
    }
  }

  private showBanner(text: string): void {
    this.banner.textContent = text;
    this.banner.hidden = false;
  }

  private hideBanner(): void {
    this.banner.hidden = true;
    this.banner.textContent = "";
  }

  // ---- runs list ----------------------------------------------------------------------
  private renderRuns(): void {
    const runs = this.runs;
    const n = { critical: 0, warning: 0, ok: 0, pending: 0 };
    for (const r of runs) n[r.status] += 1;
    this.summary.textContent =
      runs.length === 0
        ? ""
        : plural(runs.length, "run") +
          ": " + n.critical + " critical, " + n.warning + " warning, " + n.ok + " ok" +
          (n.pending ? ", " + n.pending + " still being diagnosed" : "");

    if (runs.length === 0) {
      this.layout.hidden = true;
      this.showEmpty();
      return;
    }
    this.layout.hidden = false;
    this.root.querySelector(".th-empty-page")?.remove();

    const seen = new Set<string>();
    for (const r of runs) {
      seen.add(r.run);
      let li = this.items.get(r.run);
      if (!li) {
        li = this.makeItem(r.run);
        this.items.set(r.run, li);
      }
      this.fillItem(li, r);
    }
    for (const [name, li] of this.items) {
      if (!seen.has(name)) {
        li.remove();
        this.items.delete(name);
      }
    }
    this.applyFilter();
    this.markSelected();
  }

  private makeItem(run: string): HTMLElement {
    const button = h("button", {
      class: "th-run",
      testid: "run-item",
      data: { run },
      attrs: { type: "button" },
    });
    button.addEventListener("click", () => {
      void this.select(run);
    });
    return h("li", { class: "th-run-li" }, [button]);
  }

  private fillItem(li: HTMLElement, r: RunSummary): void {
    const button = li.firstElementChild as HTMLButtonElement;
    button.setAttribute("data-status", r.status);
    const total = totalFindings(r);
    const parts: string[] = [];
    if (r.counts.critical) parts.push(r.counts.critical + " critical");
    if (r.counts.warning) parts.push(r.counts.warning + " warning");
    if (r.counts.info) parts.push(r.counts.info + " info");
    button.title = r.run + "\n" + (r.status === "pending" ? "being diagnosed" : parts.length ? parts.join(", ") : "no findings");
    const meta: string[] = [];
    if (r.last_step !== null) meta.push("step " + fmtStep(r.last_step));
    if (!r.has_health_data && r.status !== "pending") meta.push("no HealthCallback");
    if (r.errors.length) meta.push(plural(r.errors.length, "error"));
    clear(button);
    append(button, [
      badge(r.status, "th-badge-small"),
      h("span", { class: "th-run-text" }, [
        h("span", { class: "th-run-name", text: r.run }),
        h("span", { class: "th-run-meta", text: meta.join(" \u00b7 ") }),
      ]),
      h("span", {
        class: "th-count" + (total === 0 ? " th-count-zero" : ""),
        text: String(total),
        title: plural(total, "finding"),
        attrs: { "aria-label": plural(total, "finding") },
      }),
    ]);
  }

  /** Shows the matching runs in server order; the others are detached, not just hidden. */
  private applyFilter(): void {
    const q = this.filter.trim().toLowerCase();
    const shown = this.runs
      .map((r) => this.items.get(r.run))
      .filter((li, i): li is HTMLElement => li !== undefined && (q === "" || (this.runs[i]?.run ?? "").toLowerCase().includes(q)));
    const keep = new Set(shown);
    for (const child of Array.from(this.list.children)) if (!keep.has(child as HTMLElement)) child.remove();
    shown.forEach((li, i) => {
      if (this.list.children[i] !== li) this.list.insertBefore(li, this.list.children[i] ?? null);
    });
    this.noMatch.hidden = shown.length > 0 || this.items.size === 0;
  }

  private markSelected(): void {
    for (const [name, li] of this.items) {
      const button = li.firstElementChild as HTMLElement;
      const on = name === this.selected;
      button.classList.toggle("th-selected", on);
      button.setAttribute("aria-current", on ? "true" : "false");
    }
  }

  private onListKey(ev: KeyboardEvent): void {
    if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp") return;
    const buttons = Array.from(this.list.querySelectorAll<HTMLButtonElement>("li > button"));
    const i = buttons.findIndex((b) => b === document.activeElement);
    if (i < 0) return;
    const next = buttons[ev.key === "ArrowDown" ? i + 1 : i - 1];
    if (next) {
      ev.preventDefault();
      next.focus();
      next.click();
    }
  }

  // ---- selection and run view ---------------------------------------------------------
  private async syncSelection(force: boolean): Promise<void> {
    const names = new Set(this.runs.map((r) => r.run));
    if (this.selected === null || !names.has(this.selected)) {
      this.selected = this.runs[0]?.run ?? null;
      this.markSelected();
    }
    const run = this.runs.find((r) => r.run === this.selected);
    if (!run) return;
    if (force || this.shownRun !== run.run || this.shownKey !== runKey(run)) await this.loadRun(run.run, true);
  }

  private async select(run: string): Promise<void> {
    if (run === this.selected && this.shownRun === run) return;
    this.selected = run;
    store(STORE_SELECTED, run);
    this.markSelected();
    await this.loadRun(run, false);
  }

  private async loadRun(run: string, keepScroll: boolean): Promise<void> {
    const token = ++this.viewToken;
    const summary = this.runs.find((r) => r.run === run);
    if (!keepScroll || this.shownRun !== run) {
      this.destroyCharts();
      clear(this.main);
      this.main.scrollTop = 0;
      this.main.appendChild(h("div", { class: "th-loading", text: "Loading findings for " + run + "..." }));
      this.shownRun = null;
    }
    let findings: RunFindings;
    let series: SeriesData | null = null;
    let seriesError: string | null = null;
    try {
      findings = await fetchFindings(run);
    } catch (err) {
      if (token !== this.viewToken) return;
      this.destroyCharts();
      clear(this.main);
      this.main.appendChild(h("div", { class: "th-notice th-notice-error", text: "Could not load findings for " + run + ": " + errorText(err) }));
      this.shownRun = run;
      this.shownKey = null;
      return;
    }
    const names = this.seriesToFetch(findings);
    if (names.length > 0) {
      try {
        series = await fetchSeries(run, names, POINTS);
      } catch (err) {
        seriesError = errorText(err);
      }
    }
    if (token !== this.viewToken) return;
    const scroll = this.main.scrollTop;
    this.destroyCharts();
    const view = this.buildRunView(findings, summary);
    clear(this.main);
    this.main.appendChild(view.element);
    for (const mountChart of view.mounts) mountChart(series, seriesError);
    this.main.scrollTop = keepScroll ? scroll : 0;
    this.shownRun = run;
    this.shownKey = summary ? runKey(summary) : null;
  }

  private seriesToFetch(f: RunFindings): string[] {
    const available = new Set(f.series);
    const names = new Set<string>();
    if (available.has(LAYER_GRAD)) names.add(LAYER_GRAD);
    for (const finding of f.findings) for (const s of finding.evidence.series) if (available.has(s)) names.add(s);
    return Array.from(names);
  }

  private destroyCharts(): void {
    for (const c of this.charts) c.destroy();
    this.charts = [];
  }

  private showEmpty(): void {
    this.destroyCharts();
    this.shownRun = null;
    this.shownKey = null;
    if (this.root.querySelector(".th-empty-page")) return;
    this.root.appendChild(
      h("section", { class: "th-empty-page th-empty", testid: "empty-state", data: { kind: "no-runs" } }, [
        h("h2", { text: "No training runs yet" }),
        h("p", {
          text: "This logdir has no runs. Add the callback to your training script; findings appear here while it trains (this page checks every 30 s):",
        }),
        codeBlock(SNIPPET, "Copy the HealthCallback snippet"),
        h("p", { class: "th-muted", text: "Runs logged only with keras.callbacks.TensorBoard get loss-curve checks too." }),
      ]),
    );
  }

  private buildRunView(
    f: RunFindings,
    summary: RunSummary | undefined,
  ): { element: HTMLElement; mounts: ((s: SeriesData | null, err: string | null) => void)[] } {
    const mounts: ((s: SeriesData | null, err: string | null) => void)[] = [];
    const counts = { critical: 0, warning: 0, info: 0 };
    for (const x of f.findings) counts[x.severity] += 1;
    const countText = [
      counts.critical ? counts.critical + " critical" : "",
      counts.warning ? counts.warning + " warning" : "",
      counts.info ? counts.info + " info" : "",
    ]
      .filter(Boolean)
      .join(", ");
    const lastStep = summary?.last_step ?? null;
    const view = h("div", { class: "th-run-view", data: { run: f.run } }, [
      h("div", { class: "th-run-header" }, [
        h("h2", { class: "th-run-title", text: f.run }),
        badge(f.status),
        h("span", { class: "th-muted", text: countText || "no findings" }),
        lastStep !== null ? h("span", { class: "th-muted", text: "last step " + lastStep }) : null,
      ]),
    ]);

    const errors = f.errors.length ? f.errors : (summary?.errors ?? []);
    if (errors.length > 0) {
      view.appendChild(
        h("div", { class: "th-notice th-notice-error", testid: "run-errors", attrs: { role: "status" } }, [
          h("strong", { text: errors.length === 1 ? "Problem reading this run: " : "Problems reading this run:" }),
          errors.length === 1
            ? h("span", { text: errors[0] ?? "" })
            : h("ul", {}, errors.map((e) => h("li", { text: e }))),
        ]),
      );
    }

    if (!f.has_health_data) {
      view.appendChild(
        h("div", { class: "th-notice th-hint", testid: "no-callback-hint" }, [
          h("p", {
            text: "This run was logged without HealthCallback: only loss-curve checks ran. For gradient, NaN and layer diagnoses add:",
          }),
          codeBlock(SNIPPET, "Copy the HealthCallback snippet"),
        ]),
      );
    }

    if (f.series.includes(LAYER_GRAD)) {
      const chart = h("div", { class: "th-chart" });
      view.appendChild(
        h("section", { class: "th-card th-layer-card", testid: "layer-chart" }, [
          h("div", { class: "th-card-head" }, [
            h("h3", { class: "th-card-title", text: "Gradient norm per layer" }),
            h("span", { class: "th-muted", text: "one line per layer, dark blue = first layer ... gold = last; x = first NaN/Inf" }),
          ]),
          chart,
        ]),
      );
      mounts.push((s, err) => this.mountLayerChart(chart, s, err, LAYER_GRAD, null, null, "run"));
    }

    view.appendChild(h("h3", { class: "th-section", text: f.findings.length ? "Findings (" + f.findings.length + ")" : "Findings" }));
    if (f.findings.length === 0) {
      view.appendChild(
        h("div", { class: "th-empty th-ok", testid: "empty-state", data: { kind: "no-findings" } }, [
          h("h2", { text: "No problems found" }),
          h("p", {
            text: f.has_health_data
              ? "Every check passed" + (lastStep !== null ? " up to step " + lastStep : "") + "."
              : "The loss-curve checks found nothing" + (lastStep !== null ? " up to step " + lastStep : "") + ".",
          }),
        ]),
      );
    }
    f.findings.forEach((finding, i) => {
      const { card, mount } = this.buildCard(f, finding, i);
      view.appendChild(card);
      mounts.push(mount);
    });
    return { element: view, mounts };
  }

  private buildCard(
    f: RunFindings,
    finding: Finding,
    index: number,
  ): { card: HTMLElement; mount: (s: SeriesData | null, err: string | null) => void } {
    const ev = finding.evidence;
    const available = new Set(f.series);
    const plotted = ev.series.filter((s) => available.has(s));
    const missing = ev.series.filter((s) => !available.has(s));

    const evidenceHead: string[] = ["Evidence"];
    if (finding.step !== null) evidenceHead.push("onset: step " + finding.step);
    if (ev.start_step !== null || ev.end_step !== null)
      evidenceHead.push("steps " + (ev.start_step ?? "start") + "\u2013" + (ev.end_step ?? "end"));
    if (ev.layer) evidenceHead.push("layer " + ev.layer);

    const evidence = h("div", { class: "th-evidence", testid: "evidence-chart", data: { series: plotted.join(",") } }, [
      h("div", { class: "th-evidence-head" }, [
        h("span", { text: evidenceHead[0] ?? "" }),
        finding.step !== null ? h("span", { class: "th-onset-label", text: "onset: step " + finding.step }) : null,
        h("span", { class: "th-muted", text: evidenceHead.slice(finding.step !== null ? 2 : 1).join(" \u00b7 ") }),
      ]),
    ]);
    if (finding.step !== null) evidence.setAttribute("data-onset-step", String(finding.step));

    const scalarNames = plotted.filter((s) => !s.startsWith("layer_"));
    const layerNames = plotted.filter((s) => s.startsWith("layer_"));
    const scalarBox = scalarNames.length ? h("div", { class: "th-chart" }) : null;
    const layerBoxes = layerNames.map((name) => ({ name, box: h("div", { class: "th-chart" }) }));
    if (scalarBox) evidence.appendChild(scalarBox);
    for (const { name, box } of layerBoxes) {
      evidence.appendChild(h("div", { class: "th-chart-title", text: name + " (one line per layer)" }));
      evidence.appendChild(box);
    }
    if (plotted.length === 0) {
      evidence.appendChild(
        h("div", {
          class: "th-chart-empty",
          text: ev.series.length ? "The series behind this finding (" + ev.series.join(", ") + ") are not in this run's data." : "No series to plot for this finding.",
        }),
      );
    } else if (missing.length) {
      evidence.appendChild(h("div", { class: "th-chart-note", text: "Not available to plot: " + missing.join(", ") }));
    }

    const fixes = h(
      "ol",
      { class: "th-fixes" },
      finding.fixes.map((fix) => h("li", {}, [h("div", { class: "th-fix-text", text: fix.text }), fix.code !== null ? codeBlock(fix.code) : null])),
    );

    const color = SEVERITY_COLOR[finding.severity];
    const card = h("article", { class: "th-card th-finding th-finding-" + finding.severity, testid: "finding-card", data: { code: finding.code, severity: finding.severity, step: finding.step === null ? "" : String(finding.step) } }, [
      h("div", { class: "th-card-head" }, [
        badge(finding.severity),
        h("h3", { class: "th-card-title", text: finding.title }),
        finding.step !== null ? h("span", { class: "th-since", text: "since step " + finding.step }) : null,
        h("code", { class: "th-code-id", text: finding.code, title: "finding code" }),
      ]),
      h("div", { class: "th-card-body" }, [
        h("div", { class: "th-card-text" }, [
          finding.detail ? h("p", { class: "th-detail", text: finding.detail }) : null,
          finding.fixes.length ? h("h4", { class: "th-fixes-title", text: finding.fixes.length === 1 ? "Fix" : "Fixes" }) : null,
          finding.fixes.length ? fixes : null,
        ]),
        evidence,
      ]),
    ]);

    const syncKey = "th-card-" + index;
    const band: [number | null, number | null] | null = ev.start_step !== null || ev.end_step !== null ? [ev.start_step, ev.end_step] : null;
    const mount = (s: SeriesData | null, err: string | null) => {
      if (plotted.length === 0) return;
      if (!s) {
        evidence.appendChild(h("div", { class: "th-chart-empty", text: "Could not load the series: " + (err ?? "unknown error") }));
        return;
      }
      if (scalarBox) {
        const lines: Line[] = [];
        scalarNames.forEach((name, k) => {
          const d = s.series[name];
          if (d) lines.push({ label: name, steps: d.steps, values: d.values, color: scalarColor(k) });
        });
        this.mountPanel(scalarBox, { lines, height: 170, onset: finding.step, onsetColor: color, band, syncKey });
      }
      for (const { name, box } of layerBoxes) this.mountLayerChart(box, s, null, name, finding.step, color, syncKey, ev.layer, band);
    };
    return { card, mount };
  }

  private mountPanel(box: HTMLElement, spec: PanelSpec): void {
    if (spec.lines.length === 0) {
      box.appendChild(h("div", { class: "th-chart-empty", text: "No data returned for this series." }));
      return;
    }
    try {
      const handle = mountPanel(box, spec);
      if (handle) this.charts.push(handle);
    } catch (err) {
      box.appendChild(h("div", { class: "th-chart-empty", text: "Could not draw this chart: " + errorText(err) }));
    }
  }

  private mountLayerChart(
    box: HTMLElement,
    s: SeriesData | null,
    err: string | null,
    name: string,
    onset: number | null,
    onsetColor: string | null,
    syncKey: string,
    highlight: string | null = null,
    band: [number | null, number | null] | null = null,
  ): void {
    if (!s) {
      box.appendChild(h("div", { class: "th-chart-empty", text: "Could not load " + name + ": " + (err ?? "unknown error") }));
      return;
    }
    const d = s.layers[name];
    if (!d) {
      box.appendChild(h("div", { class: "th-chart-empty", text: "No data returned for " + name + "." }));
      return;
    }
    const n = d.names.length;
    const lines: Line[] = d.names.map((layer, j) => ({
      label: layer === highlight ? layer + " (flagged)" : layer,
      steps: d.steps,
      values: d.values.map((row) => row[j] ?? null),
      color: depthColor(j, n),
      width: layer === highlight ? 3 : 1.5,
    }));
    this.mountPanel(box, {
      lines,
      height: 200,
      onset,
      onsetColor: onsetColor ?? "#c62828",
      band,
      syncKey,
    });
  }

  stop(): void {
    window.clearInterval(this.timer);
    this.destroyCharts();
  }
}

let app: App | null = null;

function injectStyle(): void {
  const id = "tb-trainhealth-style";
  if (document.getElementById(id)) return;
  const style = document.createElement("style");
  style.id = id;
  style.textContent = uplotCss + "\n" + appCss;
  document.head.appendChild(style);
}

export async function render(): Promise<void> {
  injectStyle();
  app?.stop();
  app = new App();
  app.mount();
}
