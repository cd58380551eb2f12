// One finding card: severity badge, title, onset step and code; the detail, the steps of the run's
// plan that answer it ("→ plan step 1": the fixes are the plan's, plan_view.ts) and what a trial said
// against its usual fix; the evidence charts of the series behind it. A run worse than
// its baseline draws both runs' curves there, as the comparison does (compare_chart.ts).
import type { Fact, Finding, RunFindings, SeriesData } from "./api";
import type { Line } from "./chart_types";
import { PART_NOT_RECORDED, WORSE_THAN_BASELINE } from "./codes";
import { overlayCharts } from "./compare_chart";
import { fetchCompare, type Comparison } from "./compare_api";
import { clear, h } from "./dom";
import type { EvidenceCharts } from "./evidence_charts";
import { badge, errorText } from "./format";
import { planStepSelector } from "./plan_view";
import { scalarColor, severityColor } from "./theme";


/** Draws a card's charts once the run's series have arrived (or failed: `err`). */
export type MountCharts = (s: SeriesData | null, err: string | null) => void;

/** The run's comparison with a baseline, asked once per view: the lead chart and the worse card draw the same. */
export type CompareOnce = (baseline: string) => Promise<Comparison>;

export function compareOnce(run: string): CompareOnce {
  const asked = new Map<string, Promise<Comparison>>();
  return (baseline) => {
    const known = asked.get(baseline);
    if (known) return known;
    const fetched = fetchCompare(run, baseline);
    asked.set(baseline, fetched);
    return fetched;
  };
}

/** The measured values behind a finding, as a two-column table (text only). */
export function factTable(facts: Fact[]): HTMLElement {
  return h("table", { class: "th-facts", testid: "evidence-facts" }, [
    h(
      "tbody",
      {},
      facts.map((f) => h("tr", {}, [h("th", { text: f.label, attrs: { scope: "row" } }), h("td", { text: f.value })])),
    ),
  ]);
}

/** "→ plan step 1" (or "→ plan steps 1, 2"): the plan's steps that answer the finding; a click
 * scrolls to the first. */
function planRef(steps: number[]): HTMLElement {
  const ref = h("button", {
    class: "th-plan-ref",
    testid: "plan-ref",
    data: { steps: steps.join(",") },
    text: "\u2192 plan " + (steps.length === 1 ? "step " : "steps ") + steps.join(", "),
    attrs: { type: "button" },
  });
  ref.addEventListener("click", () => {
    const target = ref.closest("[data-testid=run-view]")?.querySelector(planStepSelector(steps[0] ?? 1));
    if (target instanceof HTMLElement) target.scrollIntoView({ block: "center" });
  });
  return ref;
}

/** ": parts off in this run: ..." where the callback turned parts off (part_not_recorded), else "". */
function partsOff(f: RunFindings): string {
  const off = f.findings.filter((x) => x.code === PART_NOT_RECORDED).map((x) => x.title);
  return off.length ? " (parts off in this run: " + off.join("; ") + ")" : "";
}

