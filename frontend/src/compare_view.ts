// The run page's comparison with a baseline run: a "Compare with..." select (the other runs,
// or the best earlier run of this model; remembered per run), then the verdict and why, the
// changed settings (most likely cause first), the metrics, the fix, both runs' curves overlaid
// and each layer's gradient-norm ratio. Kept across refreshes of the same run: a poll fetches
// the comparison again and swaps it in when it arrives, so nothing flickers.
import { BEST, fetchCompare, type Change, type Comparison, type SettingValue, type SignalChange, type Verdict } from "./compare_api";
import { gradRatioList, overlayCharts } from "./compare_chart";
import { codeBlock } from "./code_block";
import { WORSE_THAN_BASELINE } from "./codes";
import { clear, h } from "./dom";
import { EvidenceCharts } from "./evidence_charts";
import { errorText, fmtNum, fmtStep } from "./format";
import { store, stored, STORE_BASELINE } from "./storage";

const CHANGES_SHOWN = 12;
const POINTS = 500;
// Option values: "" none, BEST_OPTION the best earlier run, RUN_OPTION + name a run (a run may be named "best").
export const BEST_OPTION = "@best";
export const RUN_OPTION = "run:";
export const VERDICT_BADGE: Record<Verdict, string> = { worse: "critical", same: "info", better: "ok", unknown: "pending" };
const AGAINST: Record<Verdict, string> = { worse: "than", same: "as", better: "than", unknown: "against" };

export class CompareSection {
  readonly element = h("section", { class: "th-card th-compare", testid: "compare" });
  // Named by its heading, a <label>: found as getByLabel("Compare with…") or getByRole("combobox", { name: "Compare with" }).
  private readonly select = h("select", { class: "th-compare-select", testid: "compare-select", attrs: { id: "th-compare-with" } });
  private readonly body = h("div", { class: "th-compare-body" });
  private readonly charts = new EvidenceCharts();
  private run: string | null = null;
  private names: string[] = [];
  private token = 0; // a newer load makes older ones drop their results
  private chosen: { run: string; choice: string } | null = null; // from "Compare all runs", for the next show()

  constructor() {
    this.element.append(
      h("div", { class: "th-card-head" }, [
        h("h3", { class: "th-card-title" }, [h("label", { text: "Compare with\u2026", attrs: { for: "th-compare-with" } })]),
        h("span", { class: "th-muted th-compare-hint", text: "a baseline run: what changed, and whether this run is worse" }),
        this.select,
      ]),
      this.body,
    );
    this.select.addEventListener("change", () => {
      if (this.run === null) return;
      store(STORE_BASELINE + this.run, this.select.value);
      void this.load(true);
    });
  }

  /** Every run of the experiment: the select lists all but the one shown. */
  setRuns(names: string[]): void {
    if (names.length === this.names.length && names.every((n, i) => n === this.names[i])) return;
    this.names = names;
    if (this.run !== null) this.fillOptions(this.select.value);
  }

  /** Shows the comparison for `run`: its remembered baseline, fetched anew when the run
   * changed, or (same run) when `refresh` says its data did. */
  show(run: string, refresh: boolean): void {
    const chosen = this.chosen?.run === run ? this.chosen.choice : null;
    this.chosen = null;
    if (run !== this.run || chosen !== null) {
      this.run = run;
      this.fillOptions(chosen ?? stored(STORE_BASELINE + run) ?? "");
      void this.load(true);
    } else if (refresh) {
      void this.load(false);
    }
  }

  /** Compares `run` with `choice` (an option value) when it is next shown, and remembers it for the run. */
  choose(run: string, choice: string): void {
    store(STORE_BASELINE + run, choice);
    this.chosen = { run, choice };
  }

  /** Forgets the run and frees the charts (the view is hidden, or shows a run it cannot compare). */
  reset(): void {
    this.token++;
    this.charts.destroyAll();
    clear(this.body);
    this.run = null;
  }

