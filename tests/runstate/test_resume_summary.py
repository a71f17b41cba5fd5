"""A run killed after its last round's checkpoint and resumed writes the summary.json of an
uninterrupted run: its end warnings read the last fit's counts (its ties included), which
come back from the checkpoint, not from a fit the resumed process never makes."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.run_support import run_killable
from tests.runstate.test_resume_exact import RUN, _metrics

ONLY_TIES = (
    "__import__('preflab.sources.teacher', fromlist=['TeacherConfig'])"
    ".TeacherConfig(equal_threshold=1e9)"
)
"""A teacher that calls every pair equally good: every label is a tie."""
TIMES = ("wall_s", "eval_s")
"""summary.json's entries that differ between any two runs."""


def _run(run_dir: Path, mode: str, failpoint: str | None = None) -> int:
    code = RUN.format(teacher=ONLY_TIES)
    return run_killable(code, "ppo", str(run_dir), mode, failpoint=failpoint).returncode


def _summary(run_dir: Path) -> dict[str, object]:
    summary = json.loads((run_dir / "summary.json").read_text())
    return {k: v for k, v in summary.items() if k not in TIMES}


def test_a_run_resumed_after_its_last_round_keeps_its_only_ties_warning(tmp_path: Path) -> None:
    ref, run = tmp_path / "ref" / "run", tmp_path / "run"
    assert _run(ref, "train") == 0
    warnings = _summary(ref)["warnings"]
    assert isinstance(warnings, list)
    warned = [w for w in warnings if "labels are ties" in w]
    assert warned and "at the end of the run" in warned[0]
    # smoke: rounds 0, 1 and 2; killed once round 2's checkpoint is written (nothing left to fit)
    assert _run(run, "train", failpoint="round_end:3") == -signal.SIGKILL
    assert not (run / "summary.json").exists()
    assert _run(run, "resume") == 0
    assert _metrics(run) == _metrics(ref)
    assert _summary(run) == _summary(ref)  # the warning included
