"""Segments: a row each (env, episode, start, round, length, true return) and their arrays in
.npz files (:class:`~preflab.store.arrays.ArrayStore`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import insert, select

from preflab.errors import DataError
from preflab.records import Segment
from preflab.store import schema as S
from preflab.store.arrays import ArrayStore
from preflab.store.repository import Database, Repository, allocate


class Segments(Repository):
    """Stored segments (metadata rows here, arrays in ``arrays``)."""

    def __init__(self, db: Database, arrays: ArrayStore) -> None:
        super().__init__(db)
        self.arrays = arrays
        """The segments' arrays, one .npz file per segment id."""

    def add(self, segments: Iterable[Segment]) -> int:
        """Store segments (arrays first, then rows); already-stored ids are skipped. Returns the
        number of segments added."""
        segs = list(segments)
        if not segs:
            return 0
        for s in segs:  # ids become file names: check them all before writing anything
            self.arrays.path(s.id)
        with self.db.write() as c:
            ids = [s.id for s in segs]
            have = set()
            for k in range(0, len(ids), 500):
                have |= set(
                    c.execute(
                        select(S.segments.c.id).where(S.segments.c.id.in_(ids[k : k + 500]))
                    ).scalars()
                )
            rows, seen = [], set()
            for s in segs:
                if s.id in have or s.id in seen:
                    continue
                seen.add(s.id)
                self.arrays.write(s)
                rows.append(
                    {
                        "id": s.id,
                        "env_id": s.env_id,
                        "episode": s.episode,
                        "start": s.start,
                        "round": s.round,
                        "length": s.length,
                        "obs_dim": s.obs.shape[1],
                        "act_dim": s.acts.shape[1],
                        "true_return": s.true_return,
                    }
                )
            if rows:
                seq0 = allocate(c, "segments", len(rows))
                for k, r in enumerate(rows):
                    r["seq"] = seq0 + k
                c.execute(insert(S.segments), rows)
        return len(rows)

    def get(self, ids: Sequence[str]) -> list[Segment]:
        """The segments with these ids, in the order asked (a DataError names ids not stored);
        reads only the rows asked for (indexed)."""
        wanted = list(dict.fromkeys(ids))
        rows: list[Any] = []
        with self.db.read() as c:
            for k in range(0, len(wanted), 500):
                chunk = wanted[k : k + 500]
                rows += (
                    c.execute(select(S.segments).where(S.segments.c.id.in_(chunk))).mappings().all()
                )
        by_id = {r["id"]: r for r in rows}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise DataError(f"{len(missing)} segment id(s) not in the store, e.g. {missing[:3]}")
        return [self._segment(by_id[i]) for i in ids]

    def all(self) -> list[Segment]:
        """Every stored segment, in insertion order."""
        with self.db.read() as c:
            rows = c.execute(select(S.segments).order_by(S.segments.c.seq)).mappings().all()
        return [self._segment(r) for r in rows]

    def _segment(self, r: Any) -> Segment:
        arr = self.arrays.read(r["id"])
        return Segment(
            id=r["id"],
            obs=arr["obs"],
            acts=arr["acts"],
            true_rewards=arr["true_rewards"],
            env_id=r["env_id"],
            episode=r["episode"],
            start=r["start"],
            round=r["round"],
            states=arr.get("states"),
        )

    def info(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """env_id, length and round of stored segments (no arrays, no true return)."""
        out: dict[str, dict[str, Any]] = {}
        cols = (S.segments.c.id, S.segments.c.env_id, S.segments.c.length, S.segments.c.round)
        ids = list(dict.fromkeys(ids))
        with self.db.read() as c:
            for k in range(0, len(ids), 500):
                for r in c.execute(select(*cols).where(S.segments.c.id.in_(ids[k : k + 500]))):
                    out[r[0]] = {"env_id": r[1], "length": int(r[2]), "round": int(r[3])}
        return out

    def count(self) -> int:
        """Number of stored segments."""
        return self._count(S.segments)

    def max_seq(self) -> int:
        """The highest segment sequence number (0 when none)."""
        return self._max_seq(S.segments)
