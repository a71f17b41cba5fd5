"""Annotators and their tokens: who judges, and the link (a token, stored as its hash) a person
opens the studio with.

Revoking an annotator clears their token's hash and leaves a mark in their ``meta``
(:data:`REVOKED`, who and when): a token of a revoked annotator is refused whoever stores its
hash again (a study participant's link re-keys them, issue #61), until the owner gives them a
new link (:meth:`Annotators.set_token`)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from sqlalchemy import func, select, update

from preflab.errors import DataError
from preflab.records import Annotator, Row
from preflab.store import schema as S
from preflab.store.repository import Repository
from preflab.store.schema import not_retracted

REVOKED = "revoked"
"""The ``meta`` key of a revoked annotator: ``{"at": unix time, "by": who revoked}``."""


def hash_token(token: str) -> str:
    """SHA-256 of an annotator token (tokens themselves are never stored)."""
    return hashlib.sha256(token.encode()).hexdigest()


class Annotators(Repository):
    """Annotators (persons, teachers, AI judges) and their tokens."""

    def add(self, annotator: Annotator, *, token: str | None = None) -> None:
        """Register an annotator (idempotent for the same id)."""
        row = {
            "id": annotator.id,
            "source": annotator.source,
            "name": annotator.name,
            "token_hash": hash_token(token) if token else None,
            "meta": dict(annotator.meta),
            "created_at": time.time(),
        }
        with self.db.write() as c:  # insert-or-ignore: safe when many register at once
            c.execute(self.db.insert_or_ignore(S.annotators).values(**row).on_conflict_do_nothing())

    def all(self) -> list[Annotator]:
        """Every annotator."""
        with self.db.read() as c:
            rows = c.execute(select(S.annotators)).mappings().all()
        return [
            Annotator(id=r["id"], source=r["source"], name=r["name"], meta=r["meta"]) for r in rows
        ]

    def get(self, annotator_id: str) -> Annotator | None:
        """The annotator with this id, or None."""
        with self.db.read() as c:
            r = (
                c.execute(select(S.annotators).where(S.annotators.c.id == annotator_id))
                .mappings()
                .first()
            )
        return _annotator(r) if r else None

    def by_token(self, token: str) -> Annotator | None:
        """The annotator holding ``token`` (looked up by its hash), or None (also for a revoked
        annotator, whatever hash is stored)."""
        with self.db.read() as c:
            r = (
                c.execute(
                    select(S.annotators).where(S.annotators.c.token_hash == hash_token(token))
                )
                .mappings()
                .first()
            )
        return _annotator(r) if r and not _revoked(r["meta"]) else None

    def id_for_token(self, token: str) -> str | None:
        """The id of the annotator holding ``token``, or None (also for a revoked one)."""
        found = self.by_token(token)
        return found.id if found else None

    def set_token(self, annotator_id: str, token: str) -> None:
        """Give a stored annotator a new token (only its hash is stored); a revoked annotator's
        new link works (the owner's decision lifts the revocation)."""
        with self.db.write() as c:
            meta = self._meta_for_update(c, annotator_id, "add it first")
            meta.pop(REVOKED, None)
            c.execute(
                update(S.annotators)
                .where(S.annotators.c.id == annotator_id)
                .values(token_hash=hash_token(token), meta=meta)
            )

    def revoke_token(self, annotator_id: str, *, by: str | None = None) -> float:
        """Revoke the annotator: their token's hash is cleared and their ``meta`` marked
        (:data:`REVOKED`), so no stored hash lets them in again until :meth:`set_token` gives
        them a new link (their answers stay). Returns the time of the revocation (the first
        one's, when they were revoked before). Raises DataError for an unknown id."""
        with self.db.write() as c:
            meta = self._meta_for_update(c, annotator_id, "check the id")
            if not _revoked(meta) or not isinstance(meta[REVOKED].get("at"), int | float):
                meta[REVOKED] = {"at": time.time(), "by": by}
            c.execute(
                update(S.annotators)
                .where(S.annotators.c.id == annotator_id)
                .values(token_hash=None, meta=meta)
            )
        return float(meta[REVOKED]["at"])

    def is_revoked(self, annotator_id: str) -> bool:
        """Whether the annotator was revoked (and given no new link since)."""
        with self.db.read() as c:
            r = c.execute(
                select(S.annotators.c.meta).where(S.annotators.c.id == annotator_id)
            ).first()
        return r is not None and _revoked(r[0])

    def revoked(self) -> dict[str, dict[str, Any]]:
        """Revoked annotators: id → ``{"at": unix time, "by": who revoked}``."""
        with self.db.read() as c:
            rows = c.execute(select(S.annotators.c.id, S.annotators.c.meta)).all()
        return {i: dict(m[REVOKED]) for i, m in rows if _revoked(m)}

    def _meta_for_update(self, c: Any, annotator_id: str, fix: str) -> dict[str, Any]:
        r = c.execute(
            select(S.annotators.c.meta).where(S.annotators.c.id == annotator_id).with_for_update()
        ).first()
        if r is None:
            raise DataError(f"no annotator {annotator_id!r} in the store; {fix}")
        return dict(r[0] or {})

    def with_token(self) -> set[str]:
        """Ids of the annotators whose link works (a token hash is stored, not revoked)."""
        with self.db.read() as c:
            rows = c.execute(
                select(S.annotators.c.id, S.annotators.c.meta).where(
                    S.annotators.c.token_hash.is_not(None)
                )
            ).all()
        return {i for i, m in rows if not _revoked(m)}

    def activity(self) -> dict[str, tuple[int, int]]:
        """Per annotator id: (judgements not retracted, ratings)."""
        out: dict[str, list[int]] = {}
        with self.db.read() as c:
            for aid, n in c.execute(
                select(S.judgements.c.annotator_id, func.count())
                .where(not_retracted())
                .group_by(S.judgements.c.annotator_id)
            ):
                out.setdefault(aid, [0, 0])[0] = int(n)
            for aid, n in c.execute(
                select(S.ratings.c.annotator_id, func.count()).group_by(S.ratings.c.annotator_id)
            ):
                out.setdefault(aid, [0, 0])[1] = int(n)
        return {k: (v[0], v[1]) for k, v in out.items()}

    def count(self) -> int:
        """Number of annotators."""
        return self._count(S.annotators)


def _revoked(meta: Any) -> bool:
    return isinstance(meta, dict) and isinstance(meta.get(REVOKED), dict)


def _annotator(r: Row) -> Annotator:
    return Annotator(id=r["id"], source=r["source"], name=r["name"], meta=r["meta"] or {})
