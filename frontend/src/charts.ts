// One uPlot panel: the lines joined on one step axis, a log scale when values span decades,
// tick labels that survive diverged losses, a resize observer. The marks drawn over the
// lines (onset, evidence range, first NaN/Inf) are in chart_markers.ts, the types both
// share in chart_types.ts.
import uPlot from "uplot";
import { markersPlugin } from "./chart_markers";
import type { ChartHandle, Line, PanelSpec } from "./chart_types";
import { h } from "./dom";
import { fmtNum, fmtStep } from "./format";
import { cssColor } from "./theme";

const FONT = '11px Roboto, "Helvetica Neue", Arial, sans-serif';
/** Log scale when the positive values span more than two orders of magnitude and a linear axis
 * would squash most of them against zero (a diverged loss, gradients of 1e-6 beside 1e2); a
 * validation loss rising 0.3 -> 0.6 beside a training loss falling to 0.005 stays linear, where
 * the rise is visible. */
export function wantsLog(lines: Line[]): boolean {
  const values: number[] = [];
  for (const l of lines) for (const v of l.values) if (v !== null && v > 0 && Number.isFinite(v)) values.push(v);
  if (values.length === 0) return false;
  values.sort((a, b) => a - b);
  const lo = values[0] ?? 0;
  const hi = values[values.length - 1] ?? 0;
  const median = values[Math.floor(values.length / 2)] ?? 0;
  return lo > 0 && hi / lo > 100 && median < SQUASHED * hi;
}
/** A median below this share of the maximum: on a linear axis half the points sit in the bottom 2%. */
const SQUASHED = 0.02;

interface Aligned {
  xs: number[];
  ys: (number | null)[][];
  firstNonFinite: (number | null)[];
}

/** Joins the lines on one sorted step axis; a missing point stays undefined (joined, not a gap). */
function align(lines: Line[]): Aligned {
  const stepSet = new Set<number>();
  for (const l of lines) for (const s of l.steps) if (Number.isFinite(s)) stepSet.add(s);
  const xs = Array.from(stepSet).sort((a, b) => a - b);
  const index = new Map<number, number>();
  xs.forEach((s, i) => index.set(s, i));
  const ys: (number | null)[][] = [];
  const firstNonFinite: (number | null)[] = [];
  for (const l of lines) {
    const y: (number | null)[] = new Array<number | null>(xs.length);
    let bad: number | null = null;
    l.steps.forEach((s, j) => {
      const i = index.get(s);
      if (i === undefined) return;
      const v = l.values[j];
      y[i] = v === undefined ? null : v;
      if (v === null && (bad === null || s < bad)) bad = s;
    });
    ys.push(y);
    firstNonFinite.push(bad);
  }
  return { xs, ys, firstNonFinite };
}

// uPlot's default tick increments stop near 1e16; a diverged loss reaches 1e37 and more.
const WIDE_INCRS: number[] = [];
const LINEAR_INCRS: number[] = [];
const STEP_INCRS: number[] = []; // whole steps only
for (let e = 0; e <= 15; e++) for (const m of [1, 2, 5]) STEP_INCRS.push(Number(m + "e" + e));
for (let e = -300; e <= 300; e++) {
  WIDE_INCRS.push(Number("1e" + e));
  for (const m of [1, 2, 5]) LINEAR_INCRS.push(Number(m + "e" + e));
}

/** Powers of ten only (every k-th decade when the range is wide), so the grid stays light. */
function logSplits(u: uPlot, _axis: number, min: number, max: number): number[] {
  if (!(min > 0) || !(max > min)) return [min, max];
  const lo = Math.ceil(Math.log10(min) - 1e-9);
  const hi = Math.floor(Math.log10(max) + 1e-9);
  const room = Math.max(2, Math.floor(u.bbox.height / (uPlot.pxRatio || 1) / 28));
  const every = Math.max(1, Math.ceil((hi - lo + 1) / room));
  const out: number[] = [];
  for (let e = lo; e <= hi; e += every) out.push(Number("1e" + e));
  return out.length > 0 ? out : [min, max];
}

/** Log-axis ticks in one notation: all "1e-4 ... 1e16" when any needs an exponent, else plain. */
function logTickLabels(splits: number[]): string[] {
  const plain = splits.every((v) => v === null || v === undefined || (Math.abs(v) >= 1e-3 && Math.abs(v) < 1e5));
  return splits.map((v) => {
    if (v === null || v === undefined) return "";
    if (plain) return fmtNum(v, 4);
    const e = Math.round(Math.log10(v));
    return Math.abs(v - 10 ** e) <= 1e-9 * v ? "1e" + e : fmtNum(v, 3);
  });
}

/** Why nothing is drawn: a series NaN/Inf from its first recorded step says so, and where. */
function emptyText(spec: PanelSpec, xs: number[], firstNonFinite: (number | null)[]): string {
  const bad = firstNonFinite.filter((s): s is number => s !== null);
  if (xs.length === 0 || bad.length === 0) return "No finite values in this series.";
  const axis = spec.axis ?? "step";
  return (
    "NaN/Inf from the first recorded " + axis + " (" + axis + " " + fmtStep(Math.min(...bad)) + ") on: " +
    "nothing finite to draw. The finding says where the first NaN/Inf came from."
  );
}

