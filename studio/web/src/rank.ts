// Rank view (issue 57): the k clips of a ranking query in a grid, looping together, to be ordered
// from best to worst (ties allowed). A clip gets its place by a number key (1..k) while the
// pointer is on it or it has the focus, by clicking clips in order best → worst (Shift+click: the
// same place as the last one, a tie), by the place buttons under it, or by dragging it onto a
// place of the order strip. Backspace or Ctrl+Z takes back the last placement, Esc all of them.
// Enter (or the button) submits once every clip has a place and every clip has played once;
// ↓ says "can't tell"; N skips. The same queue as Compare: the answer goes through the outbox
// (U undoes it while the toast offers it), and the next rankings' clips load off screen while
// this one plays (GET /api/queries/ahead), so no spinner shows after the first.
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
import { clear, h, kbd } from "./dom";
import type { KeyAction, KeyTarget } from "./keys";
import type { Progress } from "./progress";
import { type ToastHandle, toast } from "./toast";
import "./rank.css";

const DRAG_CLIP = "application/x-preflab-clip";
const DRAG_CHIP = "application/x-preflab-placed";

/** The letter a ranking shows for its i-th clip (A, B, …). */
export function clipLetter(i: number): string {
  return String.fromCharCode(65 + i);
}

/** "1st", "2nd", … */
export function ordinal(n: number): string {
  const s = n % 100 >= 11 && n % 100 <= 13 ? "th" : ["th", "st", "nd", "rd"][n % 10] ?? "th";
  return `${n}${s}`;
}

/** Dense ranks (0 = best, ties share a rank, no gaps) of places 1..k that may have gaps. */
export function denseRanks(places: number[]): number[] {
  const used = [...new Set(places)].sort((x, y) => x - y);
  return places.map((p) => used.indexOf(p));
}

/** A ranking in letters, best first: "C › A = D › B". */
export function describeRanks(ranks: number[]): string {
  const groups = new Map<number, string[]>();
  ranks.forEach((r, i) => groups.set(r, [...(groups.get(r) ?? []), clipLetter(i)]));
  return [...groups.entries()]
    .sort((x, y) => x[0] - y[0])
    .map(([, ls]) => ls.join(" = "))
    .join(" › ");
}

interface LastAnswer {
  queued: boolean;
  item: JudgementItem;
  query: Query;
  places: (number | null)[];
  judgementId: string | null;
  toast: ToastHandle;
  undoWanted: boolean;
}

interface Placement {
  index: number;
  before: number | null;
}

interface Shown {
  tile: ClipTile;
  fig: HTMLElement;
  badge: HTMLElement;
  buttons: HTMLButtonElement[];
}

function said(ranks: number[] | null | undefined): string {
  return ranks ? describeRanks(ranks) : "Can't tell";
}

export class RankView implements KeyTarget {
  readonly el: HTMLElement;
  private stage: HTMLElement;
  private strip: HTMLElement;
  private playerRow: HTMLElement;
  private historyList: HTMLElement;
  private submitBtn: HTMLButtonElement;
  private cannotBtn: HTMLButtonElement;
  private stageButtons: HTMLButtonElement[] = [];
  private watchHint: HTMLElement;
  private query: Query | null = null;
  private tiles: ClipTile[] = [];
  private shown: Shown[] = [];
  /** Each clip's place (1 = best; equal places are ties), null until given. */
  private places: (number | null)[] = [];
  private placements: Placement[] = [];
  /** The clip that number keys place: the one under the pointer, else the focused one. */
  private hovered: number | null = null;
  private shownAt = 0;
  private openedAt = 0;
  private syncTimer: number | undefined;
  private emptyTimer: number | undefined;
  private gateTimer: number | undefined;
  private last: LastAnswer | null = null;
  /** Query ids and clip-set keys answered here → when the server stored the answer (Infinity until then). */
  private answered = new Map<string, number>();
  private keyOf = new Map<string, string>();
  private rules: QueueRules = { min_plays: 1, min_answer_s: 1, undo_grace_s: 10 };
  /** Tiles of the next rankings of the queue, loading off screen until their turn. */
  private pre = new Map<string, ClipTile[]>();
  private ahead: Query[] = [];
  private aheadGen = 0;
  /** Full plays of each clip on screen since it was shown. */
  private plays = new Map<HTMLVideoElement, number>();
  /** Rankings whose clips were watched here (shown again after a skip or undo). */
  private watched = new Set<string>();
  private loading = false;
  private shownBefore = false;
  private loadGen = 0;
  private active = false;

