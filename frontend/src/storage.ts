// Remembers the selected run, the run filter and each run's chosen baseline across reloads
// of the tab's iframe (sessionStorage; silently does nothing where storage is unavailable).

export const STORE_SELECTED = "tb-trainhealth.selected";
export const STORE_FILTER = "tb-trainhealth.filter";
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
