// The progress strip, always visible: this annotator's answers, queries waiting, the trainer's
// round and env steps. Polls /api/status.
import { api, type Reply, rooted, type Status } from "./api";
import { fmtInt, h } from "./dom";

export class Progress {
  readonly el: HTMLElement;
  private cells: Record<string, HTMLElement> = {};
  private bar: HTMLElement;
  private timer: number | undefined;
  private soon: number | undefined;
  last: Status | null = null;
  private listeners: ((s: Status) => void)[] = [];

  constructor() {
    const cell = (key: string, label: string) => {
      const v = h("span", { class: "stat-value", "data-testid": `stat-${key}`, text: "–" });
      this.cells[key] = v;
      return h("div", { class: "stat" }, h("span", { class: "stat-label", text: label }), v);
    };
    this.bar = h("div", { class: "steps-bar-fill" });
    this.el = h(
      "div",
      { class: "progress", "data-testid": "progress" },
      cell("answered_round", "Answered this round"),
      cell("answered_total", "Answered in total"),
      cell("waiting", "Waiting"),
      h("div", { class: "progress-sep" }),
      cell("round", "Round"),
      h(
        "div",
        { class: "stat stat-wide" },
        h("span", { class: "stat-label", text: "Env steps" }),
        (this.cells.steps = h("span", { class: "stat-value", "data-testid": "stat-steps", text: "–" })),
        h("div", { class: "steps-bar" }, this.bar),
      ),
      cell("labels", "Labels"),
      cell("trainer", "Trainer"),
    );
  }

  onUpdate(fn: (s: Status) => void): void {
    this.listeners.push(fn);
  }

  start(periodMs = 3000): void {
    const tick = async () => {
      await this.refresh();
      this.timer = window.setTimeout(tick, periodMs);
    };
    void tick();
  }

  stop(): void {
    window.clearTimeout(this.timer);
  }

  async refresh(): Promise<void> {
    try {
      const s = await api.status();
      this.last = s;
      this.render(s);
      this.listeners.forEach((f) => f(s));
    } catch {
      /* the connection banner reports network trouble */
    }
  }

  /** Refresh shortly (coalesces bursts of saves into one request). */
  refreshSoon(): void {
    window.clearTimeout(this.soon);
    this.soon = window.setTimeout(() => void this.refresh(), 250);
  }

  /** Optimistic bump right after an answer (the next poll corrects it). */
  bumpAnswered(delta: number): void {
    if (!this.last) return;
    this.last = {
      ...this.last,
      answered_round: Math.max(0, this.last.answered_round + delta),
      answered_total: Math.max(0, this.last.answered_total + delta),
      waiting: Math.max(0, this.last.waiting - delta),
    };
    this.render(this.last);
  }

  private render(s: Status): void {
    this.cells.answered_round.textContent = fmtInt(s.answered_round);
    this.cells.answered_total.textContent = fmtInt(s.answered_total);
    this.cells.waiting.textContent = fmtInt(s.waiting);
    this.cells.round.textContent = s.round === null || s.round === undefined ? "–" : String(s.round);
    const steps = s.env_steps ?? null;
    const total = s.total_steps ?? null;
    this.cells.steps.textContent = total ? `${fmtInt(steps)} / ${fmtInt(total)}` : fmtInt(steps);
    const frac = steps !== null && total ? Math.min(1, steps / total) : 0;
    this.bar.style.width = `${(frac * 100).toFixed(1)}%`;
    this.cells.labels.textContent = fmtInt(s.n_labels);
    this.renderTrainer();
  }

  // ----- liveness (issue #25): the Liveness banner tells the strip when a side is gone -----
  private liveness: LivenessState = "unknown";

  setLiveness(state: LivenessState): void {
    if (state === this.liveness) return;
    this.liveness = state;
    this.renderTrainer();
  }

  private renderTrainer(): void {
    const cell = this.cells.trainer;
    if (this.liveness === "stopped" || this.liveness === "unreachable") {
      cell.textContent = this.liveness === "stopped" ? "stopped" : "studio unreachable";
      cell.dataset.state = this.liveness;
      return;
    }
    if (!this.last) return;
    cell.textContent = trainerState(this.last);
    cell.dataset.state = this.last.status ?? "none";
  }
}

