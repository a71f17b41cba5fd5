"""Run settings the owner (in the studio) and the trainer share: the task, "finish now", …"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select

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
