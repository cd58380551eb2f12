// The plugin's JSON API. Every URL is relative: the iframe's <base href> points at the
// plugin's route prefix, so --path_prefix keeps working. Every value from the server is
// data: parsed defensively here, rendered with textContent elsewhere.

export type Severity = "info" | "warning" | "critical";
/** The server's status of a run (run_report.py decides it, never the tab): "unreadable", nothing of
 * the run could be read (its errors say why); "pending", the server is still diagnosing it. */
// "unknown": a status this tab does not know (a newer server's): shown as such, never as "ok".
export type Status = "critical" | "warning" | "ok" | "unreadable" | "pending" | "unknown";
/** What a run's positions count: batch steps, or epochs (from 1) where it only has per-epoch data. */
export type Axis = "step" | "epoch";

export interface Counts {
  critical: number;
  warning: number;
  info: number;
}

/** A run's line in the runs list (the runs route: a summary of the run's report). */
export interface RunSummary {
  run: string;
  status: Status;
  counts: Counts;
  has_health_data: boolean;
  last_step: number | null;
  last_epoch: number | null;
  errors: string[];
}

/** A finding's own fix: only the compare route's findings carry them (the worse_than_baseline
 * card's "set it back"); a run's page tells one plan instead (PlanStep). */
export interface Fix {
  text: string;
  code: string | null;
}

/** What a trial of a plan step measured on the run's own data (advice/plan.py). */
export interface Trial {
  /** "helped", "same", "worse" or "failed" (a newer server's word is kept as given). */
  verdict: string;
  label: string;
  error: number | null;
}

/** One step of the run's plan: what to do, the code to paste, which findings it answers, and
 * what a trial measured of it (`tried` false: not tried on the run's data). */
export interface PlanStep {
  text: string;
  code: string | null;
  answers: string[];
  tried: boolean;
  trial: Trial | null;
  /** The trial in one sentence, or null. */
  measured: string | null;
}

/** A measured value behind a finding that has no series to plot (an OOM, a crash, a lint check). */
export interface Fact {
  label: string;
  value: string;
}

export interface Evidence {
  series: string[];
  start_step: number | null;
  end_step: number | null;
  layer: string | null;
  check: string | null;
  facts: Fact[];
}

/** The chart at the top of a run's page: the series that show its worst finding. */
export interface Lead {
  title: string;
  series: string[];
  code: string | null;
  /** Where the lead is worse_than_baseline against a run here: that run; the chart draws the comparison. */
  baseline: string | null;
}

/** One discrete event of the run (lint, OOM retry, first NaN, crash, ...), in step order. */
export interface TimelineEntry {
  step: number;
  kind: string;
  text: string;
}

export interface Finding {
  code: string;
  severity: Severity;
  step: number | null;
  epoch: number | null;
  title: string;
  detail: string;
  evidence: Evidence;
  /** The plan's steps (from 1) that answer it. */
  plan_steps: number[];
  /** What a trial said against its usual fix, or null. */
  trial_note: string | null;
}

/** A run's page (the findings route: the run's report in full, and what can be drawn of it). */
export interface RunFindings extends RunSummary {
  axis: Axis;
  /** What to do about the run, at most three steps, the root cause's first. */
  plan: PlanStep[];
  /** Why the plan's changes were not tried on the run's data (skipped, or out of time), or null. */
  planNote: string | null;
  layers: string[];
  series: string[];
  findings: Finding[];
  lead: Lead | null;
  timeline: TimelineEntry[];
  /** What a reader may want to know of the files, none of it an error (a truncated copy, a file still written). */
  notes: string[];
  /** The run of this logdir its worse_than_baseline finding was judged against (its card overlays
   * both runs' curves from the compare route); null without one, or where it is not a run here. */
  baseline_run: string | null;
}

export interface ScalarSeries {
  steps: number[];
  values: (number | null)[];
}

export interface LayerSeries {
  names: string[];
  steps: number[];
  values: (number | null)[][];
}

