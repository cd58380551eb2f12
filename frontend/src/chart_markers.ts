// The marks a chart draws over its lines: the finding's evidence range shaded, an "x"
// where each line first goes NaN/Inf, and a dashed onset line with its step label.
import uPlot from "uplot";
import type { PanelSpec, YBand } from "./chart_types";
import { fmtStep } from "./format";
import { cssColor, severityColor } from "./theme";

/** The band between `low` and `high`, under the lines and inside the plot area (a gap where an edge is
 * unknown, or not drawable on a log scale). */
function drawYBand(u: uPlot, band: YBand): void {
  const ctx = u.ctx;
  ctx.save();
  ctx.beginPath();
  ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
  ctx.clip();
  ctx.fillStyle = cssColor("--th-noise-band");
  const y = (v: number | null | undefined): number | null => {
    if (v === null || v === undefined) return null;
    const p = u.valToPos(v, "y", true);
    return Number.isFinite(p) ? p : null;
  };
  let segment: { x: number; lo: number; hi: number }[] = [];
  const fill = (): void => {
    if (segment.length > 1) {
      ctx.beginPath();
      segment.forEach((p, i) => (i === 0 ? ctx.moveTo(p.x, p.hi) : ctx.lineTo(p.x, p.hi)));
      for (let i = segment.length - 1; i >= 0; i--) ctx.lineTo(segment[i]?.x ?? 0, segment[i]?.lo ?? 0);
      ctx.closePath();
      ctx.fill();
    }
    segment = [];
  };
  band.steps.forEach((step, i) => {
    const lo = y(band.low[i]);
    const hi = y(band.high[i]);
    if (lo === null || hi === null || !Number.isFinite(step)) return fill();
    segment.push({ x: u.valToPos(step, "x", true), lo, hi });
  });
  fill();
  ctx.restore();
}

export function markersPlugin(spec: PanelSpec, firstNonFinite: (number | null)[]): uPlot.Plugin {
  const pr = () => uPlot.pxRatio || 1;
  const xPos = (u: uPlot, step: number) => Math.round(u.valToPos(step, "x", true));
  const inside = (u: uPlot, x: number) => x >= u.bbox.left - 1 && x <= u.bbox.left + u.bbox.width + 1;
  return {
    hooks: {
      drawAxes: [
        (u: uPlot) => {
          if (spec.noiseBand) drawYBand(u, spec.noiseBand);
          const band = spec.band;
          if (!band || (band[0] === null && band[1] === null)) return;
          const min = u.scales["x"]?.min ?? 0;
          const max = u.scales["x"]?.max ?? 0;
          const x0 = xPos(u, Math.max(band[0] ?? min, min));
          const x1 = xPos(u, Math.min(band[1] ?? max, max));
          if (x1 <= x0) return;
          const ctx = u.ctx;
          ctx.save();
          ctx.fillStyle = cssColor("--th-band");
          ctx.fillRect(x0, u.bbox.top, x1 - x0, u.bbox.height);
          ctx.restore();
        },
      ],
      draw: [
        (u: uPlot) => {
          const ctx = u.ctx;
          const r = pr();
          // first NaN/Inf of each line: an "x" where the line stops
          firstNonFinite.forEach((step, k) => {
            const line = spec.lines[k];
            if (step === null || !line || !u.series[k + 1]?.show) return;
            const x = xPos(u, step);
            if (!inside(u, x)) return;
            const data = u.data[k + 1] ?? [];
            const xs = u.data[0];
            let yVal: number | null = null;
            for (let i = 0; i < xs.length && (xs[i] ?? Infinity) < step; i++) {
              const v = data[i];
              if (v !== null && v !== undefined) yVal = v;
            }
            let y = yVal === null ? u.bbox.top + 8 * r : u.valToPos(yVal, "y", true);
            if (!Number.isFinite(y)) y = u.bbox.top + 8 * r;
            y = Math.min(Math.max(y, u.bbox.top + 6 * r), u.bbox.top + u.bbox.height - 6 * r);
            const s = 4 * r;
            ctx.save();
            ctx.strokeStyle = line.color;
            ctx.lineWidth = 2 * r;
            ctx.beginPath();
            ctx.moveTo(x - s, y - s);
            ctx.lineTo(x + s, y + s);
            ctx.moveTo(x + s, y - s);
            ctx.lineTo(x - s, y + s);
            ctx.stroke();
            ctx.restore();
          });
          // onset marker
          if (spec.onset === null || spec.onset === undefined) return;
          const x = xPos(u, spec.onset);
          if (!inside(u, x)) return;
          const color = spec.onsetColor ?? severityColor("critical");
          ctx.save();
          ctx.strokeStyle = color;
          ctx.lineWidth = 1.5 * r;
          ctx.setLineDash([5 * r, 3 * r]);
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.setLineDash([]);
          const label = (spec.onsetLabel ?? "onset") + " " + (spec.axis === "epoch" ? "epoch " : "") + fmtStep(spec.onset);
          ctx.font = `500 ${Math.round(10 * r)}px Roboto, "Helvetica Neue", Arial, sans-serif`;
          const w = ctx.measureText(label).width;
          const right = x + 4 * r + w <= u.bbox.left + u.bbox.width;
          // Never over the y axis' tick labels: inside the plot area on both sides.
          const tx = Math.max(u.bbox.left + 2 * r, right ? x + 4 * r : x - 4 * r - w);
          ctx.textBaseline = "top";
          ctx.lineJoin = "round";
          ctx.lineWidth = 3 * r;
          ctx.strokeStyle = cssColor("--th-surface");
          ctx.strokeText(label, tx, u.bbox.top + 3 * r);
          ctx.fillStyle = color;
          ctx.fillText(label, tx, u.bbox.top + 3 * r);
          ctx.restore();
        },
      ],
    },
  };
}