  constructor(
    private readonly outbox: Outbox,
    private readonly progress: Progress,
  ) {
    this.strip = h("div", { class: "rank-order", "data-testid": "rank-order", role: "list", "aria-label": "Your order, best to worst" });
    this.cannotBtn = h("button", { class: "btn btn-answer ans-cannot", type: "button", "data-testid": "rank-cannot" }, kbd("↓"), h("span", { text: "Can't tell" }));
    this.cannotBtn.addEventListener("click", () => {
      this.cannotBtn.blur();
      this.send(null);
    });
    this.submitBtn = h("button", { class: "btn btn-primary btn-answer rank-submit", type: "button", "data-testid": "rank-submit" }, kbd("Enter"), h("span", { text: "Submit ranking" }));
    this.submitBtn.addEventListener("click", () => {
      this.submitBtn.blur();
      this.submit();
    });
    this.watchHint = h("p", { class: "watch-hint", "data-testid": "watch-hint", "aria-live": "polite" });
    this.stage = h("div", { class: "stage rank-stage" });
    this.playerRow = h("div", { class: "rank-player", "data-testid": "rank-player" });
    const replay = h("button", { class: "btn btn-ghost", type: "button", "data-testid": "replay" }, kbd("Space"), h("span", { text: "Replay all" }));
    replay.addEventListener("click", () => {
      replay.blur();
      this.restart();
    });
    const undoPlace = h("button", { class: "btn btn-ghost", type: "button", "data-testid": "rank-undo-place" }, kbd("⌫"), h("span", { text: "Undo placement" }));
    undoPlace.addEventListener("click", () => {
      undoPlace.blur();
      this.undoPlacement();
    });
    const skip = h("button", { class: "btn btn-ghost", type: "button", "data-testid": "skip" }, kbd("N"), h("span", { text: "Skip for now" }));
    skip.addEventListener("click", () => {
      skip.blur();
      void this.skipCurrent();
    });
    this.stageButtons = [replay, undoPlace, skip];
    this.historyList = h("ol", { class: "history-list", "data-testid": "mine" });
    window.addEventListener("resize", () => this.layout());
    this.el = h(
      "section",
      { class: "view view-rank", "data-testid": "view-rank" },
      h(
        "div",
        { class: "question" },
        h("h1", { text: "Order these behaviours from best to worst" }),
        h("p", { class: "hint", text: "All clips loop together; ties are fine." }),
      ),
      h("div", { class: "rank-bar" }, this.strip, this.cannotBtn, this.submitBtn),
      this.watchHint,
      this.stage,
      h("div", { class: "below-stage rank-below" }, replay, undoPlace, skip, this.playerRow),
      h("section", { class: "history" }, h("h2", { text: "Your recent rankings" }), this.historyList),
    );
  }

  show(): void {
    this.active = true;
    this.layout();
    if (!this.query) void this.loadNext();
    void this.refreshHistory();
    this.tiles.forEach((t) => void t.video.play().catch(() => undefined));
  }

  hide(): void {
    this.active = false;
    this.tiles.forEach((t) => t.video.pause());
  }

  // ----- keys ------------------------------------------------------------------------------------
  onKey(action: KeyAction): boolean {
    switch (action) {
      case "left":
      case "right":
        this.moveFocus(action === "left" ? -1 : 1);
        return this.query !== null;
      case "cannot":
        this.send(null);
        return true;
      case "replay":
        this.restart();
        return true;
      case "next":
        void this.skipCurrent();
        return true;
      case "undo":
        return this.undo();
      case "equal":
        return false;
    }
    return false;
  }

  onRawKey(ev: KeyboardEvent): boolean {
    if (!this.query) return false;
    const mod = ev.ctrlKey || ev.metaKey;
    if (mod && !ev.altKey && (ev.key === "z" || ev.key === "Z") && !ev.shiftKey) {
      this.undoPlacement();
      return true;
    }
    if (mod || ev.altKey) return false;
    if (ev.key === "Backspace") {
      this.undoPlacement();
      return true;
    }
    if (ev.key === "Escape") {
      this.clearPlacements();
      return true;
    }
    if (ev.key === "Enter") {
      if (!ev.repeat) this.submit();
      return true;
    }
    const k = this.places.length;
    if (/^[1-9]$/.test(ev.key) || ev.key === "=") {
      if (ev.repeat) return true;
      const target = this.target();
      if (target === null) {
        this.say("Point at a clip (or Tab to it), then press its place.", true);
        return true;
      }
      const place = ev.key === "=" ? this.lastPlace() : Number(ev.key);
      if (place === null || place > k) {
        this.say(place === null ? "Place a clip first; = gives the next one the same place." : `Places go from 1 to ${k}.`, true);
        return true;
      }
      this.place(target, place);
      if (this.hovered === null) this.focusNextUnplaced(target); // by keyboard: on to the next clip
      return true;
    }
    return false;
  }

