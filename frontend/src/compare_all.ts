// "Compare all runs": every run against one baseline (a run, or each run's best earlier run of
// its own model), one table row each, worst first as the route orders them (the same list as
// `tb-trainhealth compare LOGDIR --baseline RUN|best --json`). Every word comes from the route;
// a click on a row opens that run's comparison against the row's baseline.
import { BEST, fetchCompareAll, type CompareAll, type ComparedRun } from "./compare_api";
import { BEST_OPTION, RUN_OPTION, VERDICT_BADGE } from "./compare_view";
import { clear, h } from "./dom";
import { errorText, plural } from "./format";
import { store, stored, STORE_COMPARE_ALL } from "./storage";

export class CompareAllView {
  readonly element = h("main", { class: "th-main", testid: "compare-all", attrs: { hidden: "" } });
  // Named by its heading, a <label>: getByLabel("Compare all runs with…").
  private readonly select = h("select", { class: "th-compare-select", testid: "compare-all-baseline", attrs: { id: "th-compare-all-with" } });
  private readonly body = h("div", { class: "th-compare-all-body" });
  private names: string[] = [];
  private token = 0; // a newer load makes older ones drop their results

  /** `onOpen(run, choice)`: a row was clicked; `choice` is the run page's "Compare with..." option to show. */
  constructor(private readonly onOpen: (run: string, choice: string) => void) {
    this.element.appendChild(
      h("section", { class: "th-card th-compare" }, [
        h("div", { class: "th-card-head" }, [
          h("h3", { class: "th-card-title" }, [h("label", { text: "Compare all runs with\u2026", attrs: { for: "th-compare-all-with" } })]),
          this.select,
          h("span", { class: "th-muted th-compare-hint", text: "worst first; click a run to see its comparison" }),
        ]),
        this.body,
      ]),
    );
    this.select.addEventListener("change", () => {
      store(STORE_COMPARE_ALL, this.select.value);
      void this.load(true);
    });
  }

  /** Every run of the experiment, for the baseline select. */
  setRuns(names: string[]): void {
    if (names.length === this.names.length && names.every((n, i) => n === this.names[i])) return;
    this.names = names;
    this.fillOptions(this.select.value || (stored(STORE_COMPARE_ALL) ?? BEST_OPTION));
  }

  /** Shows the table, fetched anew; `replace` clears the old one first (else it is swapped when the new one comes). */
  show(replace: boolean): void {
    this.element.hidden = false;
    void this.load(replace);
  }

  hide(): void {
    this.token++;
    this.element.hidden = true;
  }

  private fillOptions(choice: string): void {
    const runs = [...this.names].sort();
    clear(this.select);
    this.select.append(
      h("option", { text: "the best earlier run of each run's model", attrs: { value: BEST_OPTION } }),
      ...runs.map((n) => h("option", { text: n, attrs: { value: RUN_OPTION + n } })),
    );
    this.select.value = runs.some((n) => RUN_OPTION + n === choice) ? choice : BEST_OPTION;
  }

  private async load(replace: boolean): Promise<void> {
    const token = ++this.token;
    const choice = this.select.value || BEST_OPTION;
    const baseline = choice === BEST_OPTION ? BEST : choice.slice(RUN_OPTION.length);
    if (replace) {
      clear(this.body);
      this.body.appendChild(h("div", { class: "th-loading", text: "Comparing every run with " + (choice === BEST_OPTION ? "its best earlier run" : baseline) + "..." }));
    }
    let answer: CompareAll;
    try {
      answer = await fetchCompareAll(baseline);
    } catch (err) {
      if (token !== this.token) return;
      clear(this.body);
      this.body.appendChild(h("div", { class: "th-notice th-notice-error", testid: "compare-all-error", text: "Could not compare the runs: " + errorText(err) }));
      return;
    }
    if (token !== this.token) return;
    clear(this.body);
    if (answer.pending.length) {
      const text = plural(answer.pending.length, "run") + " still being diagnosed, not in the table yet: " + answer.pending.join(", ");
      this.body.appendChild(h("p", { class: "th-muted", testid: "compare-all-pending", text }));
    }
    if (answer.comparisons.length === 0) {
      this.body.appendChild(h("p", { class: "th-muted", text: "No run to compare yet." }));
      return;
    }
    this.body.appendChild(this.table(answer.comparisons, choice));
  }

  private table(rows: ComparedRun[], choice: string): HTMLElement {
    const head = ["verdict", "run", "baseline", "why", "likely cause"].map((t) => h("th", { text: t, attrs: { scope: "col" } }));
    return h("table", { class: "th-facts th-compare-rows th-compare-all", testid: "compare-all-table" }, [
      h("thead", {}, [h("tr", {}, head)]),
      h("tbody", {}, rows.map((r) => this.row(r, choice))),
    ]);
  }

  private row(r: ComparedRun, choice: string): HTMLElement {
    // The run page compares with this row's baseline; a row without one shows why there (its "best" pick).
    const open = r.baseline !== null ? RUN_OPTION + r.baseline : choice;
    const tr = h("tr", { class: "th-compare-all-row", data: { run: r.run, verdict: r.verdict }, attrs: { tabindex: "0", title: "Open " + r.run + "'s comparison" } }, [
      h("td", { class: "th-compare-all-verdict" }, [h("span", { class: "th-badge th-badge-" + VERDICT_BADGE[r.verdict], text: r.verdict })]),
      h("th", { class: "th-compare-all-run", text: r.run, attrs: { scope: "row" } }),
      h("td", { class: "th-compare-all-baseline", title: r.ruleWhy }, [
        h("span", { text: r.baseline ?? "\u2014" }),
        h("span", { class: "th-muted th-compare-all-rule", text: r.rule }),
      ]),
      h("td", { class: "th-compare-all-why", title: r.why }, [h("span", { text: r.why })]),
      h("td", { class: "th-compare-all-cause", text: r.likelyCause ?? "" }),
    ]);
    tr.addEventListener("click", () => this.onOpen(r.run, open));
    tr.addEventListener("keydown", (ev) => {
      if (ev.key !== "Enter" && ev.key !== " ") return;
      ev.preventDefault();
      this.onOpen(r.run, open);
    });
    return tr;
  }
}
