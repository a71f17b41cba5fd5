// The progress strip, always visible: this annotator's answers, queries waiting, the trainer's
// round and env steps. Polls /api/status.
import { api, type Status } from "./api";
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
    this.cells.trainer.textContent = trainerState(s);
    this.cells.trainer.dataset.state = s.status ?? "none";
  }
}

function trainerState(s: Status): string {
  if (s.status === "finished") return "finished";
  if (s.round === null || s.round === undefined) return "no round yet";
  if (!s.trainer_updated_at) return s.status ?? "–";
  const ago = Math.max(0, Date.now() / 1000 - s.trainer_updated_at);
  return `${s.status ?? "running"} · ${ago < 90 ? `${Math.round(ago)} s ago` : `${Math.round(ago / 60)} min ago`}`;
}
