// The person's queue of queries (issue #25), as the Compare and Rank views share it: the next
// query from GET /api/queries/next, the next ones' clips loading off screen meanwhile (GET
// /api/queries/ahead), clips that loop together and must play before an answer counts (the
// queue's rules), an answer sent through the outbox with its client key, skip, undo of the last
// answer while its toast offers it, and the person's recent answers. A view says how its queries
// look and how they are answered (the pair and its p; the k clips and their places).
import { ApiError, api, type JudgementItem, type MineRow, type Outbox, pairKey, type Query, type QueueRules, queueApi, uuid } from "./api";
import { ClipTile } from "./clip";
import { clear, h, keyButton } from "./dom";
import { AnswerHistory, type HistoryOptions } from "./history";
import type { KeyAction, KeyTarget } from "./keys";
import type { Progress } from "./progress";
import { type ToastHandle, toast } from "./toast";

/** What a view puts back on screen when an answer is undone (a ranking's places), null: nothing. */
export type Draft = (number | null)[] | null;

/** The answer a view gives: a pair's p or a ranking's ranks. */
export type Answer = Pick<JudgementItem["body"], "p" | "ranks">;

/** What the page says once the run has ended: undo is closed, every answer given counts. */
export const RUN_ENDED_TEXT = "The run has ended: this answer counts, and undo is no longer possible.";

/** Whether a refused undo (409) was refused because the run has ended (the store's message,
 * ``RUN_ENDED`` in src/preflab/store/answers.py) rather than because the trainer took it. */
function runEnded(err: unknown): boolean {
  return err instanceof ApiError && err.status === 409 && err.detail.startsWith("The run has ended");
}

/** Whether a refused undo (409) was refused because a study showed its completion code (the
 * store's message, ``CODE_SHOWN`` in src/preflab/store/answers.py): the answers stand. */
function codeShown(err: unknown): boolean {
  const prefix = "your completion code was shown";
  return err instanceof ApiError && err.status === 409 && err.detail.startsWith(prefix);
}

/** What the page says when an undo is refused with a 409 (``tooLate``: the trainer took it). */
function undoRefusedText(err: unknown, tooLate: string): string {
  if (runEnded(err)) return RUN_ENDED_TEXT;
  if (codeShown(err) && err instanceof ApiError) return err.detail;
  return tooLate;
}

interface LastAnswer {
  queued: boolean;
  item: JudgementItem;
  query: Query;
  draft: Draft;
  judgementId: string | null;
  toast: ToastHandle;
  undoWanted: boolean;
}

export interface QueueConfig {
  /** The kind of query the view shows (GET /api/queries/next?kind=…). */
  kind: "pair" | "ranking";
  /** Whether a query has the clips the view needs. */
  showable: (q: Query) => boolean;
  stageClass: string;
  replayLabel: string;
  history: HistoryOptions;
  texts: {
    /** "Loading the next pair…" */
    loadingNext: string;
    /** "Skipped · loading the next pair…" */
    skipped: string;
    /** "Answer not saved" (then ": " and the server's reason). */
    notSaved: string;
    /** The toast after an answer was undone from the history list. */
    undone: string;
    /** The toast after the last answer was undone: its query is on screen again. */
    undoneAgain: string;
    /** Undo refused (409): the trainer has collected the answer. */
    tooLate: string;
  };
}

export abstract class AnswerQueueView implements KeyTarget {
  abstract readonly el: HTMLElement;
  protected readonly stage: HTMLElement;
  protected readonly watchHint: HTMLElement;
  protected readonly history: AnswerHistory;
  protected readonly replayButton: HTMLButtonElement;
  protected readonly skipButton: HTMLButtonElement;
  protected query: Query | null = null;
  protected tiles: ClipTile[] = [];
  /** Full plays of each clip on screen since it was shown. */
  protected plays = new Map<HTMLVideoElement, number>();
  protected openedAt = 0;
  protected rules: QueueRules = { min_plays: 1, min_answer_s: 1, undo_grace_s: 10 };
  /** Queries whose clips were watched here (shown again after a skip or undo: no need to watch again). */
  protected watched = new Set<string>();
  protected loading = false;
  /** Bumped when something else puts a query on screen (an undo): a load in flight then drops its result. */
  protected loadGen = 0;
  protected active = false;
  private shownAt = 0;
  private gateTimer: number | undefined;
  private syncTimer: number | undefined;
  private emptyTimer: number | undefined;
  private last: LastAnswer | null = null;
  /** Query ids and clip-set keys answered here → when the server stored the answer (Infinity until
   * then): a load that started before that must not show them again. */
  private answered = new Map<string, number>();
  private keyOf = new Map<string, string>();
  /** Tiles of the next queries of the queue, loading off screen until their turn. */
  private pre = new Map<string, ClipTile[]>();
  /** The next queries of the queue as the server listed them (GET /api/queries/ahead). */
  private ahead: Query[] = [];
  private aheadGen = 0;
  /** A query has been on screen: later ones wait off screen for their clips (no spinner). */
  private shownBefore = false;

