// The compare route's answer (compare?run=&baseline=): the run against a baseline as
// `tb-trainhealth compare --json` gives it, plus what the tab draws beside it (both runs'
// curves on one x, per-layer gradient-norm ratios). Parsed defensively like api.ts: every
// value is data, rendered as text.
import { arr, getJson, num, numsOrNull, obj, parseFinding, parseFixes, str, strOrNull, strs, type Axis, type Finding, type Fix, type ScalarSeries } from "./api";

export type Verdict = "worse" | "same" | "better" | "unknown";
/** A recorded setting's value: a JSON scalar or a short list of numbers; null is "not set". */
export type SettingValue = string | number | boolean | null | number[];

/** The `baseline` the route reads as "the best earlier run of this model". */
export const BEST = "best";

export interface Change {
  setting: string;
  baseline: SettingValue;
  run: SettingValue;
}

/** A health signal of one layer that moved beyond what seeds move it; `text` says it (the route spells it). */
export interface SignalChange {
  signal: string;
  layer: string;
  text: string;
}

/** A finding of the comparison: the compare route's findings keep their own fixes. */
export interface CompareFinding extends Finding {
  fixes: Fix[];
}

export interface MetricRow {
  name: string;
  baseline: number | null;
  run: number | null;
}

export interface LayerRatio {
  layer: string;
  baseline_layer: string | null;
  run: number | null;
  baseline: number | null;
  ratio: number | null;
}

/** The baseline's noise band around one of its curves: where the run would be were it the baseline again. */
export interface NoiseBand {
  steps: number[];
  low: (number | null)[];
  high: (number | null)[];
  /** What the band is, in words (shown under the chart). */
  what: string;
}

export interface CompareCurves {
  /** What x counts: the runs' steps (or epochs), or epoch numbers where a step differs between them. */
  x: Axis;
  /** The training-loss series drawn: "loss" (per step) or "epoch_loss". */
  loss: string;
  parted_at: number | null;
  run: Record<string, ScalarSeries>;
  baseline: Record<string, ScalarSeries>;
  bands: Record<string, NoiseBand>;
  /** The series of the metric the verdict was judged on, or null. */
  deciding: string | null;
  /** The panels the comparison draws, in order; `evidence`: those the worse_than_baseline card draws. */
  panels: string[];
  evidence: string[];
}

export interface Comparison {
  run: string;
  /** null: "best" found no earlier run of the same model (`why` says so). */
  baseline: string | null;
  picked: boolean;
  verdict: Verdict;
  why: string;
  /** What the run's steps count (parted_at_step is one of them). */
  axis: Axis;
  changes: Change[];
  /** Largest first; empty where no signal moved. */
  signal_changes: SignalChange[];
  parted_at_step: number | null;
  metrics: MetricRow[];
  /** The run's findings as the comparison records them: with their own fixes (the worse card's set-back). */
  findings: CompareFinding[];
  curves: CompareCurves | null;
  layer_grad_ratio: LayerRatio[];
}

function verdict(v: unknown): Verdict {
  return v === "worse" || v === "same" || v === "better" ? v : "unknown";
}

function settingValue(v: unknown): SettingValue {
  if (typeof v === "string" || typeof v === "boolean") return v;
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === "number" && Number.isFinite(x));
  return num(v);
}

function seriesMap(v: unknown): Record<string, ScalarSeries> {
  // Null-prototype map: a series named "__proto__" stays a plain key.
  const out = Object.create(null) as Record<string, ScalarSeries>;
  for (const [name, raw] of Object.entries(obj(v))) {
    const s = obj(raw);
    out[name] = { steps: arr(s["steps"]).map((x) => num(x) ?? NaN), values: numsOrNull(s["values"]) };
  }
  return out;
}

function bandMap(v: unknown): Record<string, NoiseBand> {
  const out = Object.create(null) as Record<string, NoiseBand>;
  for (const [name, raw] of Object.entries(obj(v))) {
    const b = obj(raw);
    out[name] = { steps: arr(b["steps"]).map((x) => num(x) ?? NaN), low: numsOrNull(b["low"]), high: numsOrNull(b["high"]), what: str(b["what"]) };
  }
  return out;
}

