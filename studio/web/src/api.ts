// Contract C client: JSON over fetch with the session cookie, typed responses, an outbox that
// never loses an answer (queued in localStorage, resent with the same client_key).

import type { components, paths } from "./api-types";

// Types of the studio API, generated from its OpenAPI schema (studio/web/openapi.json, written by
// `python -m preflab.studio.openapi`) into api-types.ts by `npm run gen:api`: never edit by hand.
type Schemas = components["schemas"];
type Method = "get" | "post" | "delete";
type Operation<P extends keyof paths, M extends Method> = paths[P] extends Record<M, infer O> ? O : never;
type JsonOf<R> = R extends { content: { "application/json": infer B } } ? B : never;

/** The JSON body a successful `method path` returns (its 200 or 201 response). */
export type Reply<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { responses: infer R }
    ? R extends { 200: infer OK } ? JsonOf<OK> : R extends { 201: infer Created } ? JsonOf<Created> : never
    : never;

/** The JSON body `method path` takes. */
export type RequestBody<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { requestBody: { content: { "application/json": infer B } } } ? B : never;

export type Me = Schemas["PublicAnnotator"];
export type Status = Schemas["Status"];
export type MediaStatus = Schemas["Clip"]["status"];
export type Clip = Schemas["Clip"];
export type Query = Schemas["QueryView"];
export type Stream = Schemas["StreamView"];
export type MineRow = Schemas["MyJudgement"];
export type AnnotatorRow = Schemas["AnnotatorRow"];
export type RoundRow = Schemas["RoundRow"];
export type Overview = Schemas["Overview"];
export type Invite = Schemas["Invite"];
export type RatingSample = Schemas["RatingItem"];
export type RoundView = Schemas["ExplorationRound"];
export type TreeNodeData = Schemas["TreeNode"];
export type SuggestionEdge = Schemas["SuggestionEdge"];
export type HistoryEdge = Schemas["HistoryEdge"];
export type GroupSuggestion = Schemas["GroupSuggestion"];
export type Spread = Schemas["Spread"];

/** The server answered with an error status; `detail` is its message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    /** Seconds the server's Retry-After header asks to wait before sending again (null: none). */
    readonly retryAfterS: number | null = null,
  ) {
    super(detail);
  }
}

/** The server could not be reached (or answered 5xx): retry later. */
export class NetworkError extends Error {}

type Listener = () => void;
const unauthorizedListeners: Listener[] = [];

/** Called once when any request comes back 401 (invalid or expired link). */
export function onUnauthorized(fn: Listener): void {
  unauthorizedListeners.push(fn);
}

/** The path prefix the studio is served under (``preflab studio --root-path``; issue #61), from
 * the page's ``<meta name="preflab-root">`` that the server writes; "" at the site's root. */
export const ROOT = document.querySelector<HTMLMetaElement>('meta[name="preflab-root"]')?.content ?? "";

/** ``path`` (absolute, as the API names it: /api/..., /media/...) under the studio's root. */
export function rooted(path: string): string {
  return path.startsWith("/") ? ROOT + path : path;
}

export async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(rooted(path), {
      method,
      credentials: "same-origin",
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (err) {
    throw new NetworkError(String(err));
  }
  if (res.status >= 500) throw new NetworkError(`server error ${res.status}`);
  let data: unknown = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const detail =
      data && typeof data === "object" && "detail" in data
        ? formatDetail((data as { detail: unknown }).detail)
        : `${res.status} ${res.statusText}`;
    if (res.status === 401 && path !== "/api/login") unauthorizedListeners.forEach((f) => f());
    const after = Number.parseFloat(res.headers.get("Retry-After") ?? "");
    throw new ApiError(res.status, detail, Number.isFinite(after) && after >= 0 ? after : null);
  }
  return data as T;
}

function formatDetail(detail: unknown): string {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail))
    return detail
      .map((d) => (d && typeof d === "object" && "msg" in d ? String(d.msg) : String(d)))
      .join("; ");
  return JSON.stringify(detail);
}

