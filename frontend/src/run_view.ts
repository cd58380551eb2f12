// One run's page on the right: fetches its findings and the series behind them, then shows
// the header, problems reading the run, the run's plan ("What to do", plan_view.ts), the no-callback hint, the comparison with a baseline
// run (compare_view.ts), the chart of its worst problem, its timeline and the finding cards.
// Keeps the scroll position when the same run is refreshed.
import { fetchFindings, fetchSeries, type Finding, type Lead, type RunFindings, type RunSummary, type SeriesData, type TimelineEntry } from "./api";
import { PART_NOT_RECORDED } from "./codes";
import { CompareSection } from "./compare_view";
import { clear, h } from "./dom";
import { EvidenceCharts } from "./evidence_charts";
import { compareOnce, evidenceOverlay, findingCard, type CompareOnce, type MountCharts } from "./finding_card";
import { badge, countsText, errorText, fmtStep } from "./format";
import { noCallbackHint } from "./hints";
import { planSection } from "./plan_view";
import type { Line } from "./chart_types";
import { scalarColor } from "./theme";

const POINTS = 500;
const TIMELINE_SHOWN = 30;

/** Changes whenever what the run view shows for this run would change. */
function runKey(r: RunSummary): string {
  return [r.status, r.last_step, r.last_epoch, r.counts.critical, r.counts.warning, r.counts.info, r.has_health_data, r.errors.join("\n")].join("|");
}

function seriesToFetch(f: RunFindings): string[] {
  const available = new Set(f.series);
  const names = new Set<string>();
  for (const s of f.lead?.series ?? []) if (available.has(s)) names.add(s);
  for (const finding of f.findings) for (const s of finding.evidence.series) if (available.has(s)) names.add(s);
  return Array.from(names);
}

export class RunView {
  readonly element = h("main", { class: "th-main" });
  private readonly charts = new EvidenceCharts();
  private readonly compare = new CompareSection();
  private token = 0; // a newer load makes older ones drop their results
  private shownRun: string | null = null;
  private shownKey: string | null = null; // runKey of the run on screen

  /** Replaces the view with a one-line message ("Loading runs...", "No data yet."). */
  message(text: string): void {
    clear(this.element);
    this.element.appendChild(h("div", { class: "th-loading", text }));
  }

  /** Whether `run` is on screen (in any version). */
  shows(run: string): boolean {
    return this.shownRun === run;
  }

  /** Whether `run` is on screen as its summary now describes it. */
  isCurrent(run: RunSummary): boolean {
    return this.shownRun === run.run && this.shownKey === runKey(run);
  }

  /** The experiment's runs, for the "Compare with..." select. */
  setRuns(names: string[]): void {
    this.compare.setRuns(names);
  }

  /** Opens `run`'s comparison with `choice` (a "Compare with..." option) when the run is next loaded. */
  compareWith(run: string, choice: string): void {
    this.compare.choose(run, choice);
  }

  /** Forgets what is shown and frees the charts (the view is hidden, or going away). */
  reset(): void {
    this.charts.destroyAll();
    this.compare.reset();
    this.shownRun = null;
    this.shownKey = null;
  }

  async load(run: string, summary: RunSummary | undefined, keepScroll: boolean): Promise<void> {
    const token = ++this.token;
    const main = this.element;
    if (!keepScroll || this.shownRun !== run) {
      this.charts.destroyAll();
      clear(main);
      main.scrollTop = 0;
      main.appendChild(h("div", { class: "th-loading", text: "Loading findings for " + run + "..." }));
      this.shownRun = null;
    }
    let findings: RunFindings;
    let series: SeriesData | null = null;
    let seriesError: string | null = null;
    try {
      findings = await fetchFindings(run);
    } catch (err) {
      if (token !== this.token) return;
      this.charts.destroyAll();
      clear(main);
      main.appendChild(h("div", { class: "th-notice th-notice-error", text: "Could not load findings for " + run + ": " + errorText(err) }));
      this.shownRun = run;
      this.shownKey = null;
      return;
    }
    const names = seriesToFetch(findings);
    if (names.length > 0) {
      try {
        series = await fetchSeries(run, names, POINTS);
      } catch (err) {
        seriesError = errorText(err);
      }
    }
    if (token !== this.token) return;
    const scroll = main.scrollTop;
    this.charts.destroyAll();
    const view = this.build(findings);
    clear(main);
    main.appendChild(view.element);
    for (const mountCharts of view.mounts) mountCharts(series, seriesError);
    if (findings.status === "unreadable") this.compare.reset();
    else this.compare.show(run, keepScroll);
    main.scrollTop = keepScroll ? scroll : 0;
    this.shownRun = run;
    this.shownKey = summary ? runKey(summary) : null;
  }