function parseCurves(v: unknown): CompareCurves | null {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return null;
  const o = obj(v);
  return {
    x: o["x"] === "epoch" ? "epoch" : "step",
    loss: str(o["loss"], "loss"),
    parted_at: num(o["parted_at"]),
    run: seriesMap(o["run"]),
    baseline: seriesMap(o["baseline"]),
    bands: bandMap(o["bands"]),
    deciding: strOrNull(o["deciding"]),
    panels: strs(o["panels"]),
    evidence: strs(o["evidence"]),
  };
}

export async function fetchCompare(run: string, baseline: string, points = 500): Promise<Comparison> {
  const url = "compare?run=" + encodeURIComponent(run) + "&baseline=" + encodeURIComponent(baseline) + "&points=" + String(points);
  const o = obj(await getJson(url));
  return {
    run: str(o["run"], run),
    baseline: strOrNull(o["baseline"]),
    picked: o["picked"] === true,
    verdict: verdict(o["verdict"]),
    why: str(o["why"]),
    axis: o["axis"] === "epoch" ? "epoch" : "step",
    changes: arr(o["changes"]).map((x) => {
      const c = obj(x);
      return { setting: str(c["setting"]), baseline: settingValue(c["baseline"]), run: settingValue(c["run"]) };
    }),
    signal_changes: arr(o["signal_changes"]).map((x) => {
      const c = obj(x);
      return { signal: str(c["signal"]), layer: str(c["layer"]), text: str(c["text"]) };
    }),
    parted_at_step: num(o["parted_at_step"]),
    metrics: arr(o["metrics"]).map((x) => {
      const m = obj(x);
      return { name: str(m["name"]), baseline: num(m["baseline"]), run: num(m["run"]) };
    }),
    findings: arr(o["findings"]).map((x) => ({ ...parseFinding(x), fixes: parseFixes(x) })),
    curves: parseCurves(o["curves"]),
    layer_grad_ratio: arr(o["layer_grad_ratio"]).map((x) => {
      const r = obj(x);
      return { layer: str(r["layer"]), baseline_layer: strOrNull(r["baseline_layer"]), run: num(r["run"]), baseline: num(r["baseline"]), ratio: num(r["ratio"]) };
    }),
  };
}

/** One row of "Compare all runs": a run against its baseline, in the route's words. */
export interface ComparedRun {
  run: string;
  /** null: no baseline was found (`why` says why). */
  baseline: string | null;
  verdict: Verdict;
  why: string;
  /** How the baseline was chosen (`named`, `marked_good`, `no_warnings`, `best`, `none`), and that in words. */
  rule: string;
  ruleWhy: string;
  /** The first changed setting, as the CLI's line says it, where the run is worse; else null. */
  likelyCause: string | null;
}

export interface CompareAll {
  /** Worst first, as the route orders them. */
  comparisons: ComparedRun[];
  /** Runs still being diagnosed: not in `comparisons` yet. */
  pending: string[];
}

/** compare_all?baseline=: every run against a run, or (BEST) each against the best earlier run of its model. */
export async function fetchCompareAll(baseline: string): Promise<CompareAll> {
  const o = obj(await getJson("compare_all?baseline=" + encodeURIComponent(baseline)));
  return {
    comparisons: arr(o["comparisons"]).map((x) => {
      const c = obj(x);
      const choice = obj(c["baseline_choice"]);
      return {
        run: str(c["run"]),
        baseline: strOrNull(c["baseline"]),
        verdict: verdict(c["verdict"]),
        why: str(c["why"]),
        rule: str(choice["rule"]),
        ruleWhy: str(choice["why"]),
        likelyCause: strOrNull(c["likely_cause"]),
      };
    }),
    pending: strs(o["pending"]),
  };
}