export function findingCard(
  f: RunFindings,
  finding: Finding,
  index: number,
  charts: EvidenceCharts,
  compare: CompareOnce,
): { card: HTMLElement; mount: MountCharts } {
  const ev = finding.evidence;
  const syncKey = "th-card-" + index;
  const available = new Set(f.series);
  // The baseline it was judged against, where it is a run here: its curves come from the compare route.
  const baseline = finding.code === WORSE_THAN_BASELINE ? f.baseline_run : null;
  const plotted = baseline !== null ? [] : ev.series.filter((s) => available.has(s));
  const missing = ev.series.filter((s) => !available.has(s));

  // One axis per run: batch steps, or epochs where the run only has per-epoch data.
  const onset = finding.step ?? finding.epoch;
  const onsetText = onset === null ? null : (finding.step !== null ? "step " : "epoch ") + onset;
  const evidenceHead: string[] = ["Evidence"];
  if (onsetText !== null) evidenceHead.push("onset: " + onsetText);
  if (ev.start_step !== null || ev.end_step !== null)
    evidenceHead.push(f.axis + "s " + (ev.start_step ?? "start") + "\u2013" + (ev.end_step ?? "end"));
  if (ev.layer && f.layers.includes(ev.layer)) evidenceHead.push("layer " + ev.layer);

  const evidence = h("div", { class: "th-evidence", testid: "evidence-chart", data: { series: plotted.join(","), facts: String(ev.facts.length) } }, [
    h("div", { class: "th-evidence-head" }, [
      h("span", { text: evidenceHead[0] ?? "" }),
      onsetText !== null ? h("span", { class: "th-onset-label", text: "onset: " + onsetText }) : null,
      h("span", { class: "th-muted", text: evidenceHead.slice(onsetText !== null ? 2 : 1).join(" \u00b7 ") }),
    ]),
  ]);
  if (onset !== null) evidence.setAttribute("data-onset-step", String(onset));

  const scalarNames = plotted.filter((s) => !s.startsWith("layer_"));
  const layerNames = plotted.filter((s) => s.startsWith("layer_"));
  const scalarBox = scalarNames.length ? h("div", { class: "th-chart" }) : null;
  const layerBoxes = layerNames.map((name) => ({ name, box: h("div", { class: "th-chart" }) }));
  if (ev.facts.length) evidence.appendChild(factTable(ev.facts));
  const overlay = baseline !== null ? evidenceOverlay(baseline, compare, charts, syncKey) : null;
  if (overlay) evidence.appendChild(overlay.element);
  if (scalarBox) evidence.appendChild(scalarBox);
  for (const { name, box } of layerBoxes) {
    evidence.appendChild(h("div", { class: "th-chart-title", text: name + " (one line per layer)" }));
    evidence.appendChild(box);
  }
  const why = partsOff(f);
  if (finding.code === WORSE_THAN_BASELINE && baseline === null)
    evidence.appendChild(h("div", { class: "th-chart-note", text: "The baseline is not a run of this logdir: only this run's curve is drawn. Compare the two with tb-trainhealth compare RUN BASELINE." }));
  if (overlay === null && plotted.length === 0 && ev.facts.length === 0) {
    evidence.appendChild(
      h("div", {
        class: "th-chart-empty",
        text: ev.series.length ? "The series behind this finding (" + ev.series.join(", ") + ") are not in this run's data" + why + "." : "No series to plot for this finding.",
      }),
    );
  } else if (missing.length && plotted.length) {
    evidence.appendChild(h("div", { class: "th-chart-note", text: "Not available to plot: " + missing.join(", ") + why }));
  }

  const card = h("article", { class: "th-card th-finding th-finding-" + finding.severity, testid: "finding-card", data: { code: finding.code, severity: finding.severity, step: finding.step === null ? "" : String(finding.step) } }, [
    h("div", { class: "th-card-head" }, [
      badge(finding.severity),
      h("h3", { class: "th-card-title", text: finding.title }),
      onsetText !== null ? h("span", { class: "th-since", text: "since " + onsetText }) : null,
      h("code", { class: "th-code-id", text: finding.code, title: "finding code" }),
    ]),
    h("div", { class: "th-card-body" }, [
      h("div", { class: "th-card-text" }, [
        finding.detail ? h("p", { class: "th-detail", text: finding.detail }) : null,
        finding.plan_steps.length ? planRef(finding.plan_steps) : null,
        finding.trial_note ? h("p", { class: "th-trial-note", testid: "trial-note", text: finding.trial_note }) : null,
      ]),
      evidence,
    ]),
  ]);

  const band: [number | null, number | null] | null = ev.start_step !== null || ev.end_step !== null ? [ev.start_step, ev.end_step] : null;
  const mount: MountCharts = (s, err) => {
    if (overlay) {
      overlay.mount();
      return;
    }
    if (plotted.length === 0) return;
    if (!s) {
      evidence.appendChild(h("div", { class: "th-chart-empty", text: "Could not load the series: " + (err ?? "unknown error") }));
      return;
    }
    const color = severityColor(finding.severity);
    if (scalarBox) {
      const lines: Line[] = [];
      scalarNames.forEach((name, k) => {
        const d = s.series[name];
        if (d) lines.push({ label: name, steps: d.steps, values: d.values, color: scalarColor(k) });
      });
      charts.panel(scalarBox, { lines, height: 170, onset, onsetColor: color, band, syncKey, axis: f.axis });
    }
    for (const { name, box } of layerBoxes)
      charts.layerPanel(box, s, null, name, { onset, onsetColor: color, syncKey, highlight: ev.layer, band });
  };
  return { card, mount };
}

/** Both runs' training loss and deciding metric (the route's `evidence` panels), the baseline's noise
 * band and the parting line, as the compare route answers them: the worse card's evidence, and the
 * lead chart where that finding leads. `mount` draws them once they arrive. */
export function evidenceOverlay(baseline: string, compare: CompareOnce, charts: EvidenceCharts, syncKey: string): { element: HTMLElement; mount: () => void } {
  const element = h("div", { class: "th-evidence-overlay", testid: "evidence-overlay", data: { baseline } }, [h("div", { class: "th-loading", text: "Loading both runs' curves..." })]);
  return { element, mount: () => void mountOverlay(element, compare(baseline), charts, syncKey) };
}

/** Draws the comparison into `box`; nothing once the box is gone (the view was redrawn). */
async function mountOverlay(box: HTMLElement, comparison: Promise<Comparison>, charts: EvidenceCharts, syncKey: string): Promise<void> {
  try {
    const c = await comparison;
    if (!box.isConnected) return;
    clear(box);
    const { element, mount } = overlayCharts(c, charts, c.curves?.evidence ?? [], syncKey);
    box.appendChild(element);
    mount();
  } catch (err) {
    if (!box.isConnected) return;
    clear(box);
    box.appendChild(h("div", { class: "th-chart-empty", text: "Could not load the baseline's curves: " + errorText(err) }));
  }
}