  private build(f: RunFindings): { element: HTMLElement; mounts: MountCharts[] } {
    const mounts: MountCharts[] = [];
    const unreadable = f.status === "unreadable";
    const last = f.last_step !== null ? "step " + f.last_step : f.last_epoch !== null ? "epoch " + f.last_epoch : null;
    const view = h("div", { class: "th-run-view", testid: "run-view", data: { run: f.run } }, [
      h("div", { class: "th-run-header" }, [
        h("h2", { class: "th-run-title", text: f.run }),
        badge(f.status),
        h("span", { class: "th-muted", text: countsText(f.counts) || "no findings" }),
        last !== null ? h("span", { class: "th-muted", text: "last " + last }) : null,
      ]),
    ]);

    if (f.errors.length > 0) view.appendChild(errorsNotice(f.errors));
    if (f.notes.length > 0) view.appendChild(notesNotice(f.notes));
    const off = f.findings.filter((x) => x.code === PART_NOT_RECORDED);
    if (off.length > 0) view.appendChild(partsOffNotice(off));
    if (f.plan.length > 0) view.appendChild(planSection(f.plan, f.planNote));
    if (!f.has_health_data && !unreadable) view.appendChild(noCallbackHint());
    if (!unreadable) view.appendChild(this.compare.element);

    const compare = compareOnce(f.run);
    if (f.lead) {
      const { card, mount } = this.leadCard(f, f.lead, compare);
      view.appendChild(card);
      mounts.push(mount);
    }
    if (f.timeline.length) view.appendChild(timelineCard(f.timeline, f.axis));

    view.appendChild(h("h3", { class: "th-section", text: f.findings.length ? "Findings (" + f.findings.length + ")" : "Findings" }));
    if (f.findings.length === 0 && !unreadable) view.appendChild(noFindings(f.has_health_data, last));
    f.findings.forEach((finding, i) => {
      const { card, mount } = findingCard(f, finding, i, this.charts, compare);
      view.appendChild(card);
      mounts.push(mount);
    });
    return { element: view, mounts };
  }