  constructor(
    protected readonly outbox: Outbox,
    protected readonly progress: Progress,
    private readonly cfg: QueueConfig,
  ) {
    this.watchHint = h("p", { class: "watch-hint", "data-testid": "watch-hint", "aria-live": "polite" });
    this.stage = h("div", { class: cfg.stageClass });
    this.replayButton = keyButton("btn btn-ghost", "Space", cfg.replayLabel, "replay", () => this.restart());
    this.skipButton = keyButton("btn btn-ghost", "N", "Skip for now", "skip", () => void this.skipCurrent());
    this.history = new AnswerHistory(cfg.history, (r) => void this.undoRow(r));
  }

  /** The view's page: its question, its answer bar, the hint, the clips, the buttons under them
   * and the history list. */
  protected frame(o: { name: string; title: string; hint: string; bar: HTMLElement; belowClass?: string; below: HTMLElement[] }): HTMLElement {
    return h(
      "section",
      { class: `view view-${o.name}`, "data-testid": `view-${o.name}` },
      h("div", { class: "question" }, h("h1", { text: o.title }), h("p", { class: "hint", text: o.hint })),
      o.bar,
      this.watchHint,
      this.stage,
      h("div", { class: o.belowClass ? `below-stage ${o.belowClass}` : "below-stage" }, ...o.below),
      this.history.el,
    );
  }

