// Hover previews (paper 000, future work): a leaf plays its clip in a small looping video; a
// parent plays a strip of representative clips (its medoid and two far members, chosen by the
// server) and how alike its members are. Clip lookups are cached per behaviour.
import { type Clip, type Reply, request } from "./api";
import { ClipTile } from "./clip";
import { h } from "./dom";
import type { TreeNodeData } from "./radial";

const clipCache = new Map<string, Promise<Clip | null>>();

/** Clip records of behaviours (render requested at ``priority``), cached by segment id. */
export function clipsFor(ids: string[], priority = 1): Promise<(Clip | null)[]> {
  const missing = ids.filter((s) => !clipCache.has(s));
  if (missing.length) {
    const batch = request<Reply<"/api/groupwise/clips", "get">>("GET", `/api/groupwise/clips?ids=${missing.map(encodeURIComponent).join(",")}&priority=${priority}`);
    for (const s of missing) {
      clipCache.set(
        s,
        batch.then(
          (r) => r.clips.find((c) => c.segment_id === s) ?? null,
          () => {
            clipCache.delete(s);
            return null;
          },
        ),
      );
    }
  }
  return Promise.all(ids.map((s) => clipCache.get(s) as Promise<Clip | null>));
}

/** Have the studio render the clips of ``ids`` before they are shown (priority 1): a record
 * that comes back still rendering is not cached, so showing the clip later asks again and gets
 * it ready when the render has finished meanwhile. */
export function prefetchClips(ids: string[]): void {
  const missing = [...new Set(ids)].filter((s) => !clipCache.has(s));
  for (let i = 0; i < missing.length; i += 16) {
    const part = missing.slice(i, i + 16); // the studio takes at most 16 clips per request
    void clipsFor(part, 1).then((clips) =>
      clips.forEach((c, k) => {
        if (!c || c.status !== "ready") clipCache.delete(part[k]);
      }),
    );
  }
}

/** Forget cached records whose clip was still rendering (their status changes). */
export function forgetPending(): void {
  for (const [k, p] of clipCache) void p.then((c) => c && c.status !== "ready" && clipCache.delete(k));
}

export function shortId(s: string): string {
  return s.replace(/^s-/, "").slice(0, 6);
}

export class Preview {
  readonly el: HTMLElement;
  private body: HTMLElement;
  private title: HTMLElement;
  private tiles: ClipTile[] = [];
  private token = 0;
  private timer: number | undefined;

  constructor() {
    this.title = h("div", { class: "preview-title" });
    this.body = h("div", { class: "preview-body" });
    this.el = h("div", { class: "preview", hidden: true, "data-testid": "preview" }, this.title, this.body);
  }

  show(node: TreeNodeData | null): void {
    window.clearTimeout(this.timer);
    if (!node) {
      this.timer = window.setTimeout(() => this.hide(), 150);
      return;
    }
    this.timer = window.setTimeout(() => void this.open(node), 90);
  }

  hide(): void {
    this.token++;
    this.tiles.forEach((t) => t.dispose());
    this.tiles = [];
    this.body.replaceChildren();
    this.el.hidden = true;
  }

  private async open(node: TreeNodeData): Promise<void> {
    const my = ++this.token;
    this.tiles.forEach((t) => t.dispose());
    this.tiles = [];
    this.body.replaceChildren();
    this.el.hidden = false;
    const leaf = !node.children || node.segments.length === 1;
    const ids = leaf ? [node.segment ?? node.segments[0]] : (node.reps ?? node.segments.slice(0, 3));
    this.el.dataset.kind = leaf ? "leaf" : "group";
    this.el.dataset.node = node.id;
    if (leaf) {
      this.title.textContent = `Behaviour ${shortId(ids[0])}`;
    } else {
      const spread = node.spread == null ? "" : ` · members ${node.spread.toFixed(2)}× as far apart as a random pair`;
      this.title.textContent = `Group of ${node.size}: medoid and two far members${spread}`;
    }
    const clips = await clipsFor(ids, leaf ? 0 : 1);
    if (my !== this.token) return;
    const strip = h("div", { class: leaf ? "preview-strip preview-one" : "preview-strip" });
    clips.forEach((c, k) => {
      if (!c) return;
      const tile = new ClipTile(c, { loop: true, label: leaf ? undefined : k === 0 ? "medoid" : "far", controls: false });
      tile.el.classList.add("preview-clip");
      this.tiles.push(tile);
      strip.append(tile.el);
      void tile.ready.then((ok) => {
        if (!ok || my !== this.token) return;
        void tile.video.play().catch(() => undefined); // groups play their members too (#25)
      });
    });
    this.body.append(strip);
  }
}
