// Radial behaviour tree (paper 000, Fig. 2): leaves on the inner ring, parents on the rings
// outside it (d3 hierarchy + partition), bundled curves inside the ring (d3 curveBundle along
// the tree): grey suggestions (opacity by disagreement) and your history, coloured from the
// preferred behaviour to the unpreferred one. Pan with drag, zoom with the wheel.
// Nothing here knows any reward: the data has ids, tree structure and edge weights only.
import { type HierarchyNode, type HierarchyRectangularNode, hierarchy, partition } from "d3-hierarchy";
import { arc, curveBundle, lineRadial } from "d3-shape";

import type { HistoryEdge, SuggestionEdge, TreeNodeData } from "./api";

export type { HistoryEdge, SuggestionEdge, TreeNodeData };

export type Side = "a" | "b";

export interface RadialEvents {
  clickNode(node: TreeNodeData, ev: MouseEvent): void;
  hoverNode(node: TreeNodeData | null, ev: MouseEvent | null): void;
}

type RNode = HierarchyRectangularNode<TreeNodeData>;
const SVG = "http://www.w3.org/2000/svg";
/** Above this many leaves the inner ring shows each leaf's parent as one aggregated arc. */
export const AGGREGATE_ABOVE = 400;
export const PREFERRED = "#059669";
export const UNPREFERRED = "#e11d48";
export const EQUAL = "#7c3aed";

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number> = {}): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

export class RadialChart {
  readonly el: SVGSVGElement;
  private world: SVGGElement;
  private edgeLayer: SVGGElement;
  private arcLayer: SVGGElement;
  private defs: SVGDefsElement;
  private root: RNode | null = null;
  private levels = 0;
  private aggregated = false;
  private size = 600;
  private rIn = 0;
  private bandW = 0;
  private byId = new Map<string, RNode>();
  private leafOf = new Map<string, RNode>();
  /** arc element of every drawn node, by node id */
  private arcs = new Map<string, SVGPathElement>();
  private k = 1;
  private tx = 0;
  private ty = 0;
  private drag: { x: number; y: number; tx: number; ty: number; moved: boolean } | null = null;
  private suppressClick = false;
  private selA = new Set<string>();
  private selB = new Set<string>();
  private suggestions: SuggestionEdge[] = [];
  private history: HistoryEdge[] = [];

  constructor(private readonly events: RadialEvents) {
    this.el = svg("svg", { class: "radial", "data-testid": "radial", role: "img", "aria-label": "Behaviour tree" });
    this.defs = svg("defs");
    this.world = svg("g", { class: "radial-world" });
    this.edgeLayer = svg("g", { class: "edges" });
    this.arcLayer = svg("g", { class: "arcs" });
    this.world.append(this.edgeLayer, this.arcLayer);
    this.el.append(this.defs, this.world);
    this.installPanZoom();
  }

  /** Build the layout and draw everything (returns ms spent in script). */
  render(rootData: TreeNodeData, levels: number, suggestions: SuggestionEdge[], history: HistoryEdge[], size: number): number {
    const t0 = performance.now();
    performance.mark("explore-draw-start");
    this.size = Math.max(240, size);
    this.levels = levels;
    this.suggestions = suggestions;
    this.history = history;
    const h: HierarchyNode<TreeNodeData> = hierarchy(rootData, (d) => d.children).count();
    this.root = partition<TreeNodeData>().size([2 * Math.PI, levels + 1])(h);
    this.aggregated = rootData.size > AGGREGATE_ABOVE;
    this.byId.clear();
    this.leafOf.clear();
    this.root.each((n) => {
      this.byId.set(n.data.id, n);
      if (!n.children && n.data.segment) this.leafOf.set(n.data.segment, n);
    });
    const s = this.size;
    this.el.setAttribute("viewBox", `${-s / 2} ${-s / 2} ${s} ${s}`);
    this.el.setAttribute("width", String(s));
    this.el.setAttribute("height", String(s));
    const rOut = s / 2 - 6;
    this.rIn = rOut * 0.6;
    this.bandW = (rOut - this.rIn) / levels;
    this.drawArcs();
    this.drawEdges();
    this.applyTransform();
    const ms = performance.now() - t0;
    performance.measure("explore-draw-script", "explore-draw-start");
    // two frames on: the first frame after drawing (style, layout, paint) has been produced
    requestAnimationFrame(() =>
      requestAnimationFrame(() => {
        performance.measure("explore-draw", "explore-draw-start");
        this.el.setAttribute("data-drawn", String(rootData.size));
      }),
    );
    return ms;
  }

  /** Ring band of depth d: leaves (d = levels) innermost, depth 1 outermost. */
  private band(depth: number): [number, number] {
    const k = this.levels - depth; // 0 for leaves
    return [this.rIn + k * this.bandW + 1, this.rIn + (k + 1) * this.bandW - 1];
  }