function trainerState(s: Status): string {
  if (s.status === "finished") return "finished";
  if (s.status === "waiting" && s.round_asked != null)
    return `waiting for you: ${s.round_answered ?? 0} of ${s.round_asked} answered this round`;
  if (s.round === null || s.round === undefined) return "no round yet";
  if (!s.trainer_updated_at) return s.status ?? "–";
  const ago = Math.max(0, Date.now() / 1000 - s.trainer_updated_at);
  return `${s.status ?? "running"} · ${ago < 90 ? `${Math.round(ago)} s ago` : `${Math.round(ago / 60)} min ago`}`;
}

// ----- liveness banner (issue #25) ------------------------------------------------------------
// Polls GET /api/liveness every 2 s: "Trainer stopped" when the trainer's heartbeat is stale (or
// it said so), "Studio unreachable" when the studio does not answer. Both show within 10 s.

export type LivenessState = "running" | "stopped" | "unreachable" | "unknown";
type Liveness = Reply<"/api/liveness", "get">;

const LIVENESS_TIMEOUT_MS = 4000;

async function fetchLiveness(): Promise<Liveness | "unreachable" | null> {
  const ctl = new AbortController();
  const timer = window.setTimeout(() => ctl.abort(), LIVENESS_TIMEOUT_MS);
  try {
    const res = await fetch(rooted("/api/liveness"), { credentials: "same-origin", cache: "no-store", signal: ctl.signal });
    if (res.status >= 500) return "unreachable";
    if (!res.ok) return null; // 401 / 429: the other views say so; nothing to claim here
    return (await res.json()) as Liveness;
  } catch {
    return "unreachable";
  } finally {
    window.clearTimeout(timer);
  }
}

export class LivenessBanner {
  readonly el: HTMLElement;
  private title: HTMLElement;
  private text: HTMLElement;
  private timer: number | undefined;
  private misses = 0;
  state: LivenessState = "unknown";

  constructor(private progress: Progress) {
    this.title = h("strong", { class: "lifecycle-title", "data-testid": "lifecycle-title" });
    this.text = h("span", { class: "lifecycle-text" });
    this.el = h(
      "div",
      { class: "banner lifecycle-banner", role: "status", "aria-live": "polite", hidden: true, "data-testid": "lifecycle-banner" },
      h("span", { class: "lifecycle-dot", "aria-hidden": "true" }),
      this.title,
      this.text,
    );
  }

  start(periodMs = 2000): void {
    const tick = async () => {
      await this.check();
      this.timer = window.setTimeout(tick, periodMs);
    };
    void tick();
  }

  stop(): void {
    window.clearTimeout(this.timer);
  }

  async check(): Promise<void> {
    const got = await fetchLiveness();
    if (got === null) return;
    if (got === "unreachable") {
      this.misses += 1;
      // one lost poll can be a blip; two in a row (≤ 2 polls + timeouts, well within 10 s) is not
      if (this.misses >= 2) this.show("unreachable", false);
      return;
    }
    this.misses = 0;
    this.show(got.trainer === "stopped" ? "stopped" : got.trainer, got.finished);
  }

  private show(state: LivenessState, finished: boolean): void {
    this.state = state;
    this.progress.setLiveness(state);
    this.el.dataset.state = state;
    if (state === "stopped") {
      this.title.textContent = "Trainer stopped";
      this.text.textContent = finished
        ? "The run has finished. Thank you! Answers given now are kept but this run no longer learns from them."
        : "The trainer is not running. Your answers are kept and count if the run is resumed.";
      this.el.hidden = false;
    } else if (state === "unreachable") {
      this.title.textContent = "Studio unreachable";
      this.text.textContent = "The studio server does not answer; the run may have ended. Answers you give are kept in this browser and sent when it is back.";
      this.el.hidden = false;
    } else {
      this.el.hidden = true;
    }
  }
}
