"""Annotators and their tokens: who judges, and the link (a token, stored as its hash) a person
opens the studio with."""

from __future__ import annotations

import hashlib
import time

from sqlalchemy import func, select, update

from preflab.errors import DataError
from preflab.records import Annotator, Row
from preflab.store import schema as S
from preflab.store.repository import Repository
from preflab.store.schema import not_retracted


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
        """The annotator holding ``token`` (looked up by its hash), or None."""
        with self.db.read() as c:
            r = (
                c.execute(
                    select(S.annotators).where(S.annotators.c.token_hash == hash_token(token))
                )
                .mappings()
                .first()
            )
        return _annotator(r) if r else None

    def id_for_token(self, token: str) -> str | None:
        """The id of the annotator holding ``token``, or None."""
        with self.db.read() as c:
            r = c.execute(
                select(S.annotators.c.id).where(S.annotators.c.token_hash == hash_token(token))
            ).first()
        return r[0] if r else None

    def set_token(self, annotator_id: str, token: str) -> None:
        """Give a stored annotator a new token (only its hash is stored)."""
        self._set_token_hash(annotator_id, hash_token(token), "add it first")

    def revoke_token(self, annotator_id: str) -> None:
        """Clear the annotator's token hash: their link stops working (their answers stay).
        Raises DataError for an unknown id. A new link needs :meth:`set_token`."""
        self._set_token_hash(annotator_id, None, "check the id")

    def _set_token_hash(self, annotator_id: str, token_hash: str | None, fix: str) -> None:
        with self.db.write() as c:
            n = c.execute(
                update(S.annotators)
                .where(S.annotators.c.id == annotator_id)
                .values(token_hash=token_hash)
            ).rowcount
        if not n:
            raise DataError(f"no annotator {annotator_id!r} in the store; {fix}")

    def with_token(self) -> set[str]:
        """Ids of the annotators whose link works (a token hash is stored)."""
        with self.db.read() as c:
            rows = c.execute(
                select(S.annotators.c.id).where(S.annotators.c.token_hash.is_not(None))
            ).all()
        return {r[0] for r in rows}

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


def _annotator(r: Row) -> Annotator:
    return Annotator(id=r["id"], source=r["source"], name=r["name"], meta=r["meta"] or {})