  /** The clip number keys act on: under the pointer, else focused. */
  private target(): number | null {
    if (this.hovered !== null) return this.hovered;
    const fig = (document.activeElement as HTMLElement | null)?.closest?.(".rank-tile") as HTMLElement | null;
    const i = fig ? this.shown.findIndex((s) => s.fig === fig) : -1;
    return i >= 0 ? i : null;
  }

  private moveFocus(by: number): void {
    if (!this.shown.length) return;
    const cur = this.target();
    const n = this.shown.length;
    const next = cur === null ? (by > 0 ? 0 : n - 1) : (cur + by + n) % n;
    this.shown[next].fig.focus();
  }

  private focusNextUnplaced(from: number): void {
    const n = this.shown.length;
    for (let d = 1; d <= n; d++) {
      const i = (from + d) % n;
      if (this.places[i] === null) {
        this.shown[i].fig.focus();
        return;
      }
    }
  }

  // ----- placing ---------------------------------------------------------------------------------
  private lastPlace(): number | null {
    const last = this.placements.at(-1);
    return last ? this.places[last.index] : null;
  }

  /** The place a click gives: the one after the worst place given so far (Shift: the same). */
  private clickPlace(tie: boolean): number {
    const given = this.places.filter((p): p is number => p !== null);
    if (!given.length) return 1;
    const worst = Math.max(...given);
    return tie ? worst : Math.min(this.places.length, worst + 1);
  }

  private place(i: number, place: number | null): void {
    if (!this.query || i < 0 || i >= this.places.length) return;
    const before = this.places[i];
    if (before === place) return;
    this.places[i] = place;
    this.placements.push({ index: i, before });
    this.renderPlaces();
  }

  private undoPlacement(): void {
    const last = this.placements.pop();
    if (!last) {
      this.say("Nothing to take back: no clip has a place yet.", true);
      return;
    }
    this.places[last.index] = last.before;
    this.renderPlaces();
  }

  private clearPlacements(): void {
    this.places.forEach((p, i) => {
      if (p !== null) this.placements.push({ index: i, before: p });
    });
    this.places = this.places.map(() => null);
    this.renderPlaces();
  }

  private complete(): boolean {
    return this.places.length > 0 && this.places.every((p) => p !== null);
  }

  private renderPlaces(): void {
    const k = this.places.length;
    this.shown.forEach((s, i) => {
      const p = this.places[i];
      s.fig.dataset.place = p === null ? "" : String(p);
      s.fig.classList.toggle("rank-placed", p !== null);
      s.badge.textContent = p === null ? "?" : ordinal(p);
      s.badge.classList.toggle("rank-badge-empty", p === null);
      s.buttons.forEach((b, n) => b.setAttribute("aria-pressed", String(p === n + 1)));
    });
    const slots = [...this.strip.querySelectorAll<HTMLElement>(".rank-slot")];
    slots.forEach((slot, n) => {
      const chips = slot.querySelector(".rank-slot-chips");
      if (!chips) return;
      const here = this.places.map((p, i) => (p === n + 1 ? i : -1)).filter((i) => i >= 0);
      chips.replaceChildren(...here.map((i) => this.chip(i)));
      slot.classList.toggle("rank-slot-tie", here.length > 1);
      slot.classList.toggle("rank-slot-filled", here.length > 0);
    });
    this.el.dataset.ranks = this.complete() ? denseRanks(this.places as number[]).join(",") : "";
    this.el.dataset.placed = String(this.places.filter((p) => p !== null).length);
    this.strip.dataset.k = String(k);
    this.updateGate();
  }

