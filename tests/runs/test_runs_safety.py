"""Run directories are safe: one process trains a run at a time (run.lock, stale locks taken
over), a resume continues with the parts and config the run started with (or refuses), budgets
may grow (the run is extended), and every JSON file of a run is strict JSON."""

from __future__ import annotations

import csv
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.runs import load_run, release_run, resume, start_loop, train
from preflab.runstate.lock import read_owner
from preflab.sources.teacher import SyntheticTeacher, TeacherConfig
from preflab.store import FeedbackStore
from tests import warm_python
from tests.run_support import copy_run, digest_run

HOLD = """
import sys, time
from preflab.runstate.lock import RunLock
RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(120)
"""


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_a_live_run_is_refused_and_read_without_a_byte_written(
    finished: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process holds the lock: resume and train into it are refused at once, naming its
    PID; load_run reads it and writes nothing. Killed, its lock is stale and taken over."""
    run = copy_run(finished, tmp_path)
    holder = warm_python.popen(
        [sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        owner = read_owner(run)
        assert owner is not None and owner.pid == holder.pid
        before = digest_run(run)
        with pytest.raises(ConfigError, match=f"being trained right now by PID {holder.pid} on"):
            resume(run)
        with pytest.raises(ConfigError, match=f"PID {holder.pid}"):
            train(TrainConfig.smoke(), run_dir=run)
        back = load_run(run)
        assert back.n_labels == 12
        assert digest_run(run) == before  # metrics.csv, store, checkpoints, run.lock: untouched
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with caplog.at_level(logging.WARNING, logger="preflab.runstate.lock"):
        result = resume(run)  # the finished run: evaluated again, nothing more to train
    assert result.env_steps == 600
    assert f"took over the lock of PID {holder.pid}" in caplog.text
    assert (run / "run.lock").read_text() == ""  # let go when the run ended


def test_a_loop_of_this_process_holds_its_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    loop = start_loop(TrainConfig.smoke(), run)
    try:
        with pytest.raises(ConfigError, match=f"PID {os.getpid()}"):
            resume(run)
    finally:
        release_run(loop)
        loop.close()
    assert (run / "run.lock").read_text() == ""


def test_an_edited_config_json_is_refused_with_the_fields_named(
    finished: Path, tmp_path: Path
) -> None:
    run = copy_run(finished, tmp_path)
    data = json.loads((run / "config.json").read_text())
    data["seed"], data["total_labels"] = 3, 50
    (run / "config.json").write_text(json.dumps(data))
    before = digest_run(run)
    with pytest.raises(ConfigError) as info:
        resume(run)
    msg = str(info.value)
    assert "was edited after the run started" in msg
    assert "seed (started with 0, now 3)" in msg and "total_labels (started with 12, now 50)" in msg
    assert digest_run(run) == before


def test_a_field_added_since_the_run_started_is_no_edit(finished: Path, tmp_path: Path) -> None:
    """A run started by a version without some config field (its records lack the key; today's
    config gives it its default) is loaded and resumed, not refused as edited."""
    run = copy_run(finished, tmp_path)
    path = run / "checkpoints" / "run.json"
    record = json.loads(path.read_text())
    del record["config"]["seed"]  # the field's default (0) is what the run ran with
    path.write_text(json.dumps(record))
    cfg = json.loads((run / "config.json").read_text())
    del cfg["seed"]
    (run / "config.json").write_text(json.dumps(cfg))
    assert load_run(run).env_steps == 600


def test_resume_refuses_another_source_than_the_run_was_taught_by(tmp_path: Path) -> None:
    """A run taught by a user's own source does not continue with the config's (the oracle)."""
    run = tmp_path / "run"
    own = SyntheticTeacher(TeacherConfig(), np.random.default_rng(5))
    cfg = TrainConfig.smoke(total_steps=400)
    train(cfg, run_dir=run, source=own)
    record = _strict((run / "checkpoints" / "run.json").read_text())
    assert isinstance(record, dict)
    assert record["source"] == {"kind": "user", "class": "preflab.sources.teacher.SyntheticTeacher"}
    with pytest.raises(ConfigError, match="taught by a feedback source passed from Python"):
        resume(run)

    class Backwards(SyntheticTeacher):
        pass

    with pytest.raises(ConfigError, match=r"not .*Backwards"):
        resume(run, source=Backwards(TeacherConfig(), np.random.default_rng(5)))
    more = resume(
        run,
        config=TrainConfig.smoke(total_steps=600),
        source=SyntheticTeacher(TeacherConfig(), np.random.default_rng(5)),
    )
    assert more.env_steps == 600


def test_a_run_built_from_an_env_factory_asks_for_the_env(tmp_path: Path) -> None:
    run = tmp_path / "run"
    factory = lambda: gym.make("Pendulum-v1")  # noqa: E731
    train(TrainConfig.smoke(total_steps=400), run_dir=run, env=factory)
    with pytest.raises(ConfigError, match=r"env factory passed from Python.*load_run\("):
        load_run(run)
    with pytest.raises(ConfigError, match=r"env factory passed from Python.*resume\("):
        resume(run)
    assert load_run(run, env=factory).env_steps == 400


def test_budgets_grow_on_resume_and_the_run_continues(
    finished: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = copy_run(finished, tmp_path)
    with pytest.raises(ConfigError, match="--total-steps"):
        resume(run, config=TrainConfig.smoke(total_steps=400))  # budgets only grow
    with caplog.at_level(logging.INFO, logger="preflab.runs"):
        result = resume(run, config=TrainConfig.smoke(total_steps=1200, total_labels=20))
    assert "extending the run" in caplog.text and "--total-steps 600 -> 1200" in caplog.text
    assert result.env_steps == 1200 and result.rounds == 6
    assert 12 < result.n_labels <= 20
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [int(r["round"]) for r in rows] == list(range(6))
    assert [int(r["env_steps"]) for r in rows] == sorted(int(r["env_steps"]) for r in rows)
    saved = TrainConfig.load(run / "config.json")
    assert (saved.total_steps, saved.total_labels) == (1200, 20)
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        ids = [q.id for q in store.queries.all()]
        assert len(ids) == len(set(ids)) == result.n_labels
    finally:
        store.close()
    assert resume(run).env_steps == 1200  # the extended config.json is not "edited"


def test_every_json_file_of_a_run_is_strict(finished: Path) -> None:
    files = sorted(finished.rglob("*.json"))
    names = {p.name for p in files}
    assert {"config.json", "summary.json", "state.json", "manifest.json", "run.json"} <= names
    for p in files:
        _strict(p.read_text())
    owner = (finished / "run.lock").read_text()
    assert owner == "" or _strict(owner)
    config = TrainConfig.load(finished / "config.json")
    assert config.teacher.beta == float("inf")  # written as "Infinity", read back as a float
    assert config == TrainConfig.smoke()


@pytest.mark.parametrize(
    ("summary", "says"),
    [
        ("[1]", "expected a JSON object, got list"),
        ('{"n_equal": "x", "true_return": -5.0}', "wrong types: n_equal = 'x'"),
        ('{"true_return": "x"}', "wrong types: true_return = 'x'"),
    ],
)
def test_a_summary_json_of_the_wrong_shape_is_read_as_none(
    finished: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, summary: str, says: str
) -> None:
    """summary.json is only informative for a load (as when a stopped run has none): one that
    is not an object of the numbers it reports loads the run without them, with a warning
    naming the file, not a crash or a string where a return should be."""
    run = copy_run(finished, tmp_path)
    (run / "summary.json").write_text(summary)
    with caplog.at_level(logging.WARNING, logger="preflab.runs"):
        result = load_run(run)
    assert np.isnan(result.true_return) and result.n_equal == 0 and result.ended_by == "steps"
    assert f"{run / 'summary.json'} cannot be read ({says}" in caplog.text
