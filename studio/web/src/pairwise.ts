// Pairwise view (Christiano et al.): two looping clips side by side, in sync, answer by key or click.
import {
  ApiError,
  api,
  type JudgementItem,
  type MineRow,
  type Outbox,
  pairKey,
  type Query,
  type QueueRules,
  queueApi,
  uuid,
} from "./api";
import { ClipTile } from "./clip";
import { describeRanks } from "./rank";
import { clear, h, kbd } from "./dom";
import type { KeyAction, KeyTarget } from "./keys";
import type { Progress } from "./progress";
import { type ToastHandle, toast } from "./toast";

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

interface LastAnswer {
  queued: boolean;
  item: JudgementItem;
  query: Query;
  judgementId: string | null;
  toast: ToastHandle;
  undoWanted: boolean;
}

export class PairwiseView implements KeyTarget {
  readonly el: HTMLElement;
  private stage: HTMLElement;
  private historyList: HTMLElement;
  private buttons = new Map<KeyAction, HTMLButtonElement>();
  private stageButtons: HTMLButtonElement[] = [];
  private query: Query | null = null;
  private tiles: ClipTile[] = [];
  private shownAt = 0;
  private syncTimer: number | undefined;
  private emptyTimer: number | undefined;
  private last: LastAnswer | null = null;
  /** Query ids and pair keys answered here → when the server stored the answer (Infinity until
   * then): a load that started before that must not show them again. */
  private answered = new Map<string, number>();
  private rules: QueueRules = { min_plays: 1, min_answer_s: 1, undo_grace_s: 10 };
  /** Tiles of the next pairs of the queue, loading off screen until their turn. */
  private pre = new Map<string, ClipTile[]>();
  /** The next queries of the queue as the server listed them (GET /api/queries/ahead). */
  private ahead: Query[] = [];
  private aheadGen = 0;
  /** Full plays of each clip on screen since it was shown. */
  private plays = new Map<HTMLVideoElement, number>();
  private openedAt = 0;
  private gateTimer: number | undefined;
  private answerBar: HTMLElement;
  private watchHint: HTMLElement;
  /** Pairs whose clips were watched here (shown again after a skip or undo: no need to watch again). */
  private watched = new Set<string>();
  private loading = false;
  /** A pair has been on screen: later pairs wait off screen for their clips (no spinner). */
  private shownBefore = false;
  /** Bumped when something else puts a pair on screen (an undo): a load in flight then drops its result. */
  private loadGen = 0;
  private active = false;

  constructor(
    private readonly outbox: Outbox,
    private readonly progress: Progress,
    /** Shows a query of another kind in its own view (a ranking undone from this history). */
    private readonly openElsewhere?: (q: Query, ranks: number[] | null) => void,
  ) {
    const answerBar = h("div", { class: "answers", role: "group", "aria-label": "Your answer" });
    for (const a of ANSWERS) {
      const btn = h(
        "button",
        { class: `btn btn-answer ${a.cls}`, type: "button", "data-testid": `answer-${a.action}` },
        kbd(a.key),
        h("span", { text: a.label }),
      );
      btn.addEventListener("click", () => {
        btn.blur();
        this.answer(a.p);
      });
      this.buttons.set(a.action, btn);
      answerBar.append(btn);
    }
    this.answerBar = answerBar;
    this.watchHint = h("p", { class: "watch-hint", "data-testid": "watch-hint", "aria-live": "polite" });
    this.stage = h("div", { class: "stage" });
    const replay = h("button", { class: "btn btn-ghost", type: "button", "data-testid": "replay" }, kbd("Space"), h("span", { text: "Replay both" }));
    replay.addEventListener("click", () => {
      replay.blur();
      this.restart();
    });
    const skip = h("button", { class: "btn btn-ghost", type: "button", "data-testid": "skip" }, kbd("N"), h("span", { text: "Skip for now" }));
    skip.addEventListener("click", () => {
      skip.blur();
      void this.skipCurrent();
    });
    this.stageButtons = [replay, skip];
    this.historyList = h("ol", { class: "history-list", "data-testid": "mine" });
    this.el = h(
      "section",
      { class: "view view-compare", "data-testid": "view-compare" },
      h(
        "div",
        { class: "question" },
        h("h1", { text: "Which behaviour is closer to what you want?" }),
        h("p", { class: "hint", text: "Watch both clips; they loop together. Answer with the arrow keys or the buttons." }),
      ),
      answerBar,
      this.watchHint,
      this.stage,
      h("div", { class: "below-stage" }, replay, skip),
      h("section", { class: "history" }, h("h2", { text: "Your recent answers" }), this.historyList),
    );
  }