  // ----- what a view says ----------------------------------------------------------------------
  /** The clip tiles of a query (they start loading at once, off screen until shown). */
  protected abstract tilesFor(q: Query): ClipTile[];
  /** Puts ``q`` on screen (``loaded``: its tiles, loaded off screen; ``draft``: an undone answer). */
  protected abstract display(q: Query, loaded?: ClipTile[], draft?: Draft): void;
  /** Shows whether the answer is ``open`` (the clips have played) in the buttons and the hint. */
  protected abstract showGate(q: Query | null, open: boolean): void;
  protected abstract setButtonsEnabled(on: boolean): void;
  /** An answer in words, for its toast. */
  protected abstract describe(item: JudgementItem): string;
  /** The empty state's heading and text. */
  protected abstract emptyState(skipped: boolean): { title: string; text: string };
  /** A query of ``row``, undone from the history list, on screen again. */
  protected abstract showUndone(q: Query, row: MineRow): void;
  /** The view's answer keys (the queue's own: replay, next, undo). */
  protected abstract onAnswerKey(action: KeyAction): boolean;
  /** Forgets the view's answer in the making when the queue runs empty. */
  protected resetAnswer(): void {}

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
      case "replay":
        this.restart();
        return true;
      case "next":
        void this.skipCurrent();
        return true;
      case "undo":
        return this.undo();
    }
    return this.onAnswerKey(action);
  }

  /** Called by the outbox when the server stored one of this view's judgements. */
  onSaved(item: JudgementItem, judgementId: string): void {
    const last = this.last;
    this.markAnswered(item.body.query_id, performance.now());
    if (last && last.item.client_key === item.client_key) {
      last.judgementId = judgementId;
      if (last.queued && !last.undoWanted) {
        last.queued = false;
        last.toast.update(`Saved · ${this.describe(item)}`, "ok");
      }
      if (last.undoWanted) void this.undoStored(last);
    }
    void this.refreshHistory();
  }

  onRejected(item: JudgementItem, err: ApiError): void {
    this.unmarkAnswered(item.body.query_id);
    toast(`${this.cfg.texts.notSaved}: ${err.detail}`, { tone: "error", ms: 10000 });
    this.progress.bumpAnswered(-1);
  }

  /** The outbox could not reach the server: say so on the toast of an answer still waiting. */
  onOffline(): void {
    const last = this.last;
    if (!last || last.queued || last.undoWanted || !this.outbox.has(last.item.client_key)) return;
    last.queued = true;
    last.toast.update(`Kept offline · ${this.describe(last.item)}`, "warn");
  }

  /** The status poll says ``waiting`` queries wait: leave the empty state. While a query is on
   * screen and nothing is prefetched behind it (a new round was published meanwhile), load the
   * next ones' clips now, so that the next answer shows them without a spinner. */
  onStatus(waiting: number): void {
    if (!this.active || waiting <= 0) return;
    if (!this.query && !this.loading) void this.loadNext();
    else if (this.query && this.ahead.length < 2) void this.prefetchAhead(this.query);
  }

  /** The run has ended: the last answer's toast loses its Undo (the trainer has counted it) and
   * the history list stops offering undo. */
  onRunEnded(): void {
    const last = this.last;
    if (last && !last.queued && !last.undoWanted && last.judgementId) {
      last.toast.update(RUN_ENDED_TEXT, "info");
      last.toast.setAction(null);
    }
    void this.refreshHistory();
  }

  async refreshHistory(): Promise<void> {
    await this.history.refresh();
  }

  // ----- answering ---------------------------------------------------------------------------------
  /** Sends ``answer`` to the query on screen (``draft``: what an undo puts back) and shows the next. */
  protected sendAnswer(answer: Answer, draft: Draft = null): void {
    const q = this.query;
    if (!q) return;
    if (this.loading || !this.canAnswer()) {
      this.nudge(); // keys before the clips have played are ignored, with a hint
      return;
    }
    const rt = Math.max(0, (performance.now() - this.shownAt) / 1000);
    const client_key = uuid();
    const item: JudgementItem = {
      kind: "judgement",
      client_key,
      body: { query_id: q.id, ...answer, response_time_s: Math.round(rt * 1000) / 1000, client_key },
    };
    this.keyOf.set(q.id, pairKey(q));
    this.markAnswered(q.id, Infinity);
    this.openedAt = Infinity; // a second key press cannot answer again, nor the next query unseen
    this.updateGate();
    this.last?.toast.close();
    const offline = !this.outbox.online;
    const said = this.describe(item);
    const last: LastAnswer = {
      queued: offline,
      item,
      query: q,
      draft,
      judgementId: null,
      undoWanted: false,
      toast: offline
        ? toast(`Kept offline · ${said}`, { tone: "warn", ms: 60000 })
        : toast(`Saved · ${said}`, { tone: "ok", ms: this.rules.undo_grace_s * 1000 }),
    };
    last.toast.setAction({ label: "Undo", key: "U", run: () => this.undo() });
    this.last = last;
    this.outbox.push(item);
    this.progress.bumpAnswered(1);
    this.advance();
  }

  /** Every clip has played `min_plays` times and `min_answer_s` passed since the query was shown. */
  protected canAnswer(): boolean {
    const q = this.query;
    if (!q) return false;
    if (performance.now() - this.openedAt < this.rules.min_answer_s * 1000) return false;
    if (this.watched.has(q.id)) return true;
    return this.tiles.every((t) => (this.plays.get(t.video) ?? 0) >= this.rules.min_plays);
  }

  /** Opens the answer once the clips have played (a query watched once stays open) and shows it. */
  protected updateGate(): void {
    window.clearTimeout(this.gateTimer);
    const q = this.query;
    const open = this.canAnswer();
    if (q && open) this.watched.add(q.id);
    this.showGate(q, open);
  }

  /** The clips that have played `min_plays` times. */
  protected playedEnough(): number {
    return this.tiles.filter((t) => (this.plays.get(t.video) ?? 0) >= this.rules.min_plays).length;
  }

  /** "once" or "N times": how often each clip must play. */
  protected playsNeeded(): string {
    return this.rules.min_plays > 1 ? `${this.rules.min_plays} times` : "once";
  }

  /** While the answer waits for ``min_answer_s``: update the gate when that has passed. */
  protected recheckGateLater(): void {
    if (!Number.isFinite(this.openedAt)) return;
    const wait = this.openedAt + this.rules.min_answer_s * 1000 - performance.now();
    if (wait > 0) this.gateTimer = window.setTimeout(() => this.updateGate(), wait + 20);
  }

  /** A key pressed too early: say why nothing happened. */
  protected nudge(): void {
    if (!this.query) return;
    this.watchHint.classList.remove("nudge");
    void this.watchHint.offsetWidth; // restart the animation
    this.watchHint.classList.add("nudge");
  }

  /** After an answer: the next query of the queue at once, from the clips prefetched while this
   * one played, with no round trip before it shows. The server is told meanwhile that it is on
   * screen; a query it no longer has (withdrawn by a new round) is replaced by the next one. */
  private advance(): void {
    const pending = this.outbox.pendingQueryIds();
    const usable = this.ahead.filter(
      (q) => q.id !== this.query?.id && this.pre.has(q.id) && !this.blocked(q, 0) && !pending.has(q.id),
    );
    // a query whose clips have loaded first; else the first, its clips loading off screen
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
          tiles.forEach((t) => t.dispose()); // an undo put its query back meanwhile
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

  /** Until the clips of the next query can play (at most 8 s): the answered query or the empty
   * state stays on screen meanwhile, so no spinner replaces it. */
  private async offScreen(tiles: ClipTile[]): Promise<void> {
    if (tiles.every((t) => t.loaded)) return;
    if (this.query) this.watchHint.textContent = this.cfg.texts.loadingNext;
    await Promise.race([
      Promise.all(tiles.map((t) => t.ready)),
      new Promise((resolve) => window.setTimeout(resolve, 8000)),
    ]);
  }

  // ----- undo --------------------------------------------------------------------------------------
  private undo(): boolean {
    const last = this.last;
    if (!last || last.undoWanted) return false;
    if (this.outbox.cancel(last.item.client_key)) {
      // never reached the server
      this.afterUndo(last);
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
      this.afterUndo(last);
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) {
        last.toast.update(undoRefusedText(err, this.cfg.texts.tooLate), "warn");
        last.toast.setAction(null);
      } else {
        last.undoWanted = false;
        last.toast.update(`Undo failed: ${err instanceof ApiError ? err.detail : "network error, try again"}`, "error");
      }
    }
  }

  private afterUndo(last: LastAnswer): void {
    this.unmarkAnswered(last.query.id);
    this.progress.bumpAnswered(-1);
    last.toast.update(this.cfg.texts.undoneAgain, "info");
    last.toast.setAction(null);
    if (this.last === last) this.last = null;
    this.loadGen += 1;
    this.display(last.query, undefined, last.draft);
    void this.refreshHistory();
  }

  /** Undo from the history list: the query comes back (in the view that shows its kind). */
  private async undoRow(r: MineRow): Promise<void> {
    try {
      await api.undo(r.id);
      this.unmarkAnswered(r.query_id);
      this.progress.bumpAnswered(-1);
      if (this.last?.judgementId === r.id) {
        this.last.toast.close();
        this.last = null;
      }
      toast(this.cfg.texts.undone, { tone: "info" });
      const q = (await api.query(r.query_id)).query;
      if (q) this.showUndone(q, r);
    } catch (err) {
      toast(
        err instanceof ApiError && err.status === 409
          ? undoRefusedText(err, this.cfg.texts.tooLate)
          : `Undo failed: ${err instanceof ApiError ? err.detail : "network error"}`,
        { tone: "warn" },
      );
    }
    void this.refreshHistory();
  }

  // ----- loading ---------------------------------------------------------------------------------
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
        q = (await api.nextQuery(this.cfg.kind, cursor)).query;
        if (!q || !(this.blocked(q, started) || this.outbox.pendingQueryIds().has(q.id))) break;
        cursor = q.id; // answered here, not yet stored by the server: look further
        q = null;
      }
      if (gen !== this.loadGen) return; // an undo brought its query back meanwhile: keep it
      let tiles: ClipTile[] | undefined;
      if (q && this.cfg.showable(q) && this.shownBefore) {
        // not prefetched (the first query of a new round) or prefetched but not loaded yet: its
        // clips load off screen while the answered query (or the empty state) stays, so no
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

  /** Ask for the next queries of the queue and start loading their clips off screen. */
  private async prefetchAhead(current: Query): Promise<void> {
    const gen = ++this.aheadGen;
    const pending = [...this.outbox.pendingQueryIds()].slice(0, 18);
    let res;
    try {
      res = await queueApi.ahead(this.cfg.kind, 3, [current.id, ...pending]);
    } catch {
      return;
    }
    if (gen !== this.aheadGen) return;
    this.rules = res.rules;
    this.updateGate();
    const want = res.queries.filter((q) => this.cfg.showable(q) && !this.blocked(q, 0)).slice(0, 2);
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

  /** Skip (N): the query goes to the end of its round in your queue. */
  private async skipCurrent(): Promise<void> {
    const q = this.query;
    if (!q || this.loading) return;
    this.openedAt = Infinity; // leaving it: a key pressed now does not answer it
    this.updateGate();
    this.watchHint.textContent = this.cfg.texts.skipped;
    try {
      await queueApi.skip(q.id);
    } catch {
      void this.loadNext(q.id); // the server could not record it: at least show another one
      return;
    }
    void this.loadNext();
  }

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

  /** Answered here (this query or its clips) and not yet stored when a load began at `since`. */
  private blocked(q: Query, since: number): boolean {
    for (const k of [q.id, pairKey(q)]) {
      const t = this.answered.get(k);
      if (t !== undefined && t >= since) return true;
    }
    return false;
  }

  // ----- the screen --------------------------------------------------------------------------------
  /** Leaves the query on screen: its tiles go, its timers stop. */
  protected teardown(): void {
    window.clearInterval(this.syncTimer);
    window.clearTimeout(this.gateTimer);
    this.plays.clear();
    this.tiles.forEach((t) => t.dispose());
    this.tiles = [];
  }

  /** The first step of ``display``: ``q`` replaces what is on screen. */
  protected begin(q: Query): void {
    this.teardown();
    this.query = q;
    clear(this.stage);
  }

  /** The tiles ``q`` shows: loaded off screen, prefetched while the previous query played (nearly
   * ready: no spinner), or new. */
  protected claimTiles(q: Query, loaded?: ClipTile[]): ClipTile[] {
    const tiles = loaded ?? this.pre.get(q.id) ?? this.tilesFor(q);
    if (loaded) this.pre.get(q.id)?.forEach((t) => t.dispose());
    this.pre.delete(q.id);
    this.shownBefore = true;
    this.tiles = tiles;
    return tiles;
  }

  /** The last step of ``display``: the clips start together and the next queries load. */
  protected started(q: Query): void {
    this.setButtonsEnabled(true);
    this.shownAt = performance.now();
    this.openedAt = performance.now();
    for (const t of this.tiles) this.plays.set(t.video, 0);
    this.updateGate();
    void this.startTogether(q);
    void this.prefetchAhead(q);
  }

  protected displayEmpty(skipped: boolean, msg?: string): void {
    this.teardown();
    this.query = null;
    this.resetAnswer();
    this.setButtonsEnabled(false);
    this.el.dataset.ready = "false";
    this.watchHint.textContent = "";
    clear(this.stage);
    const { title, text } = this.emptyState(skipped);
    this.stage.append(
      h(
        "div",
        { class: "empty", "data-testid": "empty" },
        h("div", { class: msg ? "empty-icon trouble" : "empty-icon", "aria-hidden": "true", text: msg ? "!" : "✓" }),
        h("h2", { text: msg ? "Connection trouble" : title }),
        h("p", { text: msg ?? text }),
      ),
    );
    this.emptyTimer = window.setTimeout(() => {
      if (this.active && !this.query) void this.loadNext();
    }, 4000);
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
    // the first clip leads; the others follow it when they drift apart
    this.syncTimer = window.setInterval(() => {
      if (playing.length < 2) return;
      const [lead, ...rest] = playing;
      if (lead.ended || lead.paused) return;
      for (const v of rest) {
        const end = Math.min(lead.duration || Infinity, v.duration || Infinity);
        if (v.ended || v.paused || lead.currentTime >= end - 0.1) continue;
        if (Math.abs(lead.currentTime - v.currentTime) > 0.12) v.currentTime = lead.currentTime;
      }
    }, 250);
  }

  protected restart(): void {
    if (!this.active) return;
    for (const t of this.tiles) {
      if (!t.video.src) continue;
      t.video.pause();
      t.video.currentTime = 0;
    }
    for (const t of this.tiles) if (t.video.src) void t.video.play().catch(() => undefined);
  }
}