/** Mounts one uPlot panel into `container` (already in the document). */
export function mountPanel(container: HTMLElement, spec: PanelSpec): ChartHandle | null {
  const { xs, ys, firstNonFinite } = align(spec.lines);
  const hasValue = ys.some((y) => y.some((v) => v !== null && v !== undefined));
  if (xs.length === 0 || !hasValue) {
    container.appendChild(h("div", { class: "th-chart-empty", text: emptyText(spec, xs, firstNonFinite) }));
    return null;
  }
  const log = wantsLog(spec.lines);
  let hidden = false;
  const plotted = log
    ? ys.map((y) =>
        Array.from(y, (v) => {
          if (v !== null && v !== undefined && v <= 0) {
            hidden = true;
            return null;
          }
          return v;
        }),
      )
    : ys;

  let xMin = xs[0] ?? 0;
  let xMax = xs[xs.length - 1] ?? 0;
  if (spec.onset !== null && spec.onset !== undefined) {
    xMin = Math.min(xMin, spec.onset);
    xMax = Math.max(xMax, spec.onset);
  }
  if (xMax === xMin) {
    xMin -= 1;
    xMax += 1;
  }

  const few = xs.length <= 60;
  const axisColor = cssColor("--th-muted");
  const gridColor = cssColor("--th-grid");
  const tickColor = cssColor("--th-border");
  const opts: uPlot.Options = {
    width: Math.max(container.clientWidth, 200),
    height: spec.height,
    pxAlign: 0,
    legend: { show: true, live: true },
    cursor: {
      drag: { x: true, y: false },
      points: { size: 6 },
      ...(spec.syncKey ? { sync: { key: spec.syncKey } } : {}),
    },
    scales: {
      x: { time: false, range: [xMin, xMax] },
      y: log ? { distr: 3, log: 10 } : {},
    },
    axes: [
      {
        font: FONT,
        stroke: axisColor,
        size: 30,
        grid: { stroke: gridColor, width: 1 },
        ticks: { stroke: tickColor, width: 1, size: 4 },
        incrs: STEP_INCRS,
        values: (_u, splits) => splits.map((v) => (v === null || v === undefined ? "" : fmtStep(v))),
      },
      {
        font: FONT,
        stroke: axisColor,
        size: 52,
        grid: { stroke: gridColor, width: 1 },
        ticks: { stroke: tickColor, width: 1, size: 4 },
        values: (_u, splits) => (log ? logTickLabels(splits) : splits.map((v) => (v === null || v === undefined ? "" : fmtNum(v, 4)))),
        ...(log ? { splits: logSplits, incrs: WIDE_INCRS, filter: (_u: uPlot, splits: number[]) => splits } : { incrs: LINEAR_INCRS }),
      },
    ],
    series: [
      { label: spec.axis ?? "step", value: (_u, v) => (v === null || v === undefined ? "" : String(v)) },
      ...spec.lines.map(
        (l): uPlot.Series => ({
          label: l.label,
          stroke: l.color,
          width: l.width ?? 1.5,
          spanGaps: false,
          points: { show: few, size: 4, fill: l.color },
          value: (_u, v) => (v === null || v === undefined ? "" : fmtNum(v, 4)),
        }),
      ),
    ],
    plugins: [markersPlugin(spec, firstNonFinite)],
  };

  const data = [xs, ...plotted] as uPlot.AlignedData;
  const plot = new uPlot(opts, data, container);
  const notes: string[] = [];
  if (log) notes.push(hidden ? "log scale (values <= 0 not shown)" : "log scale");
  const bad = spec.lines
    .map((l, k) => ({ label: l.label, step: firstNonFinite[k] ?? null }))
    .filter((b): b is { label: string; step: number } => b.step !== null)
    .sort((a, b) => a.step - b.step);
  if (bad.length > 0) {
    const shown = bad.slice(0, 6).map((b) => b.label + " at " + (spec.axis ?? "step") + " " + b.step);
    notes.push("x = first NaN/Inf: " + shown.join(", ") + (bad.length > 6 ? ", ..." : ""));
  }
  if (notes.length > 0) container.appendChild(h("div", { class: "th-chart-note", text: notes.join(" \u00b7 ") }));

  let lastWidth = container.clientWidth;
  let frame = 0;
  const observer =
    typeof ResizeObserver === "function"
      ? new ResizeObserver(() => {
          cancelAnimationFrame(frame);
          frame = requestAnimationFrame(() => {
            const w = container.clientWidth;
            if (w > 0 && Math.abs(w - lastWidth) >= 2) {
              lastWidth = w;
              plot.setSize({ width: Math.max(w, 200), height: spec.height });
            }
          });
        })
      : null;
  observer?.observe(container);
  return {
    destroy() {
      observer?.disconnect();
      cancelAnimationFrame(frame);
      plot.destroy();
    },
  };
}