  show(): void {
    this.active = true;
    if (!this.query) void this.loadNext();
    void this.refreshHistory();
    this.tiles.forEach((t) => void t.video.play().catch(() => undefined));
  }

  hide(): void {
    this.active = false;
    this.tiles.forEach((t) => t.video.pause());
  }

  onKey(action: KeyAction): boolean {
    switch (action) {
      case "left":
      case "right":
      case "equal":
      case "cannot": {
        const a = ANSWERS.find((x) => x.action === action);
        if (!a) return false;
        if (this.canAnswer()) this.flash(action);
        this.answer(a.p);
        return true;
      }
      case "replay":
        this.restart();
        return true;
      case "next":
        void this.skipCurrent();
        return true;
      case "undo":
        return this.undo();
    }
    return false;
  }

  /** Called by the outbox when the server stored a judgement. */
  onSaved(item: JudgementItem, judgementId: string): void {
    const last = this.last;
    this.markAnswered(item.body.query_id, performance.now());
    if (last && last.item.client_key === item.client_key) {
      last.judgementId = judgementId;
      if (last.queued && !last.undoWanted) {
        last.queued = false;
        last.toast.update(`Saved · ${describeP(item.body.p ?? null)}`, "ok");
      }
      if (last.undoWanted) void this.undoStored(last);
    }
    void this.refreshHistory();
  }

  onRejected(item: JudgementItem, err: ApiError): void {
    this.unmarkAnswered(item.body.query_id);
    toast(`Answer not saved: ${err.detail}`, { tone: "error", ms: 10000 });
    this.progress.bumpAnswered(-1);
  }

  /** The outbox could not reach the server: say so on the toast of an answer still waiting. */
  onOffline(): void {
    const last = this.last;
    if (!last || last.queued || last.undoWanted || !this.outbox.has(last.item.client_key)) return;
    last.queued = true;
    last.toast.update(`Kept offline · ${describeP(last.item.body.p ?? null)}`, "warn");
  }

  /** The status poll says queries are waiting: leave the empty state. While a pair is on
   * screen and nothing is prefetched behind it (a new round was published meanwhile), load the
   * next pairs' clips now, so that the next answer shows them without a spinner. */
  onStatus(waiting: number): void {
    if (!this.active || waiting <= 0) return;
    if (!this.query && !this.loading) void this.loadNext();
    else if (this.query && this.ahead.length < 2) void this.prefetchAhead(this.query);
  }

  private flash(action: KeyAction): void {
    const b = this.buttons.get(action);
    if (!b) return;
    b.classList.add("pressed");
    window.setTimeout(() => b.classList.remove("pressed"), 160);
  }

  private answer(p: number | null): void {
    const q = this.query;
    if (!q) return;
    if (this.loading || !this.canAnswer()) {
      this.nudge(); // keys before both clips have played are ignored, with a hint
      return;
    }
    const rt = Math.max(0, (performance.now() - this.shownAt) / 1000);
    const client_key = uuid();
    const item: JudgementItem = {
      kind: "judgement",
      client_key,
      body: { query_id: q.id, p, response_time_s: Math.round(rt * 1000) / 1000, client_key },
    };
    this.keyOf.set(q.id, pairKey(q));
    this.markAnswered(q.id, Infinity);
    this.openedAt = Infinity; // a second key press cannot answer again, nor the next pair unseen
    this.updateGate();
    this.last?.toast.close();
    const offline = !this.outbox.online;
    const last: LastAnswer = {
      queued: offline,
      item,
      query: q,
      judgementId: null,
      undoWanted: false,
      toast: offline
        ? toast(`Kept offline · ${describeP(p)}`, { tone: "warn", ms: 60000 })
        : toast(`Saved · ${describeP(p)}`, { tone: "ok", ms: this.rules.undo_grace_s * 1000 }),
    };
    last.toast.setAction({ label: "Undo", key: "U", run: () => this.undo() });
    this.last = last;
    this.outbox.push(item);
    this.progress.bumpAnswered(1);
    this.advance();
  }

