// Colours for the TypeScript side. Every colour is defined once, as a CSS variable in
// style.css (:root); charts read them here instead of carrying their own literals.
import type { Severity, Status } from "./api";

/** The value of a CSS variable on :root, trimmed; "" when it is not defined. */
export function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** A colour from a CSS variable (black if style.css somehow lacks it). */
export function cssColor(name: string): string {
  return cssVar(name) || "#000";
}

/** The colours --prefix-1, --prefix-2, ... up to the first one not defined. */
function cssColorList(prefix: string): string[] {
  const out: string[] = [];
  for (let i = 1; ; i++) {
    const v = cssVar(prefix + i);
    if (!v) return out;
    out.push(v);
  }
}

export function severityColor(level: Severity | Status): string {
  return cssColor("--th-" + level);
}

/** Colour of the i-th scalar line of a chart. */
export function scalarColor(i: number): string {
  const colors = cssColorList("--th-series-");
  return colors[i % colors.length] ?? cssColor("--th-series-1");
}

/** "#rgb" / "#rrggbb" / "rgb(r, g, b)" as [r, g, b]; black when unreadable. */
function parseRgb(color: string): [number, number, number] {
  const hex = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(color)?.[1];
  if (hex) {
    const full = hex.length === 3 ? hex.replace(/./g, (c) => c + c) : hex;
    return [0, 2, 4].map((k) => parseInt(full.slice(k, k + 2), 16)) as [number, number, number];
  }
  const parts = /^rgba?\(([^)]*)\)$/i.exec(color)?.[1]?.split(/[\s,/]+/).map(Number) ?? [];
  return [parts[0] ?? 0, parts[1] ?? 0, parts[2] ?? 0];
}

/** Colours for n layers, by depth: first (input side) dark blue ... last (output side) gold. */
export function depthColors(n: number): string[] {
  const stops = cssColorList("--th-depth-");
  if (n <= 1) return n === 1 ? [stops[1] ?? cssColor("--th-depth-1")] : [];
  const rgb = stops.map(parseRgb);
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const t = (i / (n - 1)) * (rgb.length - 1);
    const k = Math.min(Math.floor(t), rgb.length - 2);
    const f = t - k;
    const a = rgb[k] ?? [0, 0, 0];
    const b = rgb[k + 1] ?? a;
    const c = [0, 1, 2].map((j) => Math.round((a[j] ?? 0) + ((b[j] ?? 0) - (a[j] ?? 0)) * f));
    out.push("rgb(" + c.join(",") + ")");
  }
  return out;
}

/** TensorBoard's own setting (its page's body.dark-mode), where the iframe can see its parent. */
function tensorBoardDark(): boolean | null {
  try {
    if (window.parent === window) return null;
    const body = window.parent.document.body;
    return body ? body.classList.contains("dark-mode") : null;
  } catch {
    return null; // another origin: fall back to the system's preference
  }
}

function systemDark(): boolean {
  return typeof matchMedia === "function" && matchMedia("(prefers-color-scheme: dark)").matches;
}

/** Sets :root's data-theme from TensorBoard's dark mode (else the system's) and keeps it in step;
 * `onChange` redraws what read colours at draw time (the charts). Returns a stop function. */
export function followTheme(onChange: () => void): () => void {
  const apply = (): void => {
    const dark = tensorBoardDark() ?? systemDark();
    const theme = dark ? "dark" : "light";
    if (document.documentElement.dataset["theme"] === theme) return;
    document.documentElement.dataset["theme"] = theme;
    onChange();
  };
  document.documentElement.dataset["theme"] = (tensorBoardDark() ?? systemDark()) ? "dark" : "light";
  const media = typeof matchMedia === "function" ? matchMedia("(prefers-color-scheme: dark)") : null;
  media?.addEventListener("change", apply);
  let observer: MutationObserver | null = null;
  try {
    if (window.parent !== window && window.parent.document.body)
      observer = new MutationObserver(apply);
    observer?.observe(window.parent.document.body, { attributes: true, attributeFilter: ["class"] });
  } catch {
    observer = null;
  }
  return () => {
    media?.removeEventListener("change", apply);
    observer?.disconnect();
  };
}
