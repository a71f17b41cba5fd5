// Rank view (issue 57): the k clips of a ranking query in a grid, looping together, to be ordered
// from best to worst (ties allowed). A clip gets its place by a number key (1..k) while the
// pointer is on it or it has the focus, by clicking clips in order best → worst (Shift+click: the
// same place as the last one, a tie), by the place buttons under it, or by dragging it onto a
// place of the order strip. Backspace or Ctrl+Z takes back the last placement, Esc all of them.
// Enter (or the button) submits once every clip has a place and every clip has played once;
// ↓ says "can't tell"; N skips. The queue is Compare's (answer_queue.ts): the answer goes through
// the outbox (U undoes it while the toast offers it), and the next rankings' clips load off screen
// while this one plays (GET /api/queries/ahead), so no spinner shows after the first.
import { api, type JudgementItem, type MineRow, type Outbox, type Query } from "./api";
import { AnswerQueueView } from "./answer_queue";
import { ClipTile } from "./clip";
import { clear, h, keyButton } from "./dom";
import type { KeyAction } from "./keys";
import type { Progress } from "./progress";
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

export class RankView extends AnswerQueueView {
  readonly el: HTMLElement;
  private strip: HTMLElement;
  private playerRow: HTMLElement;
  private submitBtn: HTMLButtonElement;
  private cannotBtn: HTMLButtonElement;
  private stageButtons: HTMLButtonElement[] = [];
  private shown: Shown[] = [];
  /** Each clip's place (1 = best; equal places are ties), null until given. */
  private places: (number | null)[] = [];
  private placements: Placement[] = [];
  /** The clip that number keys place: the one under the pointer, else the focused one. */
  private hovered: number | null = null;

  constructor(outbox: Outbox, progress: Progress) {
    super(outbox, progress, {
      kind: "ranking",
      showable: (q) => q.a.length >= 2,
      stageClass: "stage rank-stage",
      replayLabel: "Replay all",
      history: {
        title: "Your recent rankings",
        rows: async () => (await api.mine(50)).judgements.filter((r) => r.kind === "ranking").slice(0, 8),
        answer: (r) => h("span", { class: `history-answer rank-history ${r.ranks ? "" : "p-none"}`, text: said(r.ranks) }),
        emptyText: "Nothing yet. Your rankings appear here; you can undo them until the trainer collects them.",
        lockedTitle: "The trainer has collected this ranking",
      },
      texts: {
        loadingNext: "Loading the next ranking…",
        skipped: "Skipped · loading the next ranking…",
        notSaved: "Ranking not saved",
        undone: "Ranking undone",
        undoneAgain: "Ranking undone · change it and submit again",
        tooLate: "Too late to undo: the trainer has already collected this ranking.",
      },
    });
    this.strip = h("div", { class: "rank-order", "data-testid": "rank-order", role: "list", "aria-label": "Your order, best to worst" });
    this.cannotBtn = keyButton("btn btn-answer ans-cannot", "↓", "Can't tell", "rank-cannot", () => this.sendAnswer({ ranks: null }, this.draft(null)));
    this.submitBtn = keyButton("btn btn-primary btn-answer rank-submit", "Enter", "Submit ranking", "rank-submit", () => this.submit());
    this.playerRow = h("div", { class: "rank-player", "data-testid": "rank-player" });
    const undoPlace = keyButton("btn btn-ghost", "⌫", "Undo placement", "rank-undo-place", () => this.undoPlacement());
    this.stageButtons = [this.replayButton, undoPlace, this.skipButton];
    window.addEventListener("resize", () => this.layout());
    this.el = this.frame({
      name: "rank",
      title: "Order these behaviours from best to worst",
      hint: "All clips loop together; ties are fine.",
      bar: h("div", { class: "rank-bar" }, this.strip, this.cannotBtn, this.submitBtn),
      belowClass: "rank-below",
      below: [this.replayButton, undoPlace, this.skipButton, this.playerRow],
    });
  }

  override show(): void {
    this.layout();
    super.show();
  }

  // ----- keys ------------------------------------------------------------------------------------
  protected onAnswerKey(action: KeyAction): boolean {
    switch (action) {
      case "left":
      case "right":
        this.moveFocus(action === "left" ? -1 : 1);
        return this.query !== null;
      case "cannot":
        this.sendAnswer({ ranks: null }, this.draft(null));
        return true;
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
    const ranks = denseRanks(this.places as number[]);
    this.sendAnswer({ ranks }, this.draft(ranks));
  }

  /** The places an undo of ``ranks`` puts back (can't tell: the places given so far). */
  private draft(ranks: number[] | null): (number | null)[] {
    return ranks ? ranks.map((r) => r + 1) : [...this.places];
  }

  protected describe(item: JudgementItem): string {
    return said(item.body.ranks);
  }

  /** Show ``q`` here (an answer undone elsewhere), its earlier ranks placed again. */
  open(q: Query, ranks: number[] | null): void {
    this.loadGen += 1;
    this.display(q, undefined, ranks ? ranks.map((r) => r + 1) : null);
  }

  protected showUndone(q: Query, row: MineRow): void {
    this.open(q, row.ranks ?? null);
  }

  // ----- the screen --------------------------------------------------------------------------------
  protected override teardown(): void {
    super.teardown();
    this.shown = [];
    this.hovered = null;
    clear(this.playerRow);
  }

  protected override resetAnswer(): void {
    this.places = [];
    this.placements = [];
    clear(this.strip);
    this.el.dataset.watched = "false";
    this.el.dataset.ranks = "";
  }

  protected emptyState(skipped: boolean): { title: string; text: string } {
    return {
      title: skipped ? "No more rankings after this one" : "No ranking waiting",
      text: "No ranking is waiting for you. The trainer publishes new ones each round; this page checks every few seconds.",
    };
  }

  protected display(q: Query, loaded?: ClipTile[], places?: (number | null)[] | null): void {
    this.begin(q);
    const k = q.a.length;
    if (k < 2) {
      this.displayEmpty(false, "This ranking has no clips to order.");
      return;
    }
    const tiles = this.claimTiles(q, loaded);
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
    this.started(q);
    this.renderPlaces();
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

  protected setButtonsEnabled(on: boolean): void {
    this.cannotBtn.disabled = !on;
    this.stageButtons.forEach((b) => (b.disabled = !on));
    if (!on) this.submitBtn.disabled = true;
  }

  protected showGate(q: Query | null, open: boolean): void {
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
      this.watchHint.textContent = this.watched.has(q.id)
        ? "Watch the clips first…"
        : `Watch all ${k} clips first: answers count once each has played ${this.playsNeeded()} (${this.playedEnough()} of ${k} done). You can place them meanwhile.`;
      this.recheckGateLater();
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

  /** The clip tiles of a ranking (they start loading at once, off screen until shown). */
  protected tilesFor(q: Query): ClipTile[] {
    return q.a.map((c, i) => new ClipTile(c, { label: clipLetter(i), side: "rank", controls: true, keyHelp: true }));
  }
}