  private fillOptions(choice: string): void {
    const others = [...this.names].filter((n) => n !== this.run).sort();
    const options = [
      h("option", { text: "\u2014 no baseline \u2014", attrs: { value: "" } }),
      h("option", { text: "best earlier run of this model", attrs: { value: BEST_OPTION } }),
      ...others.map((n) => h("option", { text: n, attrs: { value: RUN_OPTION + n } })),
    ];
    clear(this.select);
    this.select.append(...options);
    const known = choice === BEST_OPTION || others.some((n) => RUN_OPTION + n === choice);
    this.select.value = known ? choice : "";
  }

  private async load(replace: boolean): Promise<void> {
    const run = this.run;
    const choice = this.select.value;
    const token = ++this.token;
    if (run === null || choice === "") {
      this.charts.destroyAll();
      clear(this.body);
      this.element.classList.add("th-compare-idle");
      return;
    }
    this.element.classList.remove("th-compare-idle");
    const baseline = choice === BEST_OPTION ? BEST : choice.slice(RUN_OPTION.length);
    if (replace) {
      this.charts.destroyAll();
      clear(this.body);
      const what = choice === BEST_OPTION ? "the best earlier run of this model" : baseline;
      this.body.appendChild(h("div", { class: "th-loading", text: "Comparing with " + what + "..." }));
    }
    let comparison: Comparison;
    try {
      comparison = await fetchCompare(run, baseline, POINTS);
    } catch (err) {
      if (token !== this.token) return;
      this.charts.destroyAll();
      clear(this.body);
      this.body.appendChild(h("div", { class: "th-notice th-notice-error", testid: "compare-error", text: "Could not compare: " + errorText(err) }));
      return;
    }
    if (token !== this.token) return;
    this.charts.destroyAll();
    clear(this.body);
    const mount = this.render(comparison);
    mount();
  }

  /** Fills the body; returns what draws the charts (the boxes must be in the document first). */
  private render(c: Comparison): () => void {
    const body = this.body;
    body.setAttribute("data-verdict", c.verdict);
    if (c.baseline === null) {
      body.appendChild(h("p", { class: "th-notice", testid: "compare-none", text: "Nothing to compare with: " + c.why + "." }));
      return () => undefined;
    }
    const parted = c.parted_at_step !== null ? "the training loss parted from the baseline's at " + c.axis + " " + fmtStep(c.parted_at_step) : null;
    body.append(
      h("div", { class: "th-compare-head" }, [
        h("span", { class: "th-badge th-badge-" + VERDICT_BADGE[c.verdict], testid: "compare-verdict", data: { verdict: c.verdict }, text: c.verdict }),
        h("span", { class: "th-compare-against", text: AGAINST[c.verdict] + " " + c.baseline }),
        c.picked ? h("span", { class: "th-muted", text: "(best earlier run of this model)" }) : null,
      ]),
      h("p", { class: "th-compare-why", testid: "compare-why", text: c.why + (parted ? "; " + parted : "") + "." }),
    );
    const worse = c.findings.find((f) => f.code === WORSE_THAN_BASELINE);
    if (worse && worse.fixes.length) {
      body.appendChild(h("h4", { class: "th-fixes-title", text: worse.fixes.length === 1 ? "Fix" : "Fixes" }));
      body.appendChild(h("ol", { class: "th-fixes" }, worse.fixes.map((fix) => h("li", {}, [h("div", { class: "th-fix-text", text: fix.text }), fix.code !== null ? codeBlock(fix.code) : null]))));
    }
    body.appendChild(h("div", { class: "th-compare-tables" }, [changesTable(c.changes, c.signal_changes), metricsTable(c)]));
    const { element, mount } = overlayCharts(c, this.charts, c.curves?.panels ?? [], "compare");
    body.appendChild(element);
    if (c.layer_grad_ratio.length) {
      body.appendChild(h("div", { class: "th-chart-title", text: "Gradient norm per layer, run / baseline (median over the steps both recorded)" }));
      body.appendChild(gradRatioList(c.layer_grad_ratio));
    }
    return mount;
  }
}

