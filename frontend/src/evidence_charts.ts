// Draws the evidence charts of one run view (scalar panels and one-line-per-layer panels)
// into their boxes, says so in the box when a chart can't be drawn, and keeps the
// chart handles so the view can destroy them all when it is replaced.
import type { SeriesData } from "./api";
import type { ChartHandle, Line, PanelSpec } from "./chart_types";
import { mountPanel } from "./charts";
import { h } from "./dom";
import { errorText } from "./format";
import { depthColors, severityColor } from "./theme";

export interface LayerPanelOptions {
  onset: number | null;
  onsetColor: string | null;
  syncKey: string;
  highlight?: string | null; // the layer a finding names, drawn thicker
  band?: [number | null, number | null] | null;
}

export class EvidenceCharts {
  private handles: ChartHandle[] = [];

  panel(box: HTMLElement, spec: PanelSpec): void {
    if (spec.lines.length === 0) {
      box.appendChild(h("div", { class: "th-chart-empty", text: "No data returned for this series." }));
      return;
    }
    try {
      const handle = mountPanel(box, spec);
      if (handle) this.handles.push(handle);
    } catch (err) {
      box.appendChild(h("div", { class: "th-chart-empty", text: "Could not draw this chart: " + errorText(err) }));
    }
  }

  /** One line per layer of the layer series `name`, coloured by depth. */
  layerPanel(box: HTMLElement, s: SeriesData | null, err: string | null, name: string, opts: LayerPanelOptions): void {
    if (!s) {
      box.appendChild(h("div", { class: "th-chart-empty", text: "Could not load " + name + ": " + (err ?? "unknown error") }));
      return;
    }
    const d = s.layers[name];
    if (!d) {
      box.appendChild(h("div", { class: "th-chart-empty", text: "No data returned for " + name + "." }));
      return;
    }
    const highlight = opts.highlight ?? null;
    const colors = depthColors(d.names.length);
    const lines: Line[] = d.names.map((layer, j) => ({
      label: layer === highlight ? layer + " (flagged)" : layer,
      steps: d.steps,
      values: d.values.map((row) => row[j] ?? null),
      color: colors[j] ?? "",
      width: layer === highlight ? 3 : 1.5,
    }));
    this.panel(box, {
      lines,
      height: 200,
      onset: opts.onset,
      onsetColor: opts.onsetColor ?? severityColor("critical"),
      band: opts.band ?? null,
      syncKey: opts.syncKey,
    });
  }

  destroyAll(): void {
    for (const c of this.handles) c.destroy();
    this.handles = [];
  }
}