  /** The chart of the run's worst problem (the server picks the series: report/lead_chart.py; a
   * lead worse than its baseline draws that comparison, as its card does). */
  private leadCard(f: RunFindings, lead: Lead, compare: CompareOnce): { card: HTMLElement; mount: MountCharts } {
    if (lead.baseline !== null) {
      const overlay = evidenceOverlay(lead.baseline, compare, this.charts, "run");
      const card = h("section", { class: "th-card th-layer-card", testid: "lead-chart", data: { series: lead.series.join(","), code: lead.code ?? "", baseline: lead.baseline } }, [
        h("div", { class: "th-card-head" }, [h("h3", { class: "th-card-title", text: lead.title })]),
        overlay.element,
      ]);
      return { card, mount: () => overlay.mount() };
    }
    const scalars = lead.series.filter((s) => !s.startsWith("layer_"));
    const layered = lead.series.filter((s) => s.startsWith("layer_"));
    const scalarBox = scalars.length ? h("div", { class: "th-chart" }) : null;
    const layerBoxes = layered.map((name) => ({ name, box: h("div", { class: "th-chart" }) }));
    const worst = f.findings.find((x) => x.code === lead.code) ?? null;
    const onset = worst ? (worst.step ?? worst.epoch) : null;
    const note = layered.length ? "one line per layer, dark blue = first layer ... gold = last" : "";
    const card = h("section", { class: "th-card th-layer-card", testid: "lead-chart", data: { series: lead.series.join(","), code: lead.code ?? "" } }, [
      h("div", { class: "th-card-head" }, [
        h("h3", { class: "th-card-title", text: lead.title }),
        note ? h("span", { class: "th-muted", text: note }) : null,
      ]),
      ...layerBoxes.map((b) => b.box),
      scalarBox,
    ]);
    const mount: MountCharts = (s, err) => {
      for (const { name, box } of layerBoxes)
        this.charts.layerPanel(box, s, err, name, { onset, onsetColor: null, syncKey: "run", highlight: worst?.evidence.layer ?? null });
      if (!scalarBox) return;
      if (!s) {
        scalarBox.appendChild(h("div", { class: "th-chart-empty", text: "Could not load the series: " + (err ?? "unknown error") }));
        return;
      }
      const lines: Line[] = [];
      scalars.forEach((name, k) => {
        const d = s.series[name];
        if (d) lines.push({ label: name, steps: d.steps, values: d.values, color: scalarColor(k) });
      });
      this.charts.panel(scalarBox, { lines, height: 200, onset, syncKey: "run", axis: f.axis });
    };
    return { card, mount };
  }
}

function timelineCard(entries: TimelineEntry[], axis: string): HTMLElement {
  const shown = entries.slice(0, TIMELINE_SHOWN);
  const more = entries.length - shown.length;
  return h("section", { class: "th-card th-timeline-card", testid: "timeline" }, [
    h("div", { class: "th-card-head" }, [h("h3", { class: "th-card-title", text: "Timeline" }), h("span", { class: "th-muted", text: "what the callback recorded, by " + axis })]),
    h(
      "ol",
      { class: "th-timeline" },
      shown.map((e) =>
        h("li", { data: { kind: e.kind } }, [
          h("span", { class: "th-timeline-step", text: axis + " " + fmtStep(e.step) }),
          h("span", { class: "th-timeline-kind", text: e.kind.replace(/_/g, " ") }),
          h("span", { class: "th-timeline-text", text: e.text }),
        ]),
      ),
    ),
    more > 0 ? h("div", { class: "th-muted", text: "+" + more + " more" }) : null,
  ]);
}

function errorsNotice(errors: string[]): HTMLElement {
  return h("div", { class: "th-notice th-notice-error", testid: "run-errors", attrs: { role: "status" } }, [
    h("strong", { text: errors.length === 1 ? "Problem reading this run: " : "Problems reading this run:" }),
    errors.length === 1 ? h("span", { text: errors[0] ?? "" }) : h("ul", {}, errors.map((e) => h("li", { text: e }))),
  ]);
}

/** Parts the callback turned off: what this run's charts and diagnoses lack (the info findings say why). */
function partsOffNotice(off: Finding[]): HTMLElement {
  return h("div", { class: "th-notice", testid: "parts-off", attrs: { role: "note" } }, [
    h("strong", { text: "Not recorded in this run: " }),
    h("span", { text: off.map((x) => x.title).join("; ") + ". Diagnoses that need them are unavailable (see the info findings below)." }),
  ]);
}

function notesNotice(notes: string[]): HTMLElement {
  return h("div", { class: "th-notice", testid: "run-notes", attrs: { role: "note" } }, [
    h("strong", { text: "Note on this run's files: " }),
    notes.length === 1 ? h("span", { text: notes[0] ?? "" }) : h("ul", {}, notes.map((n) => h("li", { text: n }))),
  ]);
}

function noFindings(hasHealthData: boolean, last: string | null): HTMLElement {
  const upTo = last !== null ? " up to " + last : "";
  return h("div", { class: "th-empty th-ok", testid: "empty-state", data: { kind: "no-findings" } }, [
    h("h2", { text: "No problems found" }),
    h("p", { text: hasHealthData ? "Every check passed" + upTo + "." : "The loss-curve checks found nothing" + upTo + "." }),
  ]);
}
