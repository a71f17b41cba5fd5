"""Round 0's checkpoints within it: a run killed after PEBBLE's unsupervised pre-training, or
after RIME's warm start, resumes from there (without doing either again) and ends as an
uninterrupted run, bit for bit; a checkpoint of the format before phases (no phase, manifest
format 1) still resumes, and so does a pre-training checkpoint written before the warm start
had its own (the warm start is done on resuming).

The set-up is test_resume_exact's 'surf' run (PEBBLE's pre-training, RIME with its warm start,
SURF, REED, RUNE). The processes count what they do in a file: each call of the pre-training
and of RIME's warm start writes a line."""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path

import pytest
import torch

from preflab.errors import ConfigError
from preflab.runs import load_run
from preflab.runstate.checkpointer import Checkpointer
from tests.run_support import run_killable
from tests.runstate.test_resume_exact import NOISY, RUN, _final_agent, _metrics, _store_rows

COUNT = """
import logging, os, sys
import preflab.loop.fitting, preflab.loop.rollouts
logging.getLogger("preflab.loop.snapshot").addHandler(logging.StreamHandler(sys.stderr))
logging.getLogger("preflab.loop.snapshot").setLevel(logging.INFO)
def counted(cls, name):
    real = getattr(cls, name)
    def call(self, *args, **kwargs):
        with open(os.environ["PREFLAB_TEST_CALLS"], "a") as f:
            f.write(name + "\\n")
        return real(self, *args, **kwargs)
    setattr(cls, name, call)
counted(preflab.loop.rollouts.Rollouts, "pretrain")
counted(preflab.loop.fitting.RewardFit, "warm_start")
"""


def _run(
    run_dir: Path, mode: str, calls: Path, failpoint: str | None = None
) -> tuple[int, list[str], str]:
    """The surf run in a process: exit status, what it called (in order), its stderr."""
    calls.unlink(missing_ok=True)
    code = COUNT + RUN.format(teacher=NOISY)
    proc = run_killable(
        code, "surf", str(run_dir), mode, failpoint=failpoint,
        env={"PREFLAB_TEST_CALLS": str(calls)},
    )  # fmt: skip
    done = calls.read_text().split() if calls.exists() else []
    return proc.returncode, done, proc.stderr


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted surf run: it pre-trains once and warm-starts RIME once."""
    d = tmp_path_factory.mktemp("ref-pretrained")
    status, done, _ = _run(d / "run", "train", d / "calls")
    assert (status, done) == (0, ["pretrain", "warm_start"])
    return d / "run"


def _latest(run_dir: Path) -> str:
    return (run_dir / "checkpoints" / "LATEST").read_text()


def _ensemble(run_dir: Path) -> dict[str, torch.Tensor]:
    """The reward model's weights in the run's last checkpoint."""
    return dict(Checkpointer(run_dir).load().tensors["ensemble"])


def _assert_same_run(run: Path, reference: Path) -> None:
    """``run`` ended as ``reference``: store rows, metrics, policy and reward weights."""
    got, want = _store_rows(run), _store_rows(reference)
    assert len(set(got["judgement_ids"])) == len(got["judgement_ids"])  # nothing duplicated
    assert got == want
    assert _metrics(run) == _metrics(reference)
    for weights in (_final_agent, _ensemble):
        got_w, want_w = weights(run), weights(reference)
        assert want_w and got_w.keys() == want_w.keys()
        assert all(torch.equal(got_w[k], want_w[k]) for k in want_w)  # bit for bit
    assert (run / "summary.json").exists()


@pytest.mark.parametrize(
    ("point", "latest", "redone", "said"),
    [
        # right after the pre-training checkpoint: the warm start is still to do
        ("pretrained", "ckpt-00000-pretrained", ["warm_start"], "after pre-training (its"),
        # right after the warm start's checkpoint, and after round 0's queries were stored
        ("warm_started", "ckpt-00000-warmstarted", [], "after pre-training and RIME's warm"),
        ("queries_stored:1", "ckpt-00000-warmstarted", [], "after pre-training and RIME's warm"),
    ],
)
def test_a_kill_within_round_0_resumes_from_its_last_checkpoint(
    point: str, latest: str, redone: list[str], said: str, reference: Path, tmp_path: Path
) -> None:
    run, calls = tmp_path / "run", tmp_path / "calls"
    status, done, _ = _run(run, "train", calls, failpoint=point)
    assert status == -signal.SIGKILL
    assert done == ["pretrain", "warm_start"][: 2 - len(redone)]
    assert _latest(run) == latest
    with pytest.raises(ConfigError, match="its checkpoint is round 0's pre-training"):
        load_run(run)  # a pre-trained agent and an unfitted reward model: nothing to load yet
    status, done, err = _run(run, "resume", calls)
    assert (status, done) == (0, redone)  # not pre-trained (or warm-started) again
    assert f"resumed {run} at round 0 with 0 judgements {said}" in err
    _assert_same_run(run, reference)
    assert _latest(run) != latest and not (run / "checkpoints" / latest).exists()  # retention


def _as_format_1(run_dir: Path) -> None:
    """Rewrite the run's latest checkpoint as the format before phases wrote it: no phase in the
    loop's state, format 1 in the manifest."""
    ckpt = run_dir / "checkpoints" / _latest(run_dir)
    state_path, manifest_path = ckpt / "state.json", ckpt / "manifest.json"
    state = json.loads(state_path.read_text())
    if "loop" in state:
        state["loop"].pop("phase")
    state_path.write_text(json.dumps(state))
    manifest = json.loads(manifest_path.read_text())
    assert manifest["format"] == 2
    manifest["format"] = 1
    manifest["files"]["state.json"] = hashlib.sha256(state_path.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("point", "latest", "redone"),
    [
        ("round_end:1", "ckpt-00001", []),  # after round 0: nothing of it again
        # in the middle of writing the pre-training checkpoint: the fresh one, pre-trained again
        ("checkpoint_partial:2", "ckpt-00000", ["pretrain", "warm_start"]),
    ],
)
def test_a_checkpoint_of_the_format_before_phases_still_resumes(
    point: str, latest: str, redone: list[str], reference: Path, tmp_path: Path
) -> None:
    run, calls = tmp_path / "run", tmp_path / "calls"
    status, _, _ = _run(run, "train", calls, failpoint=point)
    assert status == -signal.SIGKILL and _latest(run) == latest
    _as_format_1(run)
    status, done, _ = _run(run, "resume", calls)
    assert (status, done) == (0, redone)
    _assert_same_run(run, reference)
