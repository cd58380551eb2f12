// Remembers the selected run, the run filter, each run's chosen baseline and the "Compare all
// runs" table (shown or not, and its baseline) across reloads of the tab's iframe
// (sessionStorage; silently does nothing where storage is unavailable).

export const STORE_SELECTED = "tb-trainhealth.selected";
export const STORE_FILTER = "tb-trainhealth.filter";
/** The baseline chosen in "Compare all runs", and whether that table is on screen. */
export const STORE_COMPARE_ALL = "tb-trainhealth.compare-all";
export const STORE_SHOWING_ALL = "tb-trainhealth.showing-all";
/** Followed by a run's name: the baseline chosen for that run ("Compare with..."). */
export const STORE_BASELINE = "tb-trainhealth.baseline.";

export function stored(key: string): string | null {
  try {
    return window.sessionStorage.getItem(key);
  } catch {
    return null;
  }
}

export function store(key: string, value: string): void {
  try {
    window.sessionStorage.setItem(key, value);
  } catch {
    // storage unavailable (sandboxed iframe, private mode): selection just isn't remembered
  }
}