  private chip(i: number): HTMLElement {
    const c = h("button", { class: "rank-chip", type: "button", draggable: "true", "data-testid": "rank-chip", "data-index": i, title: "Drag to another place; click to take this place back", text: clipLetter(i) });
    c.addEventListener("click", () => {
      c.blur();
      this.place(i, null);
    });
    c.addEventListener("dragstart", (ev) => {
      ev.dataTransfer?.setData(DRAG_CHIP, String(i));
      ev.dataTransfer?.setData(DRAG_CLIP, String(i));
      if (ev.dataTransfer) ev.dataTransfer.effectAllowed = "move";
    });
    c.addEventListener("mouseenter", () => this.highlight(i, true));
    c.addEventListener("mouseleave", () => this.highlight(i, false));
    return c;
  }

  private highlight(i: number, on: boolean): void {
    this.shown[i]?.fig.classList.toggle("rank-peer", on);
  }

  private buildStrip(k: number): void {
    clear(this.strip);
    this.strip.append(h("span", { class: "rank-end", text: "Best" }));
    for (let n = 1; n <= k; n++) {
      const slot = h(
        "div",
        { class: "rank-slot", role: "listitem", "data-place": n, "data-testid": `rank-slot-${n}` },
        h("span", { class: "rank-slot-n", text: ordinal(n) }),
        h("div", { class: "rank-slot-chips" }),
      );
      slot.addEventListener("dragover", (ev) => {
        if (!ev.dataTransfer?.types.includes(DRAG_CLIP)) return;
        ev.preventDefault();
        ev.dataTransfer.dropEffect = "move";
        slot.classList.add("rank-drop");
      });
      slot.addEventListener("dragleave", () => slot.classList.remove("rank-drop"));
      slot.addEventListener("drop", (ev) => {
        slot.classList.remove("rank-drop");
        const i = Number(ev.dataTransfer?.getData(DRAG_CLIP));
        if (!ev.dataTransfer || !Number.isInteger(i) || ev.dataTransfer.getData(DRAG_CLIP) === "") return;
        ev.preventDefault();
        this.place(i, n);
      });
      this.strip.append(slot);
    }
    this.strip.append(h("span", { class: "rank-end", text: "Worst" }));
  }

  // ----- answering -------------------------------------------------------------------------------
  private submit(): void {
    if (!this.query) return;
    if (!this.complete()) {
      const n = this.places.filter((p) => p !== null).length;
      this.say(`Give every clip a place first: ${n} of ${this.places.length} placed.`, true);
      return;
    }
    this.send(denseRanks(this.places as number[]));
  }

  private send(ranks: number[] | null): void {
    const q = this.query;
    if (!q) return;
    if (this.loading || !this.canAnswer()) {
      this.nudge();
      return;
    }
    const rt = Math.max(0, (performance.now() - this.shownAt) / 1000);
    const client_key = uuid();
    const item: JudgementItem = {
      kind: "judgement",
      client_key,
      body: { query_id: q.id, ranks, response_time_s: Math.round(rt * 1000) / 1000, client_key },
    };
    this.keyOf.set(q.id, pairKey(q));
    this.markAnswered(q.id, Infinity);
    this.openedAt = Infinity; // a second Enter cannot answer again, nor the next ranking unseen
    this.updateGate();
    this.last?.toast.close();
    const offline = !this.outbox.online;
    const last: LastAnswer = {
      queued: offline,
      item,
      query: q,
      places: ranks ? ranks.map((r) => r + 1) : [...this.places],
      judgementId: null,
      undoWanted: false,
      toast: offline
        ? toast(`Kept offline · ${said(ranks)}`, { tone: "warn", ms: 60000 })
        : toast(`Saved · ${said(ranks)}`, { tone: "ok", ms: this.rules.undo_grace_s * 1000 }),
    };
    last.toast.setAction({ label: "Undo", key: "U", run: () => this.undo() });
    this.last = last;
    this.outbox.push(item);
    this.progress.bumpAnswered(1);
    this.advance();
  }

  /** Called by the outbox when the server stored one of this view's judgements. */
  onSaved(item: JudgementItem, judgementId: string): void {
    const last = this.last;
    this.markAnswered(item.body.query_id, performance.now());
    if (last && last.item.client_key === item.client_key) {
      last.judgementId = judgementId;
      if (last.queued && !last.undoWanted) {
        last.queued = false;
        last.toast.update(`Saved · ${said(item.body.ranks)}`, "ok");
      }
      if (last.undoWanted) void this.undoStored(last);
    }
    void this.refreshHistory();
  }

  onRejected(item: JudgementItem, err: ApiError): void {
    this.unmarkAnswered(item.body.query_id);
    toast(`Ranking not saved: ${err.detail}`, { tone: "error", ms: 10000 });
    this.progress.bumpAnswered(-1);
  }

