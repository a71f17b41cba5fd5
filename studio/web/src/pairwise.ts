// Pairwise view (Christiano et al.): two looping clips side by side, in sync, answer by key or click.
// The queue, the watch-before-answering gate, undo and the history list are answer_queue.ts's.
import { api, type JudgementItem, type MineRow, type Outbox, type Query } from "./api";
import { AnswerQueueView } from "./answer_queue";
import { ClipTile } from "./clip";
import { describeRanks } from "./rank";
import { h, kbd, keyButton } from "./dom";
import type { KeyAction } from "./keys";
import type { Progress } from "./progress";

const ANSWERS: { action: KeyAction; p: number | null; key: string; label: string; cls: string }[] = [
  { action: "left", p: 1, key: "←", label: "Left is better", cls: "ans-left" },
  { action: "equal", p: 0.5, key: "↑", label: "Equally good", cls: "ans-equal" },
  { action: "cannot", p: null, key: "↓", label: "Can't tell", cls: "ans-cannot" },
  { action: "right", p: 0, key: "→", label: "Right is better", cls: "ans-right" },
];

export function describeP(p: number | null): string {
  if (p === null) return "Can't tell";
  if (p === 1) return "Left preferred";
  if (p === 0) return "Right preferred";
  if (p === 0.5) return "Equally good";
  return `p = ${p}`;
}

/** A row of the history list: a pair's p, or a ranking (answered in the Rank view). */
function historyAnswer(r: MineRow): HTMLElement {
  return r.kind === "ranking"
    ? h("span", { class: `history-answer ${r.ranks ? "" : "p-none"}`, title: r.ranks ? describeRanks(r.ranks) : "", text: r.ranks ? `Ranked ${r.ranks.length} clips` : "Can't tell" })
    : h("span", { class: `history-answer p-${r.p === null ? "none" : String(r.p).replace(".", "_")}`, text: describeP(r.p) });
}

export class PairwiseView extends AnswerQueueView {
  readonly el: HTMLElement;
  private buttons = new Map<KeyAction, HTMLButtonElement>();
  private stageButtons: HTMLButtonElement[] = [];
  private answerBar: HTMLElement;
  /** Rankings waiting for the person in the Rank view (the status poll's count). */
  private rankingsWaiting = 0;

  constructor(
    outbox: Outbox,
    progress: Progress,
    /** Shows a query of another kind in its own view (a ranking undone from this history). */
    private readonly openElsewhere?: (q: Query, ranks: number[] | null) => void,
  ) {
    super(outbox, progress, {
      kind: "pair",
      showable: (q) => Boolean(q.a[0] && q.b[0]),
      stageClass: "stage",
      replayLabel: "Replay both",
      history: {
        title: "Your recent answers",
        rows: async () => (await api.mine(8)).judgements,
        answer: historyAnswer,
        emptyText: "Nothing yet. Your answers appear here; you can undo them until the trainer collects them.",
        lockedTitle: "The trainer has collected this answer",
      },
      texts: {
        loadingNext: "Loading the next pair…",
        skipped: "Skipped · loading the next pair…",
        notSaved: "Answer not saved",
        undone: "Answer undone",
        undoneAgain: "Answer undone · answer this pair again",
        tooLate: "Too late to undo: the trainer has already collected this answer.",
      },
    });
    const answerBar = h("div", { class: "answers", role: "group", "aria-label": "Your answer" });
    for (const a of ANSWERS) {
      const btn = keyButton(`btn btn-answer ${a.cls}`, a.key, a.label, `answer-${a.action}`, () => this.answer(a.p));
      this.buttons.set(a.action, btn);
      answerBar.append(btn);
    }
    this.answerBar = answerBar;
    this.stageButtons = [this.replayButton, this.skipButton];
    this.el = this.frame({
      name: "compare",
      title: "Which behaviour is closer to what you want?",
      hint: "Watch both clips; they loop together. Answer with the arrow keys or the buttons.",
      bar: answerBar,
      below: [this.replayButton, this.skipButton],
    });
  }

