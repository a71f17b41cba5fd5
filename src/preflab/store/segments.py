"""Segments: a row each (env, episode, start, round, length, true return) and their arrays in
.npz files (:class:`~preflab.store.arrays.ArrayStore`), written in the rows' transaction."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from pathlib import Path
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
        """Store segments; already-stored ids are skipped. Returns the number of segments added.

        The arrays of segments without a file are written to temporary files first, outside
        the transaction (the slow part: the write lock is not held meanwhile). One transaction
        then inserts the rows, puts the new segments' files in place and commits: readers see
        a row only with its file. A failed call leaves no file of its own behind: a failed
        insert has placed none, a failed placing removes the files this call placed
        (:meth:`_place_arrays`) before the rollback, and the temporary files always go. A file
        that already existed is kept (an earlier crash's, or a checkpoint's: the rollout pool
        writes arrays without rows)."""
        segs = list(segments)
        if not segs:
            return 0
        for s in segs:  # ids become file names: check them all before writing anything
            self.arrays.path(s.id)
        staged: dict[str, Path] = {}
        try:
            for s in segs:
                if s.id not in staged and (tmp := self.arrays.stage(s)) is not None:
                    staged[s.id] = tmp
            return self._insert(segs, staged)
        finally:
            for tmp in staged.values():
                self.arrays.discard(tmp)

    def _insert(self, segs: list[Segment], staged: dict[str, Path]) -> int:
        """:meth:`add`'s transaction: the rows of the segments not stored yet, and their files
        put in place from ``staged`` (by id)."""
        with self.db.write() as c:
            ids = [s.id for s in segs]
            have = set()
            for k in range(0, len(ids), 500):
                have |= set(
                    c.execute(
                        select(S.segments.c.id).where(S.segments.c.id.in_(ids[k : k + 500]))
                    ).scalars()
                )
            new: dict[str, Segment] = {}
            for s in segs:
                if s.id not in have:
                    new.setdefault(s.id, s)
            if not new:
                return 0
            seq0 = allocate(c, "segments", len(new))
            rows = [
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
                    "seq": seq0 + k,
                }
                for k, s in enumerate(new.values())
            ]
            c.execute(insert(S.segments), rows)
            self._place_arrays(list(new.values()), staged)
        return len(rows)

    def _place_arrays(self, segs: list[Segment], staged: dict[str, Path]) -> None:
        """Inside :meth:`add`'s transaction, after its insert: give each of ``segs`` its file,
        the staged one (by id) or, where none was staged and none is there now (another
        writer's failed call removed the one seen while staging), one written now; on an error
        remove the files this call placed, then re-raise.

        Removing them is safe because this transaction holds the rows of these ids: on SQLite
        the write lock, on PostgreSQL the uncommitted primary keys, which make any other writer
        of the same id wait for the rollback (or fail on the committed row). No other writer can
        have a row pointing at such a file, and the files go before the rollback lets one in.
        Only files this call placed go (:meth:`ArrayStore.place` returns True), never one that
        was there before. A commit that fails after this leaves the files behind (harmless: a
        later add of the id takes them), as removing them then could race a writer let in by
        the rollback."""
        placed: list[str] = []
        try:
            for seg in segs:
                tmp = staged.get(seg.id)
                if self.arrays.place(tmp, seg.id) if tmp is not None else self.arrays.write(seg):
                    placed.append(seg.id)
        except BaseException:
            for i in placed:
                with contextlib.suppress(OSError):  # keep the original error
                    self.arrays.remove(i)
            raise

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