export const api = {
  login: (token: string) => request<Reply<"/api/login", "post">>("POST", "/api/login", { token }),
  logout: () => request<Reply<"/api/logout", "post">>("POST", "/api/logout"),
  me: () => request<Reply<"/api/me", "get">>("GET", "/api/me"),
  status: () => request<Reply<"/api/status", "get">>("GET", "/api/status"),
  nextQuery: (kind: string, after?: string) =>
    request<Reply<"/api/queries/next", "get">>(
      "GET",
      `/api/queries/next?kind=${encodeURIComponent(kind)}` +
        (after ? `&after=${encodeURIComponent(after)}` : ""),
    ),
  query: (id: string) =>
    request<Reply<"/api/queries/{query_id}", "get">>("GET", `/api/queries/${encodeURIComponent(id)}`),
  media: (key: string) =>
    request<Reply<"/api/media/{key}", "get">>("GET", `/api/media/${encodeURIComponent(key)}`),
  undo: (id: string) =>
    request<Reply<"/api/judgements/{jid}", "delete">>("DELETE", `/api/judgements/${encodeURIComponent(id)}`),
  mine: (limit = 50) =>
    request<Reply<"/api/judgements/mine", "get">>("GET", `/api/judgements/mine?limit=${limit}`),
  nextStream: () => request<Reply<"/api/streams/next", "get">>("GET", "/api/streams/next"),
  overview: () => request<Reply<"/api/owner/overview", "get">>("GET", "/api/owner/overview"),
  invite: (name: string, role: Schemas["NewAnnotatorBody"]["role"]) =>
    request<Reply<"/api/owner/annotators", "post">>("POST", "/api/owner/annotators", { name, role }),
};

// ----- routing: who answers (issue 58) ---------------------------------------------------------
export type OwnerRouting = Reply<"/api/owner/routing", "get">;

export const apiRouting = {
  owner: () => request<OwnerRouting>("GET", "/api/owner/routing"),
};

// ----- a study with real people (issue #61) ----------------------------------------------------
export type StudyMe = Reply<"/api/study/me", "get">;
export type OwnerStudy = Reply<"/api/owner/study", "get">;
export type StudyPerson = Schemas["StudyPerson"];

export const apiStudy = {
  me: () => request<StudyMe>("GET", "/api/study/me"),
  owner: () => request<OwnerStudy>("GET", "/api/owner/study"),
  enrolment: (open: boolean) =>
    request<Reply<"/api/owner/study/enrolment", "post">>("POST", "/api/owner/study/enrolment", { open }),
  exclude: (id: string, excluded: boolean, reason = "") =>
    request<Reply<"/api/owner/study/people/{annotator_id}/exclusion", "post">>(
      "POST",
      `/api/owner/study/people/${encodeURIComponent(id)}/exclusion`,
      { excluded, reason },
    ),
};

