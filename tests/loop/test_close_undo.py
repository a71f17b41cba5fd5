"""Every answer counts (DESIGN.md, the studio's queue): answers still inside their undo window
when the run ends are committed (undo closes for them) and the trainer's last fit takes them in.
Real store (SQLite), real StoreSource and studio bridge, a real (smoke) run."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from preflab.config import TrainConfig
from preflab.errors import ConflictError
from preflab.records import Annotator, Judgement
from preflab.runs import train
from preflab.store import FeedbackStore
from preflab.store.answers import RUN_ENDED

OPEN_UNDO_S = 3600.0
"""Each answer's undo window: far longer than the run, so only the run's end can close it."""


class QuickPerson(threading.Thread):
    """Answers ``n`` open queries in the studio's way (``ui: studio``, a long undo window), then
    the owner presses Finish now right away (well inside every window)."""

    def __init__(self, run: Path, n: int) -> None:
        super().__init__(daemon=True)
        self.run_dir, self.n = run, n
        self.answered: list[str] = []

    def run(self) -> None:
        while not (self.run_dir / "feedback.db").exists():
            time.sleep(0.05)
        store = FeedbackStore(self.run_dir / "feedback.db")
        store.annotators.add(Annotator(id="alice", source="human", name="alice"))
        try:
            while len(self.answered) < self.n:
                gone = store.queries.withdrawn_ids()
                todo = [q for q in store.queries.unanswered() if q.id not in gone]
                if not todo:
                    time.sleep(0.05)
                    continue
                q = todo[0]
                meta = {"ui": "studio", "undo_s": OPEN_UNDO_S, "client_key": f"k-{q.id}"}
                store.answers.add(
                    [
                        Judgement(
                            id=f"j-{q.id}",
                            query_id=q.id,
                            annotator_id="alice",
                            source="human",
                            p=1.0,
                            meta=meta,
                        )
                    ]
                )
                self.answered.append(q.id)
            store.settings.set("finish", {"by": "owner"})  # inside every answer's undo window
        finally:
            store.close()


def test_answers_inside_the_undo_window_count_when_the_owner_finishes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = TrainConfig.smoke(source="store")  # type: ignore[arg-type]
    person = QuickPerson(run, n=3)
    person.start()
    result = train(cfg, run_dir=run)
    person.join(10)
    assert len(person.answered) == 3
    assert result.ended_by == "owner"
    # none of them was collected during the run (their windows were open); all count now
    assert result.n_judgements == 3 and result.n_labels == 3
    store = FeedbackStore(run / "feedback.db")
    try:
        for qid in person.answered:  # and none can be undone any more: the run has ended
            with pytest.raises(ConflictError) as info:
                store.answers.retract(f"j-{qid}", "alice")
            assert str(info.value) == RUN_ENDED
        assert all(not undoable for _j, undoable in store.answers.recent("alice"))
    finally:
        store.close()
    import csv

    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert int(rows[-1]["n_labels"]) == 3  # the last fit saw them
