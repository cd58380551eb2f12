// The shapes a chart panel is described by, in a module of their own so that charts.ts
// (which draws the panel) and chart_markers.ts (which draws over it) share them without
// importing each other.
import type { Axis } from "./api";

export interface Line {
  label: string;
  steps: number[];
  values: (number | null)[];
  color: string;
  width?: number;
}

export interface PanelSpec {
  lines: Line[];
  height: number;
  onset?: number | null;
  onsetColor?: string;
  /** The word before the onset's step on the chart: "onset" unless given ("parted"). */
  onsetLabel?: string;
  band?: [number | null, number | null] | null;
  syncKey?: string;
  /** What x counts: "step" (batch steps, the default) or "epoch". */
  axis?: Axis;
}

export interface ChartHandle {
  destroy(): void;
}