/** A browser-made unique id (crypto.randomUUID needs a secure context; fall back to random bytes). */
export function uuid(): string {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// ---------------------------------------------------------------------------------------------
// Outbox: answers and rating batches wait here until the server has stored them.

interface OutItemBase {
  client_key: string;
  /** Times the server asked to send it again later (Retry-After); dropped after 5. */
  retries?: number;
}

export interface JudgementItem extends OutItemBase {
  kind: "judgement";
  body: RequestBody<"/api/judgements", "post">;
}

export interface RatingsItem extends OutItemBase {
  kind: "ratings";
  body: RequestBody<"/api/ratings", "post">;
}

export type OutItem = JudgementItem | RatingsItem;

export interface OutboxEvents {
  /** A judgement was stored: its id (for undo). */
  saved(item: JudgementItem, judgementId: string): void;
  /** A rating batch was stored. */
  ratingsStored(item: RatingsItem, n: number): void;
  /** The server refused an item for good (4xx other than 401): it is dropped. */
  rejected(item: OutItem, err: ApiError): void;
  /** Connection state changed: `pending` items are waiting after a network error. */
  connection(ok: boolean, pending: number): void;
}

export class Outbox {
  private items: OutItem[] = [];
  private busy = false;
  private timer: number | undefined;
  private retryMs = 1000;
  private isOnline = true;

  constructor(
    private readonly storageKey: string,
    private readonly events: OutboxEvents,
  ) {
    try {
      const raw = localStorage.getItem(storageKey);
      if (raw) this.items = JSON.parse(raw) as OutItem[];
    } catch {
      this.items = [];
    }
  }

  /** false after a network error, until a send succeeds again. */
  get online(): boolean {
    return this.isOnline;
  }

  get pending(): number {
    return this.items.length;
  }

  /** Query ids answered here but not yet stored by the server. */
  pendingQueryIds(): Set<string> {
    return new Set(this.items.filter((i) => i.kind === "judgement").map((i) => i.body.query_id));
  }

  push(item: OutItem): void {
    this.items.push(item);
    this.save();
    void this.flush();
  }

  /** Removes an item not yet sent (undo before it reached the server). */
  cancel(clientKey: string): boolean {
    if (this.busy && this.items[0]?.client_key === clientKey) return false;
    const n = this.items.length;
    this.items = this.items.filter((i) => i.client_key !== clientKey);
    this.save();
    return this.items.length < n;
  }

  has(clientKey: string): boolean {
    return this.items.some((i) => i.client_key === clientKey);
  }

  retryNow(): void {
    this.retryMs = 1000;
    if (this.timer !== undefined) window.clearTimeout(this.timer);
    this.timer = undefined;
    void this.flush();
  }

  async flush(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      while (this.items.length) {
        const item = this.items[0];
        try {
          await this.send(item);
        } catch (err) {
          if (err instanceof NetworkError) {
            this.setOnline(false);
            this.schedule();
            return;
          }
          if (err instanceof ApiError && err.status === 401) return; // the app shows the login screen
          if (err instanceof ApiError && err.retryAfterS !== null && (item.retries ?? 0) < 5) {
            // too soon (the server saw the pair shown later than the page did) or too many
            // requests: the answer stays queued and goes again when the server says
            item.retries = (item.retries ?? 0) + 1;
            this.save();
            this.schedule(1000 * err.retryAfterS + 100);
            return;
          }
          this.items.shift();
          this.save();
          this.events.rejected(item, err instanceof ApiError ? err : new ApiError(0, String(err)));
          continue;
        }
        this.items.shift();
        this.save();
        this.retryMs = 1000;
      }
      this.setOnline(true);
    } finally {
      this.busy = false;
    }
  }

  private async send(item: OutItem): Promise<void> {
    if (item.kind === "judgement") {
      const r = await request<Reply<"/api/judgements", "post">>("POST", "/api/judgements", item.body);
      this.events.saved(item, r.judgement_id);
    } else {
      const r = await request<Reply<"/api/ratings", "post">>("POST", "/api/ratings", item.body);
      this.events.ratingsStored(item, r.stored);
    }
  }

  /** Flush again after ``ms`` (default: the network back-off, doubling up to 15 s). */
  private schedule(ms?: number): void {
    if (this.timer !== undefined) return;
    this.timer = window.setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, ms ?? this.retryMs);
    if (ms === undefined) this.retryMs = Math.min(this.retryMs * 2, 15000);
  }

  private setOnline(ok: boolean): void {
    if (ok === this.isOnline && ok) return;
    this.isOnline = ok;
    this.events.connection(ok, this.items.length);
  }

  private save(): void {
    try {
      localStorage.setItem(this.storageKey, JSON.stringify(this.items));
    } catch {
      /* storage full or disabled: the queue still lives in memory */
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Issue #25: reads that recover by themselves after a network drop, task instructions, and the
// owner's activity panel (answers per minute, revoke, finish now).

export type Task = Schemas["Task"];
export type OwnerActivity = Schemas["OwnerActivity"];
export type AnnotatorActivity = Schemas["AnnotatorActivity"];
/** Longest task text the server accepts (TASK_MAX_CHARS in studio/schemas.py). */
export const TASK_MAX_CHARS = 500;

const wakers = new Set<() => void>();
window.addEventListener("online", () => {
  for (const w of [...wakers]) w();
});

/** Waits ``ms``, or less when the browser says it is back online. */
export function backoffSleep(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      window.clearTimeout(timer);
      wakers.delete(done);
      resolve();
    };
    const timer = window.setTimeout(done, ms);
    wakers.add(done);
  });
}