  private drawArcs(): void {
    this.arcLayer.replaceChildren();
    this.arcs.clear();
    if (!this.root) return;
    const a = arc<RNode>()
      .startAngle((d) => d.x0)
      .endAngle((d) => d.x1)
      .innerRadius((d) => this.band(this.visualDepth(d))[0])
      .outerRadius((d) => this.band(this.visualDepth(d))[1])
      .padAngle((d) => (d.children ? 0.004 : this.root && this.root.data.size > 300 ? 0 : 0.003))
      .padRadius(this.rIn);
    const frag = document.createDocumentFragment();
    for (const n of this.root.descendants()) {
      if (n.depth === 0) continue;
      if (this.aggregated && !n.children) {
        // leaves are drawn as their parent's bundle; the leaves themselves appear when zoomed in
        const leaf = svg("path", { d: a(n) ?? "", class: "arc arc-leaf arc-zoomleaf", "data-node": n.data.id, "data-size": 1 });
        if (n.data.segment) leaf.setAttribute("data-segment", n.data.segment);
        this.bind(leaf, n);
        frag.append(leaf);
        this.arcs.set(n.data.id, leaf);
        continue;
      }
      const leafRing = !n.children || (this.aggregated && n.depth === this.levels - 1);
      const p = svg("path", {
        d: a(n) ?? "",
        class: leafRing ? (n.children ? "arc arc-leaf arc-bundle" : "arc arc-leaf") : `arc arc-parent arc-d${n.depth}`,
        "data-node": n.data.id,
        "data-size": n.data.size,
      });
      if (n.data.segment) p.setAttribute("data-segment", n.data.segment);
      const [cx, cy] = a.centroid(n);
      p.setAttribute("data-cx", cx.toFixed(1));
      p.setAttribute("data-cy", cy.toFixed(1));
      if (this.aggregated && n.depth === this.levels - 1) {
        // a copy on the leaf ring, plus the parent ring itself
        const q = svg("path", { d: a(n) ?? "", class: `arc arc-parent arc-d${n.depth}`, "data-node": n.data.id, "data-size": n.data.size });
        this.bind(q, n);
        frag.append(q);
        this.arcs.set(n.data.id, q);
        p.setAttribute("d", this.leafRingArc(n));
        p.setAttribute("data-node", `${n.data.id}`);
        p.setAttribute("data-bundle", "1");
      }
      this.bind(p, n);
      frag.append(p);
      if (!p.hasAttribute("data-bundle")) this.arcs.set(n.data.id, p);
      else this.arcs.set(`${n.data.id}#bundle`, p);
    }
    this.arcLayer.append(frag);
    this.paintSelection();
  }

  private leafRingArc(n: RNode): string {
    const [r0, r1] = this.band(this.levels);
    return (
      arc<RNode>()
        .startAngle(n.x0)
        .endAngle(n.x1)
        .innerRadius(r0)
        .outerRadius(r1)
        .padAngle(0.002)
        .padRadius(this.rIn)(n) ?? ""
    );
  }

  private visualDepth(n: RNode): number {
    return n.children ? n.depth : this.levels;
  }

  private bind(p: SVGPathElement, n: RNode): void {
    p.addEventListener("click", (ev) => {
      if (this.suppressClick) return;
      this.events.clickNode(n.data, ev);
    });
    p.addEventListener("pointerenter", (ev) => this.events.hoverNode(n.data, ev));
    p.addEventListener("pointerleave", () => this.events.hoverNode(null, null));
  }

  /** Polar point [angle, radius] of a node for the bundled curves (root at the centre). */
  private point(n: RNode): [number, number] {
    const ang = (n.x0 + n.x1) / 2;
    const inner = this.rIn - 3;
    if (!n.children) return [ang, inner];
    if (this.aggregated && n.depth === this.levels - 1) return [ang, inner];
    return [ang, (inner * n.depth) / this.levels];
  }

  private endpoint(segment: string): RNode | null {
    const leaf = this.leafOf.get(segment);
    if (!leaf) return null;
    return this.aggregated && leaf.parent ? leaf.parent : leaf;
  }

  private curve(a: RNode, b: RNode): string {
    const line = lineRadial<[number, number]>()
      .angle((p) => p[0])
      .radius((p) => p[1])
      .curve(curveBundle.beta(0.85));
    return line(a.path(b).map((n) => this.point(n))) ?? "";
  }