  protected onAnswerKey(action: KeyAction): boolean {
    const a = ANSWERS.find((x) => x.action === action);
    if (!a) return false;
    if (this.canAnswer()) this.flash(action);
    this.answer(a.p);
    return true;
  }

  /** The status poll: ``waiting`` queries wait for this person, ``rankings`` of them in the Rank view. */
  override onStatus(waiting: number, rankings = 0): void {
    this.rankingsWaiting = rankings;
    super.onStatus(waiting);
  }

  protected describe(item: JudgementItem): string {
    return describeP(item.body.p ?? null);
  }

  protected emptyState(skipped: boolean): { title: string; text: string } {
    const n = this.rankingsWaiting;
    if (n > 0) {
      return {
        title: skipped ? "No more pairs after this one" : "No pair waiting",
        text: `No comparison is waiting for you, but ${n} ranking${n === 1 ? " waits" : "s wait"} for you in the Rank tab.`,
      };
    }
    return {
      title: skipped ? "No more pairs after this one" : "All caught up",
      text: "No comparison is waiting for you. The trainer publishes new pairs each round; this page checks every few seconds.",
    };
  }

  protected showUndone(q: Query, row: MineRow): void {
    if (q.kind === "ranking" && this.openElsewhere) this.openElsewhere(q, row.ranks ?? null);
    else this.display(q);
  }

  private flash(action: KeyAction): void {
    const b = this.buttons.get(action);
    if (!b) return;
    b.classList.add("pressed");
    window.setTimeout(() => b.classList.remove("pressed"), 160);
  }

  private answer(p: number | null): void {
    this.sendAnswer({ p });
  }

  protected display(q: Query, loaded?: ClipTile[]): void {
    this.begin(q);
    const a = q.a[0];
    const b = q.b[0];
    if (!a || !b) {
      this.displayEmpty(false, "This query has no clips.");
      return;
    }
    const [left, right] = this.claimTiles(q, loaded);
    this.tiles = [left, right];
    const meta = (c: typeof a) => `${c.length} steps`; // the player states the real-time speed
    this.stage.append(
      h(
        "div",
        { class: "pair", "data-testid": "pair", "data-query-id": q.id },
        h("figure", { class: "pair-side" }, left.el, h("figcaption", {}, kbd("←"), h("span", { text: ` Left · ${meta(a)}` }))),
        h("figure", { class: "pair-side" }, right.el, h("figcaption", {}, kbd("→"), h("span", { text: ` Right · ${meta(b)}` }))),
      ),
      h("div", { class: "query-meta", text: `Round ${q.round} · query ${q.id.slice(0, 10)}` }),
    );
    this.started(q);
  }

  protected setButtonsEnabled(on: boolean): void {
    this.buttons.forEach((b) => (b.disabled = !on));
    this.stageButtons.forEach((b) => (b.disabled = !on));
  }

  protected showGate(q: Query | null, open: boolean): void {
    this.el.dataset.ready = String(open);
    this.answerBar.classList.toggle("answers-locked", !open && q !== null);
    if (!q || open) {
      this.watchHint.textContent = q ? "Your turn: answer with the arrow keys or the buttons." : "";
      this.watchHint.classList.remove("nudge");
    } else {
      this.watchHint.textContent = this.watched.has(q.id)
        ? "Watch both clips first…"
        : `Watch both clips first: answers count once both have played ${this.playsNeeded()} (${this.playedEnough()} of 2 done).`;
      this.recheckGateLater();
    }
  }

  /** The two clip tiles of a pair (they start loading at once, off screen until shown). */
  protected tilesFor(q: Query): ClipTile[] {
    return [
      new ClipTile(q.a[0], { label: "Left", side: "left" }),
      new ClipTile(q.b[0], { label: "Right", side: "right" }),
    ];
  }
}