export interface RetryOptions {
  /** Keep trying while this returns true (e.g. while the view is shown); default: always. */
  alive?: () => boolean;
  /** Told about every failed attempt and the wait before the next one. */
  onRetry?: (err: NetworkError, waitMs: number, attempt: number) => void;
  /** First wait (ms); it doubles after every failure up to ``maxMs``. */
  firstMs?: number;
  maxMs?: number;
}

/** ``request`` that waits and tries again after network errors and 5xx (exponential backoff,
 * 0.5 s → 8 s, sooner when the browser comes back online); API errors (4xx) are thrown at once,
 * and the last network error is thrown when ``alive()`` turns false. */
export async function requestRetrying<T>(method: string, path: string, body?: unknown, opts: RetryOptions = {}): Promise<T> {
  let wait = opts.firstMs ?? 500;
  for (let attempt = 1; ; attempt++) {
    try {
      return await request<T>(method, path, body);
    } catch (err) {
      if (!(err instanceof NetworkError) || (opts.alive && !opts.alive())) throw err;
      opts.onRetry?.(err, wait, attempt);
      await backoffSleep(wait);
      if (opts.alive && !opts.alive()) throw err;
      wait = Math.min(wait * 2, opts.maxMs ?? 8000);
    }
  }
}

export const api25 = {
  task: () => request<Reply<"/api/task", "get">>("GET", "/api/task"),
  setTask: (text: string) => request<Task>("PUT", "/api/owner/task", { text }),
  activity: () => request<Reply<"/api/owner/activity", "get">>("GET", "/api/owner/activity"),
  revoke: (id: string) =>
    request<Reply<"/api/owner/annotators/{annotator_id}/revoke", "post">>("POST", `/api/owner/annotators/${encodeURIComponent(id)}/revoke`),
  finish: () => request<Reply<"/api/owner/finish", "post">>("POST", "/api/owner/finish"),
  /** Repeated pairs per annotator and how often the two answers agreed (`--repeat-share`). */
  consistency: () => request<Reply<"/api/owner/consistency", "get">>("GET", "/api/owner/consistency"),
};

export type Consistency = Schemas["Consistency"];

// The question queue (issue #25): the next queries ahead of the one on screen, skip, the rules.

export type QueueRules = Schemas["QueueRules"];
export type QueriesAhead = Schemas["QueriesAhead"];

export const queueApi = {
  /** The next `k` queries of your queue after those in `exclude` (not marked as shown). */
  ahead: (kind: string, k: number, exclude: string[]) =>
    request<Reply<"/api/queries/ahead", "get">>(
      "GET",
      `/api/queries/ahead?kind=${encodeURIComponent(kind)}&k=${k}` +
        exclude.map((id) => `&exclude=${encodeURIComponent(id)}`).join(""),
    ),
  /** Skip a query for now: it moves to the end of its round in your queue. */
  skip: (id: string) =>
    request<Reply<"/api/queries/{query_id}/skip", "post">>("POST", `/api/queries/${encodeURIComponent(id)}/skip`),
};

/** What makes two queries the same question for a person: both sides' segments, either order. */
export function pairKey(q: Query): string {
  const side = (clips: Clip[]) => clips.map((c) => c.segment_id).sort().join(",");
  return [side(q.a), side(q.b)].sort().join("|");
}
