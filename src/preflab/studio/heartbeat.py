"""The trainer's heartbeat in the store, so that the studio (and every page) knows whether the
trainer is still alive: ``start_trainer_heartbeat(store)`` in the trainer, ``trainer_liveness``
in the studio."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from preflab.store import FeedbackStore

log = logging.getLogger(__name__)
HEARTBEAT_KEY = "trainer_heartbeat"
"""The run setting the trainer's heartbeat is kept in."""


class TrainerHeartbeat:
    """A daemon thread writing ``{"t": unix time, "pid": ..., "state": "running"}`` to the run
    setting :data:`HEARTBEAT_KEY` every ``every_s`` seconds; :meth:`stop` writes "stopped"."""

    def __init__(self, store: FeedbackStore, *, every_s: float = 1.5) -> None:
        self.store = store
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="preflab-trainer-heartbeat", daemon=True
        )
        self._warned = False

    def start(self) -> TrainerHeartbeat:
        self._beat("running")
        self._thread.start()
        return self

    def _beat(self, state: str) -> None:
        value: dict[str, Any] = {
            "t": time.time(),
            "pid": os.getpid(),
            "state": state,
            "every_s": self.every_s,
        }
        try:
            self.store.settings.set(HEARTBEAT_KEY, value)
        except Exception as exc:  # the store is busy or gone: the next beat tries again
            if not self._warned:
                log.warning("trainer heartbeat not written (%s); retrying", exc)
                self._warned = True

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._beat("running")

    def stop(self) -> None:
        """Stop beating and record that the trainer stopped (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._beat("stopped")


def start_trainer_heartbeat(store: FeedbackStore, *, every_s: float = 1.5) -> TrainerHeartbeat:
    """Start the trainer's heartbeat; it says "stopped" when the process exits normally (an
    exception, Ctrl-C or a handled SIGTERM included) and goes stale when it is killed."""
    beat = TrainerHeartbeat(store, every_s=every_s).start()
    atexit.register(beat.stop)
    return beat


def trainer_liveness(store: FeedbackStore, *, stale_s: float) -> dict[str, Any]:
    """``{"trainer": "running" | "stopped" | "unknown", "heartbeat_at", "age_s"}``: "unknown"
    when no trainer ever beat (a trainer that does not report, e.g. an older one)."""
    value = None
    with contextlib.suppress(Exception):
        value = store.settings.get(HEARTBEAT_KEY)
    if not isinstance(value, dict) or not isinstance(value.get("t"), int | float):
        return {"trainer": "unknown", "heartbeat_at": None, "age_s": None}
    at = float(value["t"])
    age = max(0.0, time.time() - at)
    stopped = value.get("state") == "stopped" or age > stale_s
    return {"trainer": "stopped" if stopped else "running", "heartbeat_at": at, "age_s": age}