  private drawEdges(): void {
    this.edgeLayer.replaceChildren();
    this.defs.replaceChildren();
    if (!this.root) return;
    const frag = document.createDocumentFragment();
    const wmax = Math.max(1e-12, ...this.suggestions.map((e) => e.weight));
    for (const e of this.suggestions) {
      const a = this.endpoint(e.a);
      const b = this.endpoint(e.b);
      if (!a || !b || a === b) continue;
      frag.append(
        svg("path", {
          d: this.curve(a, b),
          class: "edge edge-suggestion",
          "stroke-opacity": (0.12 + 0.68 * (e.weight / wmax)).toFixed(3),
          "data-a": e.a,
          "data-b": e.b,
        }),
      );
    }
    this.history.forEach((e, k) => {
      const a = this.endpoint(e.from);
      const b = this.endpoint(e.to);
      if (!a || !b || a === b) return;
      const [pa, pb] = [this.point(a), this.point(b)];
      const xy = (p: [number, number]) => [p[1] * Math.sin(p[0]), -p[1] * Math.cos(p[0])];
      const [x1, y1] = xy(pa);
      const [x2, y2] = xy(pb);
      const gid = `hist-${k}`;
      const g = svg("linearGradient", { id: gid, gradientUnits: "userSpaceOnUse", x1: x1.toFixed(1), y1: y1.toFixed(1), x2: x2.toFixed(1), y2: y2.toFixed(1) });
      g.append(svg("stop", { offset: "0", "stop-color": e.equal ? EQUAL : PREFERRED }), svg("stop", { offset: "1", "stop-color": e.equal ? EQUAL : UNPREFERRED }));
      this.defs.append(g);
      frag.append(
        svg("path", {
          d: this.curve(a, b),
          class: e.equal ? "edge edge-history edge-equal" : "edge edge-history",
          stroke: `url(#${gid})`,
          "data-from": e.from,
          "data-to": e.to,
          "data-gradient": gid,
          "data-testid": "history-edge",
        }),
      );
    });
    this.edgeLayer.append(frag);
  }

  /** Colour the arcs by the current groups (a = left, b = right); cheap: attributes only. */
  setSelection(a: Iterable<string>, b: Iterable<string>): void {
    this.selA = new Set(a);
    this.selB = new Set(b);
    this.paintSelection();
  }

  private paintSelection(): void {
    if (!this.root) return;
    for (const [key, el] of this.arcs) {
      const n = this.byId.get(key.replace(/#bundle$/, ""));
      if (!n) continue;
      const segs = n.data.segments;
      let ia = 0;
      let ib = 0;
      for (const s of segs) {
        if (this.selA.has(s)) ia++;
        else if (this.selB.has(s)) ib++;
      }
      const state = ia === segs.length ? "a" : ib === segs.length ? "b" : ia && !ib ? "part-a" : ib && !ia ? "part-b" : ia && ib ? "part-ab" : "";
      if (state) el.setAttribute("data-sel", state);
      else el.removeAttribute("data-sel");
    }
  }

  hasNode(id: string): boolean {
    return this.byId.has(id);
  }

  // ------------------------------------------------------------------ pan and zoom
  /** Zoom at which an aggregated inner ring shows its single behaviours. */
  static readonly LEAF_ZOOM = 3;

  private applyTransform(): void {
    this.el.classList.toggle("zoomed", this.k >= RadialChart.LEAF_ZOOM);
    this.world.setAttribute("transform", `translate(${this.tx.toFixed(1)},${this.ty.toFixed(1)}) scale(${this.k.toFixed(4)})`);
  }

  resetView(): void {
    this.k = 1;
    this.tx = 0;
    this.ty = 0;
    this.applyTransform();
  }

  private toLocal(ev: MouseEvent): [number, number] {
    const r = this.el.getBoundingClientRect();
    const s = this.size;
    return [((ev.clientX - r.left) / r.width - 0.5) * s, ((ev.clientY - r.top) / r.height - 0.5) * s];
  }

  private installPanZoom(): void {
    this.el.addEventListener(
      "wheel",
      (ev) => {
        ev.preventDefault();
        const [x, y] = this.toLocal(ev);
        const k1 = Math.min(12, Math.max(0.6, this.k * Math.exp(-ev.deltaY * 0.0015)));
        // keep the point under the pointer where it is
        this.tx = x - ((x - this.tx) * k1) / this.k;
        this.ty = y - ((y - this.ty) * k1) / this.k;
        this.k = k1;
        this.applyTransform();
      },
      { passive: false },
    );
    this.el.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      this.drag = { x: ev.clientX, y: ev.clientY, tx: this.tx, ty: this.ty, moved: false };
    });
    window.addEventListener("pointermove", (ev) => {
      const d = this.drag;
      if (!d) return;
      const dx = ev.clientX - d.x;
      const dy = ev.clientY - d.y;
      if (!d.moved && Math.hypot(dx, dy) < 4) return;
      d.moved = true;
      const r = this.el.getBoundingClientRect();
      const scale = this.size / Math.max(1, r.width);
      this.tx = d.tx + dx * scale;
      this.ty = d.ty + dy * scale;
      this.applyTransform();
    });
    window.addEventListener("pointerup", () => {
      if (this.drag?.moved) {
        this.suppressClick = true;
        window.setTimeout(() => (this.suppressClick = false), 0);
      }
      this.drag = null;
    });
    this.el.addEventListener("dblclick", (ev) => {
      ev.preventDefault();
      this.resetView();
    });
  }
}
