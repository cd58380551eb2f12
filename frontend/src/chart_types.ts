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

/** Lower and upper edge of a shaded band, at each of `steps`. */
export interface YBand {
  steps: number[];
  low: (number | null)[];
  high: (number | null)[];
}

export interface PanelSpec {
  lines: Line[];
  height: number;
  onset?: number | null;
  onsetColor?: string;
  /** The word before the onset's step on the chart: "onset" unless given ("parted"). */
  onsetLabel?: string;
  band?: [number | null, number | null] | null;
  /** A band around a line, shaded under the lines: the baseline's noise band in a comparison. */
  noiseBand?: YBand | null;
  syncKey?: string;
  /** What x counts: "step" (batch steps, the default) or "epoch". */
  axis?: Axis;
}

export interface ChartHandle {
  destroy(): void;
}
