// When the tab asks the server again: every 30 s while the tab is visible, at once when it
// becomes visible again, every 2 s while the server is still diagnosing some run, and on
// demand (the Refresh button). Never two polls at the same time.

const POLL_MS = 30_000;
const PENDING_POLL_MS = 2_000; // while the server is still diagnosing some runs

/**
 * `tick(force)` does one poll and resolves to true when the server is still busy (poll
 * again soon); `onBusy` is told when a poll starts and ends.
 */
export class Poller {
  private busy = false;
  private timer: number | undefined;

  constructor(
    private readonly tick: (force: boolean) => Promise<boolean>,
    private readonly onBusy: (busy: boolean) => void,
  ) {}

  start(): void {
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") void this.poll(false);
    });
    this.timer = window.setInterval(() => this.pollIfVisible(), POLL_MS);
    void this.poll(false);
  }

  async poll(force: boolean): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    this.onBusy(true);
    try {
      if (await this.tick(force)) window.setTimeout(() => this.pollIfVisible(), PENDING_POLL_MS);
    } finally {
      this.busy = false;
      this.onBusy(false);
    }
  }

  stop(): void {
    window.clearInterval(this.timer);
  }

  private pollIfVisible(): void {
    if (document.visibilityState !== "hidden") void this.poll(false);
  }
}
