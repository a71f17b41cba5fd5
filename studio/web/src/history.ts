// "Your recent answers": the person's latest judgements under a view (GET /api/judgements/mine),
// each with when it was given and an Undo button until the trainer collects it.
import type { MineRow } from "./api";
import { clear, h } from "./dom";

export interface HistoryOptions {
  /** The list's heading ("Your recent answers"). */
  title: string;
  /** The rows to list, newest first (a view may keep only its kind). */
  rows: () => Promise<MineRow[]>;
  /** The cell that says a row's answer. */
  answer: (r: MineRow) => HTMLElement;
  /** What the list says while it is empty. */
  emptyText: string;
  /** The tooltip of a row the trainer has collected (no undo then). */
  lockedTitle: string;
}

export class AnswerHistory {
  readonly el: HTMLElement;
  private list: HTMLElement;

  constructor(
    private readonly opts: HistoryOptions,
    private readonly onUndo: (r: MineRow) => void,
  ) {
    this.list = h("ol", { class: "history-list", "data-testid": "mine" });
    this.el = h("section", { class: "history" }, h("h2", { text: opts.title }), this.list);
  }

  async refresh(): Promise<void> {
    let rows: MineRow[];
    try {
      rows = await this.opts.rows();
    } catch {
      return;
    }
    clear(this.list);
    if (!rows.length) {
      this.list.append(h("li", { class: "history-empty", text: this.opts.emptyText }));
      return;
    }
    for (const r of rows) {
      const li = h(
        "li",
        { class: "history-row", "data-testid": "mine-row", "data-query-id": r.query_id, "data-judgement-id": r.id },
        this.opts.answer(r),
        h("span", { class: "history-q", text: r.query_id.slice(0, 10) }),
        h("span", { class: "history-t", text: ago(r.created_at) }),
      );
      if (r.undoable) {
        const b = h("button", { class: "btn btn-small btn-ghost", type: "button", "data-testid": "mine-undo" }, "Undo");
        b.addEventListener("click", () => this.onUndo(r));
        li.append(b);
      } else {
        li.append(h("span", { class: "history-locked", title: this.opts.lockedTitle, text: "collected" }));
      }
      this.list.append(li);
    }
  }
}

/** How long ago a Unix time was: "12 s ago", "3 min ago", "2 h ago". */
export function ago(ts: number): string {
  const s = Math.max(0, Date.now() / 1000 - ts);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}