  /** After an answer: the next pair of the queue at once, from the clips prefetched while this
   * one played, with no round trip before it shows. The server is told meanwhile that it is on
   * screen; a pair it no longer has (withdrawn by a new round) is replaced by the next one. */
  private advance(): void {
    const pending = this.outbox.pendingQueryIds();
    const usable = this.ahead.filter(
      (q) => q.id !== this.query?.id && this.pre.has(q.id) && !this.blocked(q, 0) && !pending.has(q.id),
    );
    // a pair whose clips have loaded first; else the first, its clips loading off screen
    const next = usable.find((q) => this.pre.get(q.id)?.every((t) => t.loaded)) ?? usable[0];
    const tiles = next && this.pre.get(next.id);
    if (!next || !tiles || this.loading) {
      void this.loadNext();
      return;
    }
    this.ahead = this.ahead.filter((q) => q.id !== next.id);
    this.pre.delete(next.id);
    const gen = ++this.loadGen; // a load still in flight must not replace it
    this.loading = true;
    void this.offScreen(tiles)
      .then(() => {
        if (gen !== this.loadGen) {
          tiles.forEach((t) => t.dispose()); // an undo put its pair back meanwhile
          return;
        }
        this.display(next, tiles);
        void api.query(next.id).catch((err: unknown) => {
          if (this.query?.id === next.id && err instanceof ApiError && err.status === 404) void this.loadNext();
        });
      })
      .finally(() => {
        this.loading = false;
      });
  }

  /** Until both clips of the next pair can play (at most 8 s): the answered pair or the empty
   * state stays on screen meanwhile, so no spinner replaces it. */
  private async offScreen(tiles: ClipTile[]): Promise<void> {
    if (tiles.every((t) => t.loaded)) return;
    if (this.query) this.watchHint.textContent = "Loading the next pair…";
    await Promise.race([
      Promise.all(tiles.map((t) => t.ready)),
      new Promise((resolve) => window.setTimeout(resolve, 8000)),
    ]);
  }

  private undo(): boolean {
    const last = this.last;
    if (!last || last.undoWanted) return false;
    if (this.outbox.cancel(last.item.client_key)) {
      // never reached the server
      this.afterUndo(last, "Answer undone");
      return true;
    }
    if (last.judgementId) {
      void this.undoStored(last);
    } else {
      last.undoWanted = true; // in flight: undo as soon as the server confirms
      last.toast.update("Undoing…", "info");
    }
    return true;
  }

