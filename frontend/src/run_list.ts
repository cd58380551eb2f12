// The runs list on the left: one button per run (status badge, name, last step, count of
// findings), worst first as the server orders them; the filter box; arrow-key navigation.
import type { RunSummary } from "./api";
import { append, clear, h } from "./dom";
import { badge, countsText, fmtStep, plural } from "./format";
import { store, stored, STORE_FILTER } from "./storage";

function totalFindings(r: RunSummary): number {
  return r.counts.critical + r.counts.warning + r.counts.info;
}

export class RunList {
  private runs: RunSummary[] = [];
  private filter = stored(STORE_FILTER) ?? "";
  private items = new Map<string, HTMLElement>();

  private readonly filterInput = h("input", {
    class: "th-filter",
    testid: "run-filter",
    attrs: { type: "search", placeholder: "Filter runs", "aria-label": "Filter runs by name", spellcheck: "false", autocomplete: "off" },
  });
  private readonly list = h("ul", { class: "th-run-list", testid: "run-list", attrs: { "aria-label": "Runs, worst first" } });
  private readonly noMatch = h("div", { class: "th-nomatch", text: "No runs match the filter.", attrs: { hidden: "" } });
  readonly element = h("aside", { class: "th-sidebar" }, [
    h("div", { class: "th-sidebar-head" }, [this.filterInput]),
    this.noMatch,
    this.list,
  ]);

  /** `onSelect` is called with the run's name when its button is clicked. */
  constructor(private readonly onSelect: (run: string) => void) {
    this.filterInput.value = this.filter;
    this.filterInput.addEventListener("input", () => {
      this.filter = this.filterInput.value;
      store(STORE_FILTER, this.filter);
      this.applyFilter();
    });
    this.list.addEventListener("keydown", (ev) => this.onKey(ev));
  }

  /** Shows `runs` (the server's order); an empty list leaves the old buttons alone. */
  update(runs: RunSummary[]): void {
    this.runs = runs;
    if (runs.length === 0) return;
    const seen = new Set<string>();
    for (const r of runs) {
      seen.add(r.run);
      let li = this.items.get(r.run);
      if (!li) {
        li = this.makeItem(r.run);
        this.items.set(r.run, li);
      }
      this.fillItem(li, r);
    }
    for (const [name, li] of this.items) {
      if (!seen.has(name)) {
        li.remove();
        this.items.delete(name);
      }
    }
    this.applyFilter();
  }

  /** Highlights the selected run's button (none for null). */
  markSelected(selected: string | null): void {
    for (const [name, li] of this.items) {
      const button = li.firstElementChild as HTMLElement;
      const on = name === selected;
      button.classList.toggle("th-selected", on);
      button.setAttribute("aria-current", on ? "true" : "false");
    }
  }

  private makeItem(run: string): HTMLElement {
    const button = h("button", {
      class: "th-run",
      testid: "run-item",
      data: { run },
      attrs: { type: "button" },
    });
    button.addEventListener("click", () => this.onSelect(run));
    return h("li", { class: "th-run-li" }, [button]);
  }

  private fillItem(li: HTMLElement, r: RunSummary): void {
    const button = li.firstElementChild as HTMLButtonElement;
    button.setAttribute("data-status", r.status);
    const total = totalFindings(r);
    button.title = r.run + "\n" + (r.status === "pending" ? "being diagnosed" : countsText(r.counts) || "no findings");
    const meta: string[] = [];
    if (r.last_step !== null) meta.push("step " + fmtStep(r.last_step));
    else if (r.last_epoch !== null) meta.push("epoch " + fmtStep(r.last_epoch));
    if (!r.has_health_data && r.status !== "pending" && r.status !== "unreadable") meta.push("no HealthCallback");
    if (r.errors.length) meta.push(plural(r.errors.length, "error"));
    clear(button);
    append(button, [
      badge(r.status, "th-badge-small"),
      h("span", { class: "th-run-text" }, [
        h("span", { class: "th-run-name", text: r.run }),
        h("span", { class: "th-run-meta", text: meta.join(" \u00b7 ") }),
      ]),
      h("span", {
        class: "th-count" + (total === 0 ? " th-count-zero" : ""),
        text: String(total),
        title: plural(total, "finding"),
        attrs: { "aria-label": plural(total, "finding") },
      }),
    ]);
  }

  /** Shows the matching runs in server order; the others are detached, not just hidden. */
  private applyFilter(): void {
    const q = this.filter.trim().toLowerCase();
    const shown = this.runs
      .map((r) => this.items.get(r.run))
      .filter((li, i): li is HTMLElement => li !== undefined && (q === "" || (this.runs[i]?.run ?? "").toLowerCase().includes(q)));
    const keep = new Set(shown);
    for (const child of Array.from(this.list.children)) if (!keep.has(child as HTMLElement)) child.remove();
    shown.forEach((li, i) => {
      if (this.list.children[i] !== li) this.list.insertBefore(li, this.list.children[i] ?? null);
    });
    this.noMatch.hidden = shown.length > 0 || this.items.size === 0;
  }

  private onKey(ev: KeyboardEvent): void {
    if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp") return;
    const buttons = Array.from(this.list.querySelectorAll<HTMLButtonElement>("li > button"));
    const i = buttons.findIndex((b) => b === document.activeElement);
    if (i < 0) return;
    const next = buttons[ev.key === "ArrowDown" ? i + 1 : i - 1];
    if (next) {
      ev.preventDefault();
      next.focus();
      next.click();
    }
  }
}
