"""kill -9 of the studio while people answer: nothing acknowledged is lost, nothing doubles."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from preflab.records import Annotator, Query
from preflab.store import FeedbackStore
from preflab.studio import launch
from preflab.studio.launch import start_studio_process
from preflab.testing.factories import make_segments
from tests.studio.api_server import free_port
from tests.studio.e2e_support import WarmSubprocess

N_QUERIES = 120
TOKEN = "alice-token-123456"
RESEND_FOR_S = 180.0
"""How long the test's outbox resends one answer while the studio does not answer (a bound on
a broken studio, not a timing assertion: a restart takes seconds)."""


def _seed(run: Path) -> None:
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    segs = make_segments(
        N_QUERIES + 1,
        rng=np.random.default_rng(7),
        obs_dim=3,
        env_id="Toy-v0",
        episode=range(N_QUERIES + 1),
    )
    store.segments.add(segs)
    store.queries.add(
        Query(id=f"q{k:03d}", kind="pair", a=(segs[k].id,), b=(segs[k + 1].id,), round=1)
        for k in range(N_QUERIES)
    )
    store.annotators.add(
        Annotator(id="alice", source="human", name="alice", meta={"role": "annotator"}),
        token=TOKEN,
    )
    store.close()


def test_sigkill_of_the_studio_loses_no_acknowledged_judgement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # start_studio_process's command, each of the three times, forked warm (a fresh interpreter
    # spent ~1.5 s of CPU importing before it served; what is killed is still a real process)
    monkeypatch.setattr(launch, "subprocess", WarmSubprocess())
    run = tmp_path / "run"
    run.mkdir()
    _seed(run)
    port = free_port()
    acked: dict[str, str] = {}  # query id -> judgement id the studio acknowledged
    failed: list[int] = []
    unsent: list[int] = []  # answers the outbox gave up on: the studio never came back
    bad: list[str] = []
    stop = threading.Event()

    def annotate(ks: range) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            for k in ks:
                body = {
                    "query_id": f"q{k:03d}",
                    "p": float(k % 2),
                    "client_key": f"client-key-{k:04d}",
                }
                # The browser's outbox: resend until acknowledged. It resends for as long as a
                # restart can take on a loaded machine (a fixed count of quick retries gave up
                # while the restarted studio was still importing, and dropped that answer).
                give_up = time.monotonic() + RESEND_FOR_S
                while not stop.is_set():
                    try:
                        r = c.post("/api/judgements", json=body, headers=headers, timeout=5)
                    except httpx.HTTPError:
                        failed.append(k)
                        if time.monotonic() > give_up:
                            unsent.append(k)
                            break
                        time.sleep(0.05)
                        continue
                    if r.status_code == 201:
                        acked[body["query_id"]] = r.json()["judgement_id"]
                        break
                    bad.append(r.text)  # a 4xx is not a crash: the test itself is wrong
                    return
                if stop.is_set():
                    return

    proc = start_studio_process(run, "127.0.0.1", port, extra_args=("--no-media",))
    worker = threading.Thread(target=annotate, args=(range(N_QUERIES),))
    worker.start()
    try:
        for kill_at in (25, 70):
            while len(acked) < kill_at and worker.is_alive():
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc = start_studio_process(run, "127.0.0.1", port, extra_args=("--no-media",))
        worker.join(timeout=2 * RESEND_FOR_S + 120)
        still_posting = worker.is_alive()
    finally:
        stop.set()
        proc.terminate()
        proc.wait(timeout=30)
    assert not bad, bad[:1]
    assert not unsent, f"the studio did not come back for answers {unsent}"
    assert not still_posting, "the annotator was still posting when the test stopped"
    assert failed, "the kills happened while the annotator was posting"
    store = FeedbackStore(run / "feedback.db")
    stored = {j.id: j for _seq, j in store.answers.judgements()}
    assert set(acked.values()) <= set(stored)  # nothing the browser was told was saved is lost
    assert len(acked) == N_QUERIES and len(stored) == N_QUERIES  # resends stored once
    assert sorted(j.query_id for j in stored.values()) == sorted(acked)
