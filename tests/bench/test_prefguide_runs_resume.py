"""A Pref-GUIDE run killed in the middle of a checkpoint resumes to the same ratings and metrics:
the replayed round recreates the rating streams it had stored already (skipped, not duplicated)
and the resumed loop reads the earlier ratings back from the store."""

from __future__ import annotations

import csv
import signal
from pathlib import Path

import pytest

from preflab.store import FeedbackStore
from tests.run_support import run_killable

RUN = """
import sys
from preflab.aggregate import WindowAggregator
from preflab.runs import resume, start_loop
from preflab.sources.evaluators import EvaluatorConfig
from preflab.sources.raters import NoQueries
from preflab_bench._prefguide_runs import GuideConfig, make_source, train_config
cfg = GuideConfig(n_envs=2, human_steps=256, post_steps=128, steps_per_round=128,
                  item_length=2, eval_episodes=1)
evals = [EvaluatorConfig(), EvaluatorConfig(noise=0.3, gain=1.0)]
kw = dict(source=make_source(cfg, evals, 0), selector=NoQueries(),
          aggregator=WindowAggregator(window=10))
run_dir, mode = sys.argv[1:3]
if mode == "resume":
    resume(run_dir, **kw)
else:
    start_loop(train_config(cfg, 0), run_dir, **kw).run()
"""


def _run(run_dir: Path, mode: str, failpoint: str | None = None) -> int:
    return run_killable(RUN, str(run_dir), mode, failpoint=failpoint).returncode


def _rows(run_dir: Path) -> tuple[list[tuple], list[tuple]]:
    store = FeedbackStore(run_dir / "feedback.db")
    try:
        ratings = sorted(
            (r.annotator_id, r.stream_id, r.step, r.t, r.value) for r in store.ratings.all()
        )
        queries = sorted((q.id, q.kind, q.a) for q in store.queries.all())
        return ratings, queries
    finally:
        store.close()


def _metrics(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "metrics.csv").open() as f:
        return [{k: v for k, v in row.items() if k != "wall_s"} for row in csv.DictReader(f)]


@pytest.mark.slow  # three subprocess runs (~45 s on the shared machine)
def test_killed_rating_run_resumes_without_duplicates(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    assert _run(ref, "train") == 0
    crashed = tmp_path / "crashed"
    assert _run(crashed, "train", "checkpoint_partial:3") == -signal.SIGKILL
    assert _run(crashed, "resume") == 0
    ref_ratings, ref_queries = _rows(ref)
    got_ratings, got_queries = _rows(crashed)
    assert ref_ratings and got_queries == ref_queries
    assert got_ratings == ref_ratings  # every rating once
    assert _metrics(crashed) == _metrics(ref)