/** The changed settings, then the health signals that moved (a bug no setting records still shows there). */
function changesTable(changes: Change[], signals: SignalChange[]): HTMLElement {
  const wrap = h("div", { class: "th-compare-table" }, [h("div", { class: "th-chart-title", text: "Changed settings, most likely cause first" })]);
  wrap.appendChild(settingRows(changes));
  if (signals.length) {
    wrap.appendChild(h("div", { class: "th-chart-title", text: "Health signals that moved beyond what seeds move them" }));
    wrap.appendChild(h("ul", { class: "th-signal-changes", testid: "compare-signals" }, signals.slice(0, CHANGES_SHOWN).map((s) => h("li", { data: { layer: s.layer, signal: s.signal }, text: s.text }))));
  }
  return wrap;
}

function settingRows(changes: Change[]): HTMLElement {
  if (changes.length === 0) return h("p", { class: "th-muted", testid: "compare-changes", text: "No recorded setting differs." });
  const shown = changes.slice(0, CHANGES_SHOWN);
  const more = changes.length - shown.length;
  const wrap = h("div", {});
  wrap.appendChild(
    h("table", { class: "th-facts th-compare-rows", testid: "compare-changes" }, [
      h("thead", {}, [h("tr", {}, [h("th", { text: "setting" }), h("th", { text: "baseline" }), h("th", { text: "run" })])]),
      h(
        "tbody",
        {},
        shown.map((ch, i) => {
          const [base, run] = settingTexts(ch.baseline, ch.run);
          return h("tr", { class: i === 0 ? "th-culprit" : "", data: { setting: ch.setting } }, [
            h("th", { text: ch.setting, attrs: { scope: "row" } }),
            h("td", { text: base }),
            h("td", { text: run }),
          ]);
        }),
      ),
    ]),
  );
  if (more > 0) wrap.appendChild(h("div", { class: "th-muted", testid: "compare-changes-more", text: "+" + more + " more" }));
  return wrap;
}

function metricsTable(c: Comparison): HTMLElement {
  const value = (v: number | null): string => (v === null ? "NaN/Inf" : fmtNum(v, 4));
  return h("div", { class: "th-compare-table" }, [
    h("div", { class: "th-chart-title", text: "Metrics (final, and best over the run)" }),
    c.metrics.length === 0
      ? h("p", { class: "th-muted", text: "The runs share no metric." })
      : h("table", { class: "th-facts th-compare-rows", testid: "compare-metrics" }, [
          h("thead", {}, [h("tr", {}, [h("th", { text: "metric" }), h("th", { text: "baseline" }), h("th", { text: "run" })])]),
          h("tbody", {}, c.metrics.map((m) => h("tr", { data: { metric: m.name } }, [h("th", { text: m.name, attrs: { scope: "row" } }), h("td", { text: value(m.baseline) }), h("td", { text: value(m.run) })]))),
        ]),
  ]);
}

/** Both values as text, with digits enough to tell them apart (two data fingerprints may agree in 4). */
function settingTexts(a: SettingValue, b: SettingValue): [string, string] {
  for (const digits of [4, 8, 15]) {
    const pair: [string, string] = [settingText(a, digits), settingText(b, digits)];
    if (pair[0] !== pair[1]) return pair;
  }
  return [settingText(a, 17), settingText(b, 17)];
}

/** As the CLI writes a setting: 0.003, relu, not set, True, [0.5, 0.5]; "" (no other callbacks) as (empty). */
function settingText(v: SettingValue, digits: number): string {
  if (v === null) return "not set";
  if (typeof v === "boolean") return v ? "True" : "False";
  if (typeof v === "number") return Number.isInteger(v) && Math.abs(v) < 1e15 ? String(v) : fmtNum(v, digits);
  if (Array.isArray(v)) return "[" + v.slice(0, 6).map((x) => fmtNum(x, digits === 4 ? 3 : digits)).join(", ") + (v.length > 6 ? ", ...]" : "]");
  return v === "" ? "(empty)" : v;
}
