"""Run settings the owner (in the studio) and the trainer share: the task, "finish now", …

Besides :meth:`Settings.set` (the latest value wins), two changes read the stored value and
write it back in one write transaction, so that two processes changing the same key at once
both count: :meth:`Settings.update_entry` (one entry of a dict-valued setting, e.g. who revoked
whom) and :meth:`Settings.setdefault` (the first value stays, e.g. "finish now")."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, insert, select, update

from preflab.store import schema as S
from preflab.store.repository import Repository


class Settings(Repository):
    """JSON-able run settings by key."""

    def set(self, key: str, value: Any) -> None:
        """Set the run setting ``key`` to the JSON-able ``value`` (e.g. "task", "finish")."""
        self.db.put(S.settings, {"key": key}, {"value": value, "updated_at": time.time()})

    def get(self, key: str, default: Any = None) -> Any:
        """The run setting ``key`` (``default`` when it was never set)."""
        with self.db.read() as c:
            r = c.execute(select(S.settings.c.value).where(S.settings.c.key == key)).first()
        return default if r is None else r[0]

    def update_entry(self, key: str, entry: str, value: Any) -> dict[str, Any]:
        """Set ``entry`` of the dict-valued run setting ``key`` to the JSON-able ``value``,
        keeping its other entries, in one write transaction (a concurrent update of another
        entry is kept, not overwritten). A missing setting (or one that is not a dict) starts
        as an empty dict. Returns the dict now stored."""
        stored: dict[str, Any] = {}

        def change(c: Connection) -> None:
            nonlocal stored
            found, old = self._read_locked(c, key)
            stored = {**(old if isinstance(old, dict) else {}), entry: value}
            self._write(c, key, stored, exists=found)

        self.db.write_upserts(change)
        return stored

    def setdefault(self, key: str, value: Any, *, keep: Callable[[Any], bool] | None = None) -> Any:
        """The run setting ``key`` when it is set (and ``keep`` accepts its value, when
        given): it stays; otherwise set it to the JSON-able ``value`` and return that. Read and
        write are one write transaction, so of two concurrent calls the first one's value
        stays and both return it."""
        stored: Any = None

        def change(c: Connection) -> None:
            nonlocal stored
            found, old = self._read_locked(c, key)
            if found and old is not None and (keep is None or keep(old)):
                stored = old
                return
            stored = value
            self._write(c, key, value, exists=found)

        self.db.write_upserts(change)
        return stored

    def _read_locked(self, c: Connection, key: str) -> tuple[bool, Any]:
        """Inside a write transaction: (whether ``key`` has a row, its value), the row locked
        until the transaction ends (PostgreSQL ``FOR UPDATE``; SQLite's BEGIN IMMEDIATE has
        already serialised writers)."""
        r = c.execute(
            select(S.settings.c.value).where(S.settings.c.key == key).with_for_update()
        ).first()
        return (False, None) if r is None else (True, r[0])

    def _write(self, c: Connection, key: str, value: Any, *, exists: bool) -> None:
        """Inside the transaction that read ``key`` with :meth:`_read_locked`: update its
        locked row, or insert it when there was none. A concurrent insert of the same key then
        fails with IntegrityError, and :meth:`Database.write_upserts` runs the whole read and
        write again (an update would overwrite that row unseen)."""
        now = time.time()
        if exists:
            c.execute(
                update(S.settings)
                .where(S.settings.c.key == key)
                .values(value=value, updated_at=now)
            )
        else:
            c.execute(insert(S.settings), [{"key": key, "value": value, "updated_at": now}])
