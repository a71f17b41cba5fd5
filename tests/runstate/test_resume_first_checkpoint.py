"""A run killed while it writes its first checkpoint (the fresh start, right after config.json
and the store are made) did nothing yet: resuming it starts it from the beginning with its
recorded config, and it ends as an uninterrupted run, bit for bit. Its store is checked first: one
that holds feedback is refused (one line, nothing changed), never started over beside.

The set-up is test_resume_exact's 'ppo' run (a noisy teacher)."""

from __future__ import annotations

import json
import shutil
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.runs import branch_run, load_run, resume
from preflab.runstate import Checkpointer, identity
from preflab.store import FeedbackStore
from preflab.testing.factories import make_judgement, make_query, make_segments
from tests import warm_python
from tests.run_support import digest_run, run_killable
from tests.runstate.test_resume_exact import NOISY, RUN, _final_agent, _metrics, _store_rows

FIRST_CHECKPOINT = "checkpoint_partial:1"
"""Inside the write of the run's first checkpoint (its state.json written, LATEST not yet)."""


def _run(run_dir: Path, mode: str, failpoint: str | None = None) -> int:
    code = RUN.format(teacher=NOISY)
    return run_killable(code, "ppo", str(run_dir), mode, failpoint=failpoint).returncode


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run killed inside its first checkpoint (each test changes a copy of it)."""
    run = tmp_path_factory.mktemp("killed") / "run"
    assert _run(run, "train", failpoint=FIRST_CHECKPOINT) == -signal.SIGKILL
    assert (run / "config.json").is_file() and (run / "feedback.db").is_file()
    assert (run / "run.lock").read_text()  # names the killed process
    assert not (run / "checkpoints" / "LATEST").exists()
    assert not identity.path(run).exists()
    return run


def _copy(run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(run, dst)
    return dst


def _ensemble(run_dir: Path) -> dict[str, torch.Tensor]:
    return dict(Checkpointer(run_dir).load().tensors["ensemble"])


def test_a_run_killed_in_its_first_checkpoint_resumes_from_the_beginning(
    killed: Path, tmp_path: Path
) -> None:
    ref = tmp_path / "ref"
    assert _run(ref, "train") == 0
    run = _copy(killed, tmp_path)
    assert _run(run, "resume") == 0
    got, want = _store_rows(run), _store_rows(ref)
    assert len(set(got["judgement_ids"])) == len(got["judgement_ids"])
    assert got == want
    assert _metrics(run) == _metrics(ref)
    for weights in (_final_agent, _ensemble):
        got_w, want_w = weights(run), weights(ref)
        assert want_w and got_w.keys() == want_w.keys()
        assert all(torch.equal(got_w[k], want_w[k]) for k in want_w)  # bit for bit
    assert (run / "summary.json").exists()
    # the start's last steps, which the kill came before, are done too: its record (the next
    # resume checks config.json and the parts against it) and hyperparams.json
    assert json.loads(identity.path(run).read_text()) == json.loads(identity.path(ref).read_text())
    assert (run / "hyperparams.json").read_text() == (ref / "hyperparams.json").read_text()
    assert not list((run / "checkpoints").glob(".tmp-*"))


def test_nothing_to_load_or_branch_from_yet(killed: Path, tmp_path: Path) -> None:
    run = _copy(killed, tmp_path)
    before = digest_run(run)
    with pytest.raises(
        ConfigError, match=r"no trained round yet \(it was stopped before its first"
    ):
        load_run(run)
    with pytest.raises(ConfigError, match="stopped before its first checkpoint, so there is"):
        branch_run(run, tmp_path / "branch", TrainConfig.smoke())
    assert digest_run(run) == before and not (tmp_path / "branch").exists()


@pytest.mark.parametrize("answered", [False, True])
def test_a_store_that_holds_feedback_is_not_started_over(
    killed: Path, tmp_path: Path, answered: bool
) -> None:
    """Queries (or answers) stored before the first checkpoint: not what a run that did
    nothing holds; a resume refuses, in one line, and leaves the directory as it was."""
    run = _copy(killed, tmp_path)
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        a, b = make_segments(2, rng=np.random.default_rng(0), obs_dim=3, id_prefix="s")
        store.segments.add([a, b])
        store.queries.add([make_query("q-0", a.id, b.id)])
        if answered:
            store.answers.add([make_judgement("j-0", "q-0", "alice", 1.0)])
    finally:
        store.close()
    before = digest_run(run)
    held = "segments \\(2\\), queries \\(1\\)" + (", judgements \\(1\\)" if answered else "")
    with pytest.raises(
        ConfigError, match=f"before its first checkpoint, yet its store holds {held}"
    ) as err:
        resume(run)
    assert "\n" not in str(err.value) and f"preflab export {run}" in str(err.value)
    assert digest_run(run) == before  # no checkpoint written, run.lock put back
    cli = warm_python.run(
        [sys.executable, "-m", "preflab.cli.main", "train", "--resume", str(run)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 1
    assert "yet its store holds" in cli.stderr and "Traceback" not in cli.stderr
    assert digest_run(run) == before