export interface SeriesData {
  series: Record<string, ScalarSeries>;
  layers: Record<string, LayerSeries>;
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function obj(v: unknown): Obj {
  return isObj(v) ? v : {};
}

export function str(v: unknown, fallback = ""): string {
  return typeof v === "string" ? v : fallback;
}

export function strOrNull(v: unknown): string | null {
  return typeof v === "string" ? v : null;
}

export function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

export function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

export function strs(v: unknown): string[] {
  return arr(v).filter((x): x is string => typeof x === "string");
}

function status(v: unknown): Status {
  return v === "critical" || v === "warning" || v === "ok" || v === "unreadable" || v === "pending" ? v : "unknown";
}

function severity(v: unknown): Severity {
  return v === "critical" || v === "warning" ? v : "info";
}

export async function getJson(url: string): Promise<unknown> {
  let resp: Response;
  try {
    resp = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store", credentials: "same-origin" });
  } catch (err) {
    throw new ApiError("Could not reach TensorBoard: " + String(err), 0);
  }
  const text = await resp.text();
  let body: unknown = undefined;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (!resp.ok) {
    const message = isObj(body) && typeof body["error"] === "string" ? body["error"] : "HTTP " + resp.status;
    throw new ApiError(message, resp.status);
  }
  if (body === undefined) throw new ApiError("TensorBoard sent a response that is not JSON", resp.status);
  return body;
}

function parseRun(o: Obj, fallbackName = ""): RunSummary {
  const c = obj(o["counts"]);
  return {
    run: str(o["run"], fallbackName),
    status: status(o["status"]),
    counts: { critical: num(c["critical"]) ?? 0, warning: num(c["warning"]) ?? 0, info: num(c["info"]) ?? 0 },
    has_health_data: o["has_health_data"] === true,
    last_step: num(o["last_step"]),
    last_epoch: num(o["last_epoch"]),
    errors: strs(o["errors"]),
  };
}

export function parseFinding(v: unknown): Finding {
  const o = obj(v);
  const e = obj(o["evidence"]);
  return {
    code: str(o["code"], "unknown"),
    severity: severity(o["severity"]),
    step: num(o["step"]),
    epoch: num(o["epoch"]),
    title: str(o["title"]),
    detail: str(o["detail"]),
    evidence: {
      series: strs(e["series"]),
      start_step: num(e["start_step"]),
      end_step: num(e["end_step"]),
      layer: strOrNull(e["layer"]),
      check: strOrNull(e["check"]),
      facts: arr(e["facts"]).map((x) => {
        const fo = obj(x);
        return { label: str(fo["label"]), value: str(fo["value"]) };
      }),
    },
    plan_steps: arr(o["plan_steps"]).flatMap((x) => {
      const n = num(x);
      return n !== null && Number.isInteger(n) && n >= 1 ? [n] : [];
    }),
    trial_note: strOrNull(o["trial_note"]),
  };
}

/** A finding's own fixes (the compare route's findings keep them); [] where it has none. */
export function parseFixes(v: unknown): Fix[] {
  return arr(obj(v)["fixes"]).map((f) => {
    const fo = obj(f);
    return { text: str(fo["text"]), code: strOrNull(fo["code"]) };
  });
}

export function parsePlan(v: unknown): PlanStep[] {
  // Every step is kept, in order: findings name them by number (plan_steps).
  return arr(v).map((x) => {
    const o = obj(x);
    const t = o["trial"];
    const trial = isObj(t) ? { verdict: str(t["verdict"]), label: str(t["label"]), error: num(t["error"]) } : null;
    return {
      text: str(o["text"]),
      code: strOrNull(o["code"]),
      answers: strs(o["answers"]),
      tried: o["tried"] === true || trial !== null,
      trial,
      measured: strOrNull(o["measured"]),
    };
  });
}

function parseLead(v: unknown): Lead | null {
  if (!isObj(v)) return null;
  const series = strs(v["series"]);
  return series.length ? { title: str(v["title"]), series, code: strOrNull(v["code"]), baseline: strOrNull(v["baseline"]) } : null;
}

export function numsOrNull(v: unknown): (number | null)[] {
  return arr(v).map(num);
}

/** Why the logdir shows nothing at all, as the server says it; `kind` (route_answers.py): "missing",
 * "not_a_folder" (a local path) or "bucket_unreadable" (nothing here reads its scheme); with runs
 * shown, "listing_failing" (the bucket lists no more: the runs are as last read). */
export interface LogdirProblem {
  kind: string;
  text: string;
}

export interface RunsAnswer {
  runs: RunSummary[];
  summary: string; // the runs counted by status, as the server (and the CLI) says it
  logdirProblem: LogdirProblem | null;
}

export async function fetchRuns(): Promise<RunsAnswer> {
  const body = obj(await getJson("runs"));
  const runs = arr(body["runs"])
    .map((r) => parseRun(obj(r)))
    .filter((r) => r.run !== "");
  const text = strOrNull(body["logdir_problem"]);
  return {
    runs,
    summary: str(body["summary"]),
    logdirProblem: text === null ? null : { kind: str(body["logdir_problem_kind"]), text },
  };
}

export async function fetchFindings(run: string): Promise<RunFindings> {
  const o = obj(await getJson("findings?run=" + encodeURIComponent(run)));
  return {
    ...parseRun(o, run),
    axis: o["axis"] === "epoch" ? "epoch" : "step",
    plan: parsePlan(o["plan"]),
    planNote: typeof o["plan_note"] === "string" ? o["plan_note"] : null,
    layers: strs(o["layers"]),
    series: strs(o["series"]),
    findings: arr(o["findings"]).map(parseFinding),
    lead: parseLead(o["lead"]),
    timeline: arr(o["timeline"]).flatMap((x) => {
      const t = obj(x);
      const step = num(t["step"]);
      return step === null ? [] : [{ step, kind: str(t["kind"]), text: str(t["text"]) }];
    }),
    notes: strs(o["notes"]),
    baseline_run: strOrNull(o["baseline_run"]),
  };
}

export async function fetchSeries(run: string, names: string[], points = 500): Promise<SeriesData> {
  const url =
    "series?run=" +
    encodeURIComponent(run) +
    "&names=" +
    names.map(encodeURIComponent).join(",") +
    "&points=" +
    String(points);
  const o = obj(await getJson(url));
  // Null-prototype maps: a series named "__proto__" stays a plain key.
  const out: SeriesData = { series: Object.create(null) as SeriesData["series"], layers: Object.create(null) as SeriesData["layers"] };
  for (const [name, raw] of Object.entries(obj(o["series"]))) {
    const s = obj(raw);
    out.series[name] = { steps: arr(s["steps"]).map((x) => num(x) ?? NaN), values: numsOrNull(s["values"]) };
  }
  for (const [name, raw] of Object.entries(obj(o["layers"]))) {
    const s = obj(raw);
    out.layers[name] = {
      names: strs(s["names"]),
      steps: arr(s["steps"]).map((x) => num(x) ?? NaN),
      values: arr(s["values"]).map(numsOrNull),
    };
  }
  return out;
}
