// What the comparison draws: the run's and the baseline's curves overlaid (training loss, the
// deciding metric, the validation curves; one panel each, the baseline's noise band shaded, the
// parting step marked like a finding's onset) and each layer's gradient-norm ratio as a bar
// around 1x. The worse_than_baseline finding's card draws the same panels (its evidence).
import type { Axis } from "./api";
import type { Line } from "./chart_types";
import type { Comparison, LayerRatio } from "./compare_api";
import { h } from "./dom";
import type { EvidenceCharts } from "./evidence_charts";
import { fmtNum } from "./format";
import { scalarColor, severityColor } from "./theme";

const HEIGHT = 170;
/** Ratios are drawn on a log scale out to this many decades either side of 1x. */
const DECADES = 3;

const TITLES: Record<string, string> = {
  loss: "Training loss (per step, smoothed)",
  epoch_loss: "Training loss (per epoch)",
  epoch_val_loss: "Validation loss",
  epoch_val_accuracy: "Validation accuracy",
  epoch_accuracy: "Training accuracy",
};

/** One panel per named curve (the route's `panels`, or a card's `evidence`), run and baseline
 * overlaid on the baseline's noise band; returns the panels' element and what draws them. */
export function overlayCharts(c: Comparison, charts: EvidenceCharts, names: string[], syncKey: string): { element: HTMLElement; mount: () => void } {
  const curves = c.curves;
  const element = h("div", { class: "th-compare-charts", testid: "compare-chart" });
  if (!curves) return { element, mount: () => undefined };
  if (curves.parted_at !== null) element.setAttribute("data-parted-at", String(curves.parted_at));
  const shown = names.filter((n) => curves.run[n] || curves.baseline[n]);
  const boxes = shown.map((name) => {
    const band = curves.bands[name];
    const title = (TITLES[name] ?? name) + (name === curves.deciding ? " (decided the verdict)" : "");
    const box = h("div", { class: "th-chart", data: { series: name, band: band ? "1" : "0" } });
    const note = band ? h("div", { class: "th-chart-note", testid: "noise-band", text: "Shaded: " + band.what + "." }) : null;
    element.append(h("div", { class: "th-chart-title", text: title }), box);
    if (note) element.appendChild(note);
    return { name, box };
  });
  if (boxes.length === 0) element.appendChild(h("div", { class: "th-chart-empty", text: "Neither run has a loss or validation curve to overlay." }));
  const x: Axis = curves.x;
  const mount = (): void => {
    const color = severityColor(c.verdict === "better" ? "ok" : "critical");
    for (const { name, box } of boxes) {
      const lines: Line[] = [];
      const ours = curves.run[name];
      const theirs = curves.baseline[name];
      if (theirs) lines.push({ label: "baseline " + (c.baseline ?? ""), steps: theirs.steps, values: theirs.values, color: scalarColor(1), width: 1.5 });
      if (ours) lines.push({ label: "run " + c.run, steps: ours.steps, values: ours.values, color: scalarColor(0), width: 2 });
      charts.panel(box, { lines, height: HEIGHT, onset: curves.parted_at, onsetColor: color, onsetLabel: "parted", noiseBand: curves.bands[name] ?? null, syncKey, axis: x });
    }
  };
  return { element, mount };
}

/** Each layer's median gradient norm in the run over the baseline's: a bar left of 1x is smaller. */
export function gradRatioList(rows: LayerRatio[]): HTMLElement {
  return h(
    "ol",
    { class: "th-ratios", testid: "compare-grad-ratio" },
    rows.map((r) => {
      const name = r.baseline_layer !== null && r.baseline_layer !== r.layer ? r.layer + " (baseline " + r.baseline_layer + ")" : r.layer;
      const bar = h("span", { class: "th-ratio-track" });
      if (r.ratio !== null && r.ratio > 0) {
        const decades = Math.max(-DECADES, Math.min(DECADES, Math.log10(r.ratio)));
        const fill = h("span", { class: "th-ratio-fill" + (decades < 0 ? " th-ratio-below" : "") });
        const share = (Math.abs(decades) / DECADES) * 50;
        fill.style.width = share + "%";
        fill.style.left = (decades < 0 ? 50 - share : 50) + "%";
        bar.appendChild(fill);
      }
      const title = r.run !== null && r.baseline !== null ? "median gradient norm " + fmtNum(r.run, 3) + " (run) / " + fmtNum(r.baseline, 3) + " (baseline)" : "not recorded in both runs over the same steps";
      return h("li", { data: { layer: r.layer }, title }, [
        h("span", { class: "th-ratio-name", text: name }),
        bar,
        h("span", { class: "th-ratio-value", text: r.ratio !== null ? "\u00d7" + fmtNum(r.ratio, 3) : "unknown" }),
      ]);
    }),
  );
}