  private async undoStored(last: LastAnswer): Promise<void> {
    if (!last.judgementId) return;
    last.undoWanted = true;
    try {
      await api.undo(last.judgementId);
      this.afterUndo(last, "Answer undone");
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) {
        last.toast.update("Too late to undo: the trainer has already collected this answer.", "warn");
        last.toast.setAction(null);
      } else {
        last.undoWanted = false;
        last.toast.update(`Undo failed: ${err instanceof ApiError ? err.detail : "network error, try again"}`, "error");
      }
      return;
    }
  }

  private afterUndo(last: LastAnswer, msg: string): void {
    this.unmarkAnswered(last.query.id);
    this.progress.bumpAnswered(-1);
    last.toast.update(`${msg} · answer this pair again`, "info");
    last.toast.setAction(null);
    if (this.last === last) this.last = null;
    this.loadGen += 1;
    this.display(last.query);
    void this.refreshHistory();
  }

  private async loadNext(after?: string): Promise<void> {
    if (this.loading) return;
    this.loading = true;
    window.clearTimeout(this.emptyTimer);
    const gen = this.loadGen;
    const started = performance.now();
    try {
      let cursor = after;
      let q: Query | null = null;
      for (let i = 0; i < 20; i++) {
        q = (await api.nextQuery("pair", cursor)).query;
        if (!q || !(this.blocked(q, started) || this.outbox.pendingQueryIds().has(q.id))) break;
        cursor = q.id; // answered here, not yet stored by the server: look further
        q = null;
      }
      if (gen !== this.loadGen) return; // an undo brought its pair back meanwhile: keep it
      let tiles: ClipTile[] | undefined;
      if (q && q.a[0] && q.b[0] && this.shownBefore) {
        // not prefetched (the first pair of a new round) or prefetched but not loaded yet: its
        // clips load off screen while the answered pair (or the empty state) stays, so no
        // spinner replaces it
        tiles = this.pre.get(q.id) ?? this.tilesFor(q);
        this.pre.delete(q.id);
        await this.offScreen(tiles);
        if (gen !== this.loadGen) {
          tiles.forEach((t) => t.dispose());
          return;
        }
      }
      if (q) this.display(q, tiles);
      else this.displayEmpty(after !== undefined);
    } catch (err) {
      if (gen !== this.loadGen) return;
      if (!(err instanceof ApiError && err.status === 401)) {
        this.displayEmpty(false, "Could not reach the studio server; retrying…");
      }
    } finally {
      this.loading = false;
    }
  }

  private teardown(): void {
    window.clearInterval(this.syncTimer);
    window.clearTimeout(this.gateTimer);
    this.plays.clear();
    this.tiles.forEach((t) => t.dispose());
    this.tiles = [];
  }

  private displayEmpty(skipped: boolean, msg?: string): void {
    this.teardown();
    this.query = null;
    this.setButtonsEnabled(false);
    this.el.dataset.ready = "false";
    this.watchHint.textContent = "";
    clear(this.stage);
    this.stage.append(
      h(
        "div",
        { class: "empty", "data-testid": "empty" },
        h("div", { class: msg ? "empty-icon trouble" : "empty-icon", "aria-hidden": "true", text: msg ? "!" : "✓" }),
        h("h2", { text: msg ? "Connection trouble" : skipped ? "No more pairs after this one" : "All caught up" }),
        h("p", {
          text:
            msg ??
            "No comparison is waiting for you. The trainer publishes new pairs each round; this page checks every few seconds.",
        }),
      ),
    );
    this.emptyTimer = window.setTimeout(() => {
      if (this.active && !this.query) void this.loadNext();
    }, 4000);
  }

  private display(q: Query, loaded?: ClipTile[]): void {
    this.teardown();
    this.query = q;
    clear(this.stage);
    const a = q.a[0];
    const b = q.b[0];
    if (!a || !b) {
      this.displayEmpty(false, "This query has no clips.");
      return;
    }
    // tiles prefetched while the previous pair played are (nearly) ready: no spinner
    const [left, right] = loaded ?? this.pre.get(q.id) ?? this.tilesFor(q);
    if (loaded) this.pre.get(q.id)?.forEach((t) => t.dispose());
    this.pre.delete(q.id);
    this.shownBefore = true;
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
    this.setButtonsEnabled(true);
    this.shownAt = performance.now();
    this.openedAt = performance.now();
    for (const t of this.tiles) this.plays.set(t.video, 0);
    this.updateGate();
    void this.startTogether(q);
    void this.prefetchAhead(q);
  }

  private async startTogether(q: Query): Promise<void> {
    const tiles = this.tiles;
    const ok = await Promise.all(tiles.map((t) => t.ready));
    if (this.query !== q) return;
    // a clip that cannot play (no renderer, failed) does not hold the answer back
    tiles.forEach((t, i) => {
      if (!ok[i]) this.plays.set(t.video, Number.POSITIVE_INFINITY);
    });
    this.updateGate();
    const playing = tiles.filter((_, i) => ok[i]).map((t) => t.video);
    if (!playing.length) return;
    this.shownAt = performance.now(); // response time counts from when the clips are visible
    for (const v of playing) {
      v.addEventListener("ended", () => {
        if (this.query !== q) return;
        this.plays.set(v, (this.plays.get(v) ?? 0) + 1);
        this.updateGate();
        if (playing.every((x) => x.ended)) this.restart();
      });
    }
    this.restart();
    this.syncTimer = window.setInterval(() => {
      if (playing.length < 2) return;
      const [x, y] = playing;
      const end = Math.min(x.duration || Infinity, y.duration || Infinity);
      if (x.ended || y.ended || x.paused || y.paused || x.currentTime >= end - 0.1) return;
      if (Math.abs(x.currentTime - y.currentTime) > 0.12) y.currentTime = x.currentTime;
    }, 250);
  }

  private restart(): void {
    if (!this.active) return;
    for (const t of this.tiles) {
      const v = t.video;
      if (!v.src) continue;
      v.pause();
      v.currentTime = 0;
    }
    for (const t of this.tiles) if (t.video.src) void t.video.play().catch(() => undefined);
  }

  private setButtonsEnabled(on: boolean): void {
    this.buttons.forEach((b) => (b.disabled = !on));
    this.stageButtons.forEach((b) => (b.disabled = !on));
  }

  // ----- the question queue (issue #25): watch before answering, prefetch, skip ---------------
  private keyOf = new Map<string, string>();

  private markAnswered(queryId: string, at: number): void {
    this.answered.set(queryId, at);
    const key = this.keyOf.get(queryId);
    if (key !== undefined) this.answered.set(key, at);
    const old = performance.now() - 120_000; // stored long ago: the server leaves them out itself
    for (const [k, t] of this.answered) if (t < old) this.answered.delete(k);
  }

  private unmarkAnswered(queryId: string): void {
    this.answered.delete(queryId);
    const key = this.keyOf.get(queryId);
    if (key !== undefined) this.answered.delete(key);
  }

  /** Answered here (this query or its pair) and not yet stored when a load began at `since`. */
  private blocked(q: Query, since: number): boolean {
    for (const k of [q.id, pairKey(q)]) {
      const t = this.answered.get(k);
      if (t !== undefined && t >= since) return true;
    }
    return false;
  }

  /** Both clips have played `min_plays` times and `min_answer_s` passed since the pair was shown. */
  private canAnswer(): boolean {
    const q = this.query;
    if (!q) return false;
    if (performance.now() - this.openedAt < this.rules.min_answer_s * 1000) return false;
    if (this.watched.has(q.id)) return true;
    return this.tiles.every((t) => (this.plays.get(t.video) ?? 0) >= this.rules.min_plays);
  }

  private updateGate(): void {
    window.clearTimeout(this.gateTimer);
    const q = this.query;
    const open = this.canAnswer();
    if (q && open) this.watched.add(q.id);
    this.el.dataset.ready = String(open);
    this.answerBar.classList.toggle("answers-locked", !open && q !== null);
    if (!q || open) {
      this.watchHint.textContent = q ? "Your turn: answer with the arrow keys or the buttons." : "";
      this.watchHint.classList.remove("nudge");
    } else {
      const n = this.tiles.filter((t) => (this.plays.get(t.video) ?? 0) >= this.rules.min_plays).length;
      const need = this.rules.min_plays > 1 ? `${this.rules.min_plays} times` : "once";
      this.watchHint.textContent = this.watched.has(q.id)
        ? "Watch both clips first…"
        : `Watch both clips first: answers count once both have played ${need} (${n} of 2 done).`;
      if (Number.isFinite(this.openedAt)) {
        const wait = this.openedAt + this.rules.min_answer_s * 1000 - performance.now();
        if (wait > 0) this.gateTimer = window.setTimeout(() => this.updateGate(), wait + 20);
      }
    }
  }

  /** A key pressed too early: say why nothing happened. */
  private nudge(): void {
    if (!this.query) return;
    this.watchHint.classList.remove("nudge");
    void this.watchHint.offsetWidth; // restart the animation
    this.watchHint.classList.add("nudge");
  }

  /** Ask for the next queries of the queue and start loading the next pairs' clips off screen. */
  private async prefetchAhead(current: Query): Promise<void> {
    const gen = ++this.aheadGen;
    const pending = [...this.outbox.pendingQueryIds()].slice(0, 18);
    let res;
    try {
      res = await queueApi.ahead("pair", 3, [current.id, ...pending]);
    } catch {
      return;
    }
    if (gen !== this.aheadGen) return;
    this.rules = res.rules;
    this.updateGate();
    const want = res.queries.filter((q) => q.a[0] && q.b[0] && !this.blocked(q, 0)).slice(0, 2);
    this.ahead = want;
    for (const [id, tiles] of this.pre) {
      if (!want.some((q) => q.id === id)) {
        tiles.forEach((t) => t.dispose());
        this.pre.delete(id);
      }
    }
    for (const q of want) {
      if (this.pre.has(q.id) || q.id === this.query?.id) continue;
      this.pre.set(q.id, this.tilesFor(q));
    }
  }

  /** The two clip tiles of a pair (they start loading at once, off screen until shown). */
  private tilesFor(q: Query): ClipTile[] {
    return [
      new ClipTile(q.a[0], { label: "Left", side: "left" }),
      new ClipTile(q.b[0], { label: "Right", side: "right" }),
    ];
  }

  /** Skip (N): the pair goes to the end of its round in your queue. */
  private async skipCurrent(): Promise<void> {
    const q = this.query;
    if (!q || this.loading) return;
    this.openedAt = Infinity; // leaving it: a key pressed now does not answer it
    this.updateGate();
    this.watchHint.textContent = "Skipped · loading the next pair…";
    try {
      await queueApi.skip(q.id);
    } catch {
      void this.loadNext(q.id); // the server could not record it: at least show another one
      return;
    }
    void this.loadNext();
  }

  async refreshHistory(): Promise<void> {
    let rows: MineRow[];
    try {
      rows = (await api.mine(8)).judgements;
    } catch {
      return;
    }
    clear(this.historyList);
    if (!rows.length) {
      this.historyList.append(h("li", { class: "history-empty", text: "Nothing yet. Your answers appear here; you can undo them until the trainer collects them." }));
      return;
    }
    for (const r of rows) {
      const li = h(
        "li",
        { class: "history-row", "data-testid": "mine-row", "data-query-id": r.query_id, "data-judgement-id": r.id },
        r.kind === "ranking"
          ? h("span", { class: `history-answer ${r.ranks ? "" : "p-none"}`, title: r.ranks ? describeRanks(r.ranks) : "", text: r.ranks ? `Ranked ${r.ranks.length} clips` : "Can't tell" })
          : h("span", { class: `history-answer p-${r.p === null ? "none" : String(r.p).replace(".", "_")}`, text: describeP(r.p) }),
        h("span", { class: "history-q", text: r.query_id.slice(0, 10) }),
        h("span", { class: "history-t", text: ago(r.created_at) }),
      );
      if (r.undoable) {
        const b = h("button", { class: "btn btn-small btn-ghost", type: "button", "data-testid": "mine-undo" }, "Undo");
        b.addEventListener("click", () => void this.undoRow(r));
        li.append(b);
      } else {
        li.append(h("span", { class: "history-locked", title: "The trainer has collected this answer", text: "collected" }));
      }
      this.historyList.append(li);
    }
  }

  private async undoRow(r: MineRow): Promise<void> {
    try {
      await api.undo(r.id);
      this.unmarkAnswered(r.query_id);
      this.progress.bumpAnswered(-1);
      if (this.last?.judgementId === r.id) {
        this.last.toast.close();
        this.last = null;
      }
      toast("Answer undone", { tone: "info" });
      const q = (await api.query(r.query_id)).query;
      if (q && q.kind === "ranking" && this.openElsewhere) this.openElsewhere(q, r.ranks ?? null);
      else if (q) this.display(q);
    } catch (err) {
      toast(
        err instanceof ApiError && err.status === 409
          ? "Too late to undo: the trainer has already collected this answer."
          : `Undo failed: ${err instanceof ApiError ? err.detail : "network error"}`,
        { tone: "warn" },
      );
    }
    void this.refreshHistory();
  }
}

function ago(ts: number): string {
  const s = Math.max(0, Date.now() / 1000 - ts);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}
