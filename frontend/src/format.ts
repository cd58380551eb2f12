// How values read on screen: numbers and steps (axes, legends, labels), counts of
// findings, error messages, and the severity / status badge.
import type { Counts, Severity, Status } from "./api";
import { h } from "./dom";

/** Compact number for axis ticks and legends: 0.0123, 4.56, 1.2e5, 3e-7. */
export function fmtNum(v: number, digits = 3): string {
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) {
    const [mant = "", exp = ""] = v.toExponential(digits - 1).split("e");
    return mant.replace(/\.?0+$/, "") + "e" + exp.replace("+", "");
  }
  return String(Number(v.toPrecision(digits)));
}

/** Step number for axes and labels: 950, 12.5k, 1.2M. */
export function fmtStep(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return String(Number((v / 1e6).toPrecision(3))) + "M";
  if (a >= 1e4) return String(Number((v / 1e3).toPrecision(3))) + "k";
  return String(Math.round(v));
}

export function plural(n: number, word: string): string {
  return n + " " + word + (n === 1 ? "" : "s");
}

/** "2 critical, 1 info": the non-zero counts, worst first; "" when there are none. */
export function countsText(c: Counts): string {
  const parts: string[] = [];
  if (c.critical) parts.push(c.critical + " critical");
  if (c.warning) parts.push(c.warning + " warning");
  if (c.info) parts.push(c.info + " info");
  return parts.join(", ");
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function badge(level: Severity | Status, extraClass = ""): HTMLElement {
  return h("span", { class: "th-badge th-badge-" + level + (extraClass ? " " + extraClass : ""), text: level });
}