  onOffline(): void {
    const last = this.last;
    if (!last || last.queued || last.undoWanted || !this.outbox.has(last.item.client_key)) return;
    last.queued = true;
    last.toast.update(`Kept offline · ${said(last.item.body.ranks)}`, "warn");
  }

  /** The status poll: ``waiting`` rankings wait for this person. */
  onStatus(waiting: number): void {
    if (!this.active || waiting <= 0) return;
    if (!this.query && !this.loading) void this.loadNext();
    else if (this.query && this.ahead.length < 2) void this.prefetchAhead(this.query);
  }

  /** Show ``q`` here (an answer undone elsewhere), its earlier ranks placed again. */
  open(q: Query, ranks: number[] | null): void {
    this.loadGen += 1;
    this.display(q, undefined, ranks ? ranks.map((r) => r + 1) : null);
  }

  // ----- the queue (as Compare's) -------------------------------------------------------------------
  private advance(): void {
    const pending = this.outbox.pendingQueryIds();
    const usable = this.ahead.filter(
      (q) => q.id !== this.query?.id && this.pre.has(q.id) && !this.blocked(q, 0) && !pending.has(q.id),
    );
    const next = usable.find((q) => this.pre.get(q.id)?.every((t) => t.loaded)) ?? usable[0];
    const tiles = next && this.pre.get(next.id);
    if (!next || !tiles || this.loading) {
      void this.loadNext();
      return;
    }
    this.ahead = this.ahead.filter((q) => q.id !== next.id);
    this.pre.delete(next.id);
    const gen = ++this.loadGen;
    this.loading = true;
    void this.offScreen(tiles)
      .then(() => {
        if (gen !== this.loadGen) {
          tiles.forEach((t) => t.dispose());
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

  private async offScreen(tiles: ClipTile[]): Promise<void> {
    if (tiles.every((t) => t.loaded)) return;
    if (this.query) this.watchHint.textContent = "Loading the next ranking…";
    await Promise.race([Promise.all(tiles.map((t) => t.ready)), new Promise((resolve) => window.setTimeout(resolve, 8000))]);
  }

  private undo(): boolean {
    const last = this.last;
    if (!last || last.undoWanted) return false;
    if (this.outbox.cancel(last.item.client_key)) {
      this.afterUndo(last);
      return true;
    }
    if (last.judgementId) {
      void this.undoStored(last);
    } else {
      last.undoWanted = true;
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
        last.toast.update("Too late to undo: the trainer has already collected this ranking.", "warn");
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
    last.toast.update("Ranking undone · change it and submit again", "info");
    last.toast.setAction(null);
    if (this.last === last) this.last = null;
    this.loadGen += 1;
    this.display(last.query, undefined, last.places);
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
        q = (await api.nextQuery("ranking", cursor)).query;
        if (!q || !(this.blocked(q, started) || this.outbox.pendingQueryIds().has(q.id))) break;
        cursor = q.id;
        q = null;
      }
      if (gen !== this.loadGen) return;
      let tiles: ClipTile[] | undefined;
      if (q && q.a.length >= 2 && this.shownBefore) {
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
      if (!(err instanceof ApiError && err.status === 401)) this.displayEmpty(false, "Could not reach the studio server; retrying…");
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
    this.shown = [];
    this.hovered = null;
    clear(this.playerRow);
  }

  private displayEmpty(skipped: boolean, msg?: string): void {
    this.teardown();
    this.query = null;
    this.places = [];
    this.placements = [];
    clear(this.strip);
    this.setButtonsEnabled(false);
    this.el.dataset.ready = "false";
    this.el.dataset.watched = "false";
    this.el.dataset.ranks = "";
    this.watchHint.textContent = "";
    clear(this.stage);
    this.stage.append(
      h(
        "div",
        { class: "empty", "data-testid": "empty" },
        h("div", { class: msg ? "empty-icon trouble" : "empty-icon", "aria-hidden": "true", text: msg ? "!" : "✓" }),
        h("h2", { text: msg ? "Connection trouble" : skipped ? "No more rankings after this one" : "No ranking waiting" }),
        h("p", { text: msg ?? "No ranking is waiting for you. The trainer publishes new ones each round; this page checks every few seconds." }),
      ),
    );
    this.emptyTimer = window.setTimeout(() => {
      if (this.active && !this.query) void this.loadNext();
    }, 4000);
  }

  private display(q: Query, loaded?: ClipTile[], places?: (number | null)[] | null): void {
    this.teardown();
    this.query = q;
    clear(this.stage);
    const k = q.a.length;
    if (k < 2) {
      this.displayEmpty(false, "This ranking has no clips to order.");
      return;
    }
    const tiles = loaded ?? this.pre.get(q.id) ?? this.tilesFor(q);
    if (loaded) this.pre.get(q.id)?.forEach((t) => t.dispose());
    this.pre.delete(q.id);
    this.shownBefore = true;
    this.tiles = tiles;
    this.places = places && places.length === k ? [...places] : Array.from({ length: k }, () => null);
    this.placements = [];
    const grid = h("div", { class: "rank-grid", "data-testid": "rank-grid", "data-query-id": q.id, "data-k": k });
    grid.addEventListener("dragover", (ev) => {
      if (ev.dataTransfer?.types.includes(DRAG_CHIP)) ev.preventDefault();
    });
    grid.addEventListener("drop", (ev) => {
      const raw = ev.dataTransfer?.getData(DRAG_CHIP);
      if (!raw) return;
      ev.preventDefault();
      this.place(Number(raw), null); // a placed clip dragged back to the clips: no place
    });
    this.shown = tiles.map((tile, i) => this.tileFigure(q, tile, i, k));
    grid.append(...this.shown.map((s) => s.fig));
    this.stage.append(grid, h("div", { class: "query-meta", text: `Round ${q.round} · ranking ${q.id.slice(0, 10)} · ${k} clips` }));
    const bar = tiles[0]?.controlsEl();
    if (bar) this.playerRow.append(bar); // one player bar for all clips (its keys act on every clip)
    this.buildStrip(k);
    for (const t of tiles) {
      const sized = () => {
        const { videoWidth: w, videoHeight: hh } = t.video;
        if (w > 0 && hh > 0) t.box.style.setProperty("--ar", String(w / hh));
        this.layout();
      };
      if (t.video.videoWidth > 0) sized();
      else t.video.addEventListener("loadedmetadata", sized, { once: true });
    }
    this.layout();
    this.setButtonsEnabled(true);
    this.shownAt = performance.now();
    this.openedAt = performance.now();
    for (const t of this.tiles) this.plays.set(t.video, 0);
    this.renderPlaces();
    void this.startTogether(q);
    void this.prefetchAhead(q);
  }

  private tileFigure(q: Query, tile: ClipTile, i: number, k: number): Shown {
    const letter = clipLetter(i);
    const badge = h("div", { class: "rank-badge rank-badge-empty", "data-testid": "rank-badge", "aria-hidden": "true", text: "?" });
    tile.box.append(badge);
    const buttons: HTMLButtonElement[] = [];
    for (let n = 1; n <= k; n++) {
      const b = h("button", { class: "rank-place-btn", type: "button", title: `${letter}: ${ordinal(n)} place (${n})`, "aria-label": `${letter} ${ordinal(n)}`, "aria-pressed": "false", "data-testid": `rank-place-${n}`, text: String(n) });
      b.addEventListener("click", (ev) => {
        ev.stopPropagation();
        b.blur();
        this.place(i, this.places[i] === n ? null : n);
      });
      buttons.push(b);
    }
    const clip = q.a[i];
    const fig = h(
      "figure",
      { class: "rank-tile", tabindex: 0, draggable: "true", "data-testid": "rank-tile", "data-index": i, "data-letter": letter, "data-segment": clip.segment_id, "aria-label": `Clip ${letter}` },
      tile.el,
      h(
        "figcaption",
        {},
        h("span", { class: "rank-letter", text: letter }),
        h("span", { class: "rank-steps", text: clip.length ? `${clip.length} steps` : "" }),
        h("span", { class: "rank-places", role: "group", "aria-label": `Place of ${letter}` }, ...buttons),
      ),
    );
    fig.addEventListener("pointerenter", () => {
      this.hovered = i;
    });
    fig.addEventListener("pointerleave", () => {
      if (this.hovered === i) this.hovered = null;
    });
    fig.addEventListener("click", (ev) => {
      if ((ev.target as HTMLElement).closest("button, input")) return;
      this.place(i, this.places[i] === null ? this.clickPlace(ev.shiftKey) : null);
    });
    fig.addEventListener("dragstart", (ev) => {
      ev.dataTransfer?.setData(DRAG_CLIP, String(i));
      if (ev.dataTransfer) ev.dataTransfer.effectAllowed = "move";
      fig.classList.add("rank-dragging");
    });
    fig.addEventListener("dragend", () => fig.classList.remove("rank-dragging"));
    return { tile, fig, badge, buttons };
  }

  /** Columns and clip height that show the k clips largest in the window (every clip on screen
   * with the order strip above and the player below: 1 to 2 rows at 1280×800 and 1920×1080). */
  private layout(): void {
    const grid = this.stage.querySelector<HTMLElement>(".rank-grid");
    if (!grid || !this.query) return;
    const k = this.shown.length;
    const ars = this.tiles.map((t) => (t.video.videoWidth > 0 && t.video.videoHeight > 0 ? t.video.videoWidth / t.video.videoHeight : 1));
    const ar = Math.max(...ars, 0.2);
    const width = grid.clientWidth || this.stage.clientWidth || 1200;
    const top = grid.getBoundingClientRect().top + window.scrollY;
    const below = 150; // the clips' captions' room is counted per row; this is the player and buttons
    const height = Math.max(260, window.innerHeight - top - below);
    let best = { cols: Math.min(k, 4), size: 0, clipH: 200 };
    for (let cols = 1; cols <= k; cols++) {
      const rows = Math.ceil(k / cols);
      const cellW = (width - 14 * (cols - 1)) / cols - 16;
      const cellH = (height - 10 * (rows - 1)) / rows - 52; // tile padding and the place buttons
      const clipH = Math.min(cellH, cellW / ar);
      if (clipH > best.size + 1) best = { cols, size: clipH, clipH };
    }
    const clipH = Math.max(110, Math.min(560, Math.floor(best.clipH)));
    grid.style.setProperty("--cols", String(best.cols));
    grid.style.setProperty("--clip-h", `${clipH}px`);
    grid.style.setProperty("--cell-w", `${Math.ceil(clipH * ar) + 20}px`); // columns as wide as the clips
    grid.dataset.cols = String(best.cols);
  }

  private async startTogether(q: Query): Promise<void> {
    const tiles = this.tiles;
    const ok = await Promise.all(tiles.map((t) => t.ready));
    if (this.query !== q) return;
    tiles.forEach((t, i) => {
      if (!ok[i]) this.plays.set(t.video, Number.POSITIVE_INFINITY); // cannot play: not waited for
    });
    this.updateGate();
    const playing = tiles.filter((_, i) => ok[i]).map((t) => t.video);
    if (!playing.length) return;
    this.shownAt = performance.now();
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
      const [lead, ...rest] = playing;
      if (lead.ended || lead.paused) return;
      for (const v of rest) {
        const end = Math.min(lead.duration || Infinity, v.duration || Infinity);
        if (v.ended || v.paused || lead.currentTime >= end - 0.1) continue;
        if (Math.abs(lead.currentTime - v.currentTime) > 0.12) v.currentTime = lead.currentTime;
      }
    }, 250);
  }

  private restart(): void {
    if (!this.active) return;
    for (const t of this.tiles) {
      if (!t.video.src) continue;
      t.video.pause();
      t.video.currentTime = 0;
    }
    for (const t of this.tiles) if (t.video.src) void t.video.play().catch(() => undefined);
  }

  private setButtonsEnabled(on: boolean): void {
    this.cannotBtn.disabled = !on;
    this.stageButtons.forEach((b) => (b.disabled = !on));
    if (!on) this.submitBtn.disabled = true;
  }

  private markAnswered(queryId: string, at: number): void {
    this.answered.set(queryId, at);
    const key = this.keyOf.get(queryId);
    if (key !== undefined) this.answered.set(key, at);
    const old = performance.now() - 120_000;
    for (const [k, t] of this.answered) if (t < old) this.answered.delete(k);
  }

  private unmarkAnswered(queryId: string): void {
    this.answered.delete(queryId);
    const key = this.keyOf.get(queryId);
    if (key !== undefined) this.answered.delete(key);
  }

  private blocked(q: Query, since: number): boolean {
    for (const k of [q.id, pairKey(q)]) {
      const t = this.answered.get(k);
      if (t !== undefined && t >= since) return true;
    }
    return false;
  }

  /** Every clip has played `min_plays` times and `min_answer_s` passed since it was shown. */
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
    const complete = this.complete();
    this.el.dataset.watched = String(open);
    this.el.dataset.ready = String(open && complete);
    this.submitBtn.disabled = !(q && open && complete);
    this.cannotBtn.classList.toggle("rank-locked", !open && q !== null);
    this.watchHint.classList.remove("nudge");
    if (!q) {
      this.watchHint.textContent = "";
      return;
    }
    const k = this.places.length;
    const placed = this.places.filter((p) => p !== null).length;
    if (!open) {
      const n = this.tiles.filter((t) => (this.plays.get(t.video) ?? 0) >= this.rules.min_plays).length;
      const need = this.rules.min_plays > 1 ? `${this.rules.min_plays} times` : "once";
      this.watchHint.textContent = this.watched.has(q.id)
        ? "Watch the clips first…"
        : `Watch all ${k} clips first: answers count once each has played ${need} (${n} of ${k} done). You can place them meanwhile.`;
      if (Number.isFinite(this.openedAt)) {
        const wait = this.openedAt + this.rules.min_answer_s * 1000 - performance.now();
        if (wait > 0) this.gateTimer = window.setTimeout(() => this.updateGate(), wait + 20);
      }
    } else if (!complete) {
      this.watchHint.textContent = `Give every clip a place: ${placed} of ${k} placed. Press 1–${k} on a clip, click them best → worst, or drag them onto the places.`;
    } else {
      this.watchHint.textContent = `Your order: ${describeRanks(denseRanks(this.places as number[]))}. Press Enter to submit.`;
    }
  }

  /** Say ``text`` in the hint line (``warn``: as a nudge). */
  private say(text: string, warn: boolean): void {
    this.watchHint.textContent = text;
    if (warn) this.nudge();
  }

  private nudge(): void {
    if (!this.query) return;
    this.watchHint.classList.remove("nudge");
    void this.watchHint.offsetWidth; // restart the animation
    this.watchHint.classList.add("nudge");
  }

  private async prefetchAhead(current: Query): Promise<void> {
    const gen = ++this.aheadGen;
    const pending = [...this.outbox.pendingQueryIds()].slice(0, 18);
    let res;
    try {
      res = await queueApi.ahead("ranking", 3, [current.id, ...pending]);
    } catch {
      return;
    }
    if (gen !== this.aheadGen) return;
    this.rules = res.rules;
    this.updateGate();
    const want = res.queries.filter((q) => q.a.length >= 2 && !this.blocked(q, 0)).slice(0, 2);
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

  /** The clip tiles of a ranking (they start loading at once, off screen until shown). */
  private tilesFor(q: Query): ClipTile[] {
    return q.a.map((c, i) => new ClipTile(c, { label: clipLetter(i), side: "rank", controls: true, keyHelp: true }));
  }

  private async skipCurrent(): Promise<void> {
    const q = this.query;
    if (!q || this.loading) return;
    this.openedAt = Infinity;
    this.updateGate();
    this.watchHint.textContent = "Skipped · loading the next ranking…";
    try {
      await queueApi.skip(q.id);
    } catch {
      void this.loadNext(q.id);
      return;
    }
    void this.loadNext();
  }

  async refreshHistory(): Promise<void> {
    let rows: MineRow[];
    try {
      rows = (await api.mine(50)).judgements.filter((r) => r.kind === "ranking").slice(0, 8);
    } catch {
      return;
    }
    clear(this.historyList);
    if (!rows.length) {
      this.historyList.append(h("li", { class: "history-empty", text: "Nothing yet. Your rankings appear here; you can undo them until the trainer collects them." }));
      return;
    }
    for (const r of rows) {
      const li = h(
        "li",
        { class: "history-row", "data-testid": "mine-row", "data-query-id": r.query_id, "data-judgement-id": r.id },
        h("span", { class: `history-answer rank-history ${r.ranks ? "" : "p-none"}`, text: said(r.ranks) }),
        h("span", { class: "history-q", text: r.query_id.slice(0, 10) }),
        h("span", { class: "history-t", text: ago(r.created_at) }),
      );
      if (r.undoable) {
        const b = h("button", { class: "btn btn-small btn-ghost", type: "button", "data-testid": "mine-undo" }, "Undo");
        b.addEventListener("click", () => void this.undoRow(r));
        li.append(b);
      } else {
        li.append(h("span", { class: "history-locked", title: "The trainer has collected this ranking", text: "collected" }));
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
      toast("Ranking undone", { tone: "info" });
      const q = (await api.query(r.query_id)).query;
      if (q) this.open(q, r.ranks ?? null);
    } catch (err) {
      toast(
        err instanceof ApiError && err.status === 409
          ? "Too late to undo: the trainer has already collected this ranking."
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
