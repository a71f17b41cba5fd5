// Comparison view of two groups (paper 000, §3.4): looping clips of each side in a grid that
// stays readable up to 8 per side; remove a member or move it to the other side; see how alike
// each side's members are (mean DTW, from the server) with the likely outlier marked.
import { backoffSleep, type Clip, type Spread } from "./api";
import { ClipTile } from "./clip";
import { h, kbd } from "./dom";
import { clipsFor, shortId } from "./preview";
import type { Side } from "./radial";

export type { Spread };

export interface GroupEvents {
  /** A member was removed or moved (the groups changed by hand). */
  changed(): void;
}

interface Tile {
  id: string;
  tile: ClipTile | null;
  el: HTMLElement;
}

export class GroupPanel {
  readonly el: HTMLElement;
  private grid: HTMLElement;
  private count: HTMLElement;
  private similarity: HTMLElement;
  private tiles = new Map<string, Tile>();
  members: string[] = [];
  private outlier: string | null = null;

  constructor(
    readonly side: Side,
    private readonly limit: number,
    private readonly owner: { move(id: string, from: Side): void; remove(id: string, from: Side): void; target(side: Side): void },
  ) {
    const name = side === "a" ? "Left group" : "Right group";
    this.count = h("span", { class: "gw-count", "data-testid": `count-${side}`, text: "0" });
    this.similarity = h("span", { class: "gw-similarity", "data-testid": `spread-${side}` });
    this.grid = h("div", { class: "gw-grid", "data-testid": `group-${side}`, "data-n": "0" });
    const head = h("div", { class: "gw-side-head" }, h("span", { class: `gw-side-name gw-side-${side}`, text: name }), this.count, this.similarity);
    head.addEventListener("click", () => owner.target(side));
    this.el = h("section", { class: `gw-side gw-side-${side}`, "data-side": side }, head, this.grid);
    this.renderEmpty();
  }

  setTarget(on: boolean): void {
    this.el.classList.toggle("gw-target", on);
  }

  private renderEmpty(): void {
    if (this.members.length) return;
    this.grid.replaceChildren(
      h(
        "div",
        { class: "gw-empty" },
        h("span", { text: "Empty. Click a group on the ring's outer bands, or single behaviours on the inner ring, or press " }),
        kbd("N"),
        h("span", { text: " for a suggestion." }),
      ),
    );
  }

  /** Show exactly ``ids`` (tiles of members that stay are kept playing). */
  set(ids: string[]): void {
    const keep = new Set(ids);
    for (const [id, t] of this.tiles) {
      if (!keep.has(id)) {
        t.tile?.dispose();
        this.tiles.delete(id);
      }
    }
    this.members = [...ids];
    this.count.textContent = `${ids.length} / ${this.limit}`;
    this.count.classList.toggle("gw-over", ids.length > this.limit);
    this.grid.dataset.n = String(ids.length);
    const cols = ids.length <= 2 ? 1 : ids.length <= 4 ? 2 : 3;
    this.grid.dataset.cols = String(cols);
    this.grid.style.setProperty("--rows", String(Math.max(1, Math.ceil(ids.length / cols))));
    if (!ids.length) {
      this.tiles.clear();
      this.renderEmpty();
      this.setSpread(null);
      return;
    }
    const nodes: HTMLElement[] = [];
    const fresh: string[] = [];
    for (const id of ids) {
      let t = this.tiles.get(id);
      if (!t) {
        t = { id, tile: null, el: this.tileShell(id) };
        this.tiles.set(id, t);
        fresh.push(id);
      }
      nodes.push(t.el);
    }
    this.grid.replaceChildren(...nodes);
    if (fresh.length) void this.load(fresh);
    this.markOutlier();
  }

  private tileShell(id: string): HTMLElement {
    const move = h("button", { class: "gw-tile-btn", type: "button", title: "Move to the other side", "data-testid": "move", text: this.side === "a" ? "→" : "←" });
    const remove = h("button", { class: "gw-tile-btn", type: "button", title: "Remove from this group", "data-testid": "remove", text: "×" });
    move.addEventListener("click", (ev) => {
      ev.stopPropagation();
      move.blur();
      this.owner.move(id, this.side);
    });
    remove.addEventListener("click", (ev) => {
      ev.stopPropagation();
      remove.blur();
      this.owner.remove(id, this.side);
    });
    return h(
      "figure",
      { class: "gw-tile", "data-segment": id, "data-testid": "member" },
      h("div", { class: "gw-tile-media" }),
      h("figcaption", {}, h("span", { class: "gw-tile-id", text: shortId(id) }), h("span", { class: "gw-outlier-badge", text: "farthest" }), move, remove),
    );
  }

  /** Clips of ``ids``: fetched again with backoff after a network drop (and a video that failed
   * to load is tried again), until the member leaves the group. */
  private async load(ids: string[]): Promise<void> {
    let todo = ids;
    let wait = 500;
    for (let attempt = 0; todo.length && attempt < 12; attempt++) {
      if (attempt) {
        await backoffSleep(wait);
        wait = Math.min(wait * 2, 8000);
      }
      todo = todo.filter((id) => this.tiles.get(id) && !this.tiles.get(id)?.tile);
      if (!todo.length) return;
      const clips = await clipsFor(todo, 0);
      const failed: string[] = [];
      todo.forEach((id, k) => {
        const t = this.tiles.get(id);
        const c: Clip | null = clips[k];
        if (!t || t.tile) return;
        if (!c) failed.push(id);
        else this.attach(t, c, attempt);
      });
      todo = failed;
    }
  }

  private attach(t: Tile, c: Clip, attempt: number): void {
    const tile = new ClipTile(c, { loop: true, side: this.side === "a" ? "left" : "right" });
    t.tile = tile;
    t.el.querySelector(".gw-tile-media")?.replaceChildren(tile.el);
    void tile.ready.then((ok) => {
      if (ok) void tile.video.play().catch(() => undefined);
      else if (c.status === "ready" && this.tiles.get(t.id) === t && t.tile === tile && attempt < 8) {
        // the video itself did not load (e.g. the connection dropped): try it again
        void backoffSleep(Math.min(8000, 1000 * 2 ** attempt)).then(() => {
          if (this.tiles.get(t.id) !== t || t.tile !== tile) return;
          tile.dispose();
          this.attach(t, c, attempt + 1);
        });
      }
    });
  }

  replay(): void {
    for (const t of this.tiles.values()) {
      const v = t.tile?.video;
      if (v && v.readyState >= 2) {
        v.currentTime = 0;
        void v.play().catch(() => undefined);
      }
    }
  }

  pause(): void {
    for (const t of this.tiles.values()) t.tile?.video.pause();
  }

  play(): void {
    for (const t of this.tiles.values()) void t.tile?.video.play().catch(() => undefined);
  }

  setSpread(s: Spread | null): void {
    this.outlier = s?.outlier ?? null;
    if (!s || s.relative === null) {
      this.similarity.textContent = "";
      this.similarity.removeAttribute("data-relative");
    } else {
      const word = s.relative < 0.5 ? "very alike" : s.relative < 0.9 ? "alike" : "diverse";
      this.similarity.textContent = `${word}: members ${s.relative.toFixed(2)}× as far apart as a random pair (mean DTW ${s.mean_dtw?.toFixed(2)})`;
      this.similarity.dataset.relative = String(s.relative);
    }
    this.markOutlier();
  }

  private markOutlier(): void {
    for (const t of this.tiles.values()) t.el.classList.toggle("gw-outlier", t.id === this.outlier);
  }
}
