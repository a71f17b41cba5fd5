"""Rounds the trainer published (with their metrics), each round's pool of behaviours (the
groupwise studio's exploration view), and cursors: how far a reader such as the trainer read."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, select, text

from preflab.errors import DataError
from preflab.store import schema as S
from preflab.store.repository import Repository, jsonable, upsert

TRAINER = "trainer"
"""The cursor of the trainer: the highest judgement seq it has collected. Judgements at or below
it count for good (but its gaps, :data:`TRAINER_GAPS`); above it their author may still undo
them."""
TRAINER_GAPS = "trainer_gaps"
"""The run setting listing the seqs below the trainer's cursor that it has not collected
(PostgreSQL hands out seqs before commit: an answer whose transaction had not committed when the
trainer read past it). Their answers stay undoable until the trainer collects them."""


class Rounds(Repository):
    """Published rounds, round pools and reader cursors."""

    def publish(
        self,
        round: int,
        *,
        env_id: str,
        env_steps: int,
        total_steps: int,
        metrics: Mapping[str, Any],
        status: str = "running",
    ) -> None:
        """Record (or update) a round of the loop with its metrics row; NaN / inf become None."""
        if status not in ("running", "waiting", "finished"):
            raise DataError(
                f"round status must be 'running', 'waiting' or 'finished', got {status!r}"
            )
        row = {
            "published_at": time.time(),
            "env_id": env_id,
            "env_steps": int(env_steps),
            "total_steps": int(total_steps),
            "status": status,
            "metrics": _clean_metrics(metrics),
        }
        self.db.put(S.rounds, {"round": int(round)}, row)

    def all(self) -> list[dict[str, Any]]:
        """Published rounds, oldest first."""
        with self.db.read() as c:
            rows = c.execute(select(S.rounds).order_by(S.rounds.c.round)).mappings().all()
        return [dict(r) for r in rows]

    def publish_pool(
        self,
        round: int,
        segment_ids: Sequence[str],
        *,
        member_returns: Sequence[Sequence[float]] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Record (or replace) round ``round``'s pool: the behaviours the studio's exploration
        view shows (stored segments, in order) and, when the trainer has a fitted ensemble,
        every member's predicted return of each, shape (members, len(segment_ids)). Predicted
        returns are for the studio server's suggestions only; it never sends them to a browser."""
        ids = list(segment_ids)
        if len(set(ids)) != len(ids):
            raise DataError(f"round {round}'s pool lists a segment twice; pass unique ids")
        rets = None
        if member_returns is not None:
            rets = [[float(x) for x in row] for row in member_returns]
            if any(len(row) != len(ids) for row in rets):
                raise DataError(
                    f"member_returns must be (members, {len(ids)}) for {len(ids)} segments"
                )
        row = {
            "published_at": time.time(),
            "segment_ids": ids,
            "member_returns": rets,
            "meta": jsonable(dict(meta or {})),
        }
        self.db.put(S.round_pools, {"round": int(round)}, row)

    def pool(self, round: int | None = None) -> dict[str, Any] | None:
        """Round ``round``'s pool (the latest published one when None), or None:
        {round, published_at, segment_ids, member_returns, meta}."""
        with self.db.read() as c:
            q = select(S.round_pools)
            q = (
                q.where(S.round_pools.c.round == int(round))
                if round is not None
                else q.order_by(S.round_pools.c.round.desc()).limit(1)
            )
            r = c.execute(q).mappings().first()
        return dict(r) if r else None

    def set_cursor(self, name: str, seq: int, *, gaps: Sequence[int] = ()) -> None:
        """Set cursor ``name`` to ``seq`` (e.g. the highest judgement seq the trainer collected);
        the trainer's with the seqs below it it has not collected (``gaps``)."""
        self.db.write_upserts(lambda c: put_cursor(c, name, seq, gaps=gaps))

    def cursor(self, name: str) -> int:
        """The cursor's seq (0 when it was never set)."""
        with self.db.read() as c:
            return cursor_seq(c, name)

    def cursor_updated_at(self, name: str) -> float | None:
        """When the cursor was last set (None when never)."""
        with self.db.read() as c:
            r = c.execute(select(S.cursors.c.updated_at).where(S.cursors.c.name == name)).first()
        return float(r[0]) if r else None


def put_cursor(c: Connection, name: str, seq: int, *, gaps: Sequence[int] = ()) -> None:
    """Set cursor ``name`` to ``seq`` inside a write transaction of the caller's
    (:meth:`Rounds.set_cursor` in one of its own); the trainer's under :func:`lock_undo`, with
    its gaps (:data:`TRAINER_GAPS`, written when there are some or were some)."""
    now = time.time()
    if name == TRAINER:
        lock_undo(c)
        below = sorted({int(g) for g in gaps if int(g) <= seq})
        if below or trainer_gaps(c):
            upsert(c, S.settings, {"key": TRAINER_GAPS}, {"value": below, "updated_at": now})
    elif gaps:
        raise DataError(f"only the trainer's cursor keeps gaps, not {name!r}'s")
    upsert(c, S.cursors, {"name": name}, {"seq": int(seq), "updated_at": now})


def trainer_gaps(c: Any) -> set[int]:
    """The seqs below the trainer's cursor that it has not collected (:data:`TRAINER_GAPS`),
    read on the connection ``c``."""
    r = c.execute(select(S.settings.c.value).where(S.settings.c.key == TRAINER_GAPS)).first()
    return {int(g) for g in r[0]} if r and isinstance(r[0], list) else set()


def collected_by_trainer(c: Any, seq: int) -> bool:
    """Whether the trainer has collected judgement ``seq`` (at or below its cursor, not in its
    gaps), read on the connection ``c``."""
    return seq <= cursor_seq(c, TRAINER) and seq not in trainer_gaps(c)


UNDO_LOCK = 0x70726566
"""The PostgreSQL advisory lock key of :func:`lock_undo`."""


def lock_undo(c: Connection) -> None:
    """Serialise this write transaction with every other that moves the trainer's cursor or
    undoes a judgement (:meth:`preflab.store.answers.Answers.retract`), so an undo reads the
    cursor as the last such transaction committed it. PostgreSQL: a transaction-scoped
    advisory lock, taken before the cursor is read or written; SQLite: nothing, its write
    transactions run one at a time (BEGIN IMMEDIATE)."""
    if c.dialect.name == "postgresql":
        c.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": UNDO_LOCK})


def cursor_seq(c: Any, name: str) -> int:
    """Cursor ``name``'s seq read on the connection ``c`` (0 when never set), for a repository
    that reads it inside its own transaction."""
    r = c.execute(select(S.cursors.c.seq).where(S.cursors.c.name == name)).first()
    return int(r[0]) if r else 0


def _clean_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    def clean(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        if hasattr(v, "item") and callable(v.item):  # numpy scalar
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v

    try:
        out: dict[str, Any] = json.loads(json.dumps(clean(dict(metrics)), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise DataError(f"round metrics must be JSON-serialisable numbers/strings: {exc}") from exc
    return out
