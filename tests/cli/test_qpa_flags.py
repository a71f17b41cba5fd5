"""QPA's options on the command line (issue 59): ``--selector policy-aligned``,
``--aligned-episodes``, ``--replay.*`` and ``--fit.snippets.*`` reach the run's config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from preflab.cli import train as train_cli
from preflab.config import TrainConfig
from preflab.config.file import load_config
from preflab.policy.replay_config import ReplayConfig
from preflab.reward.qpa_crops import SnippetConfig


def test_qpa_flags_make_the_config(tmp_path: Path) -> None:
    flags = ["--algo", "sac", "--selector", "policy-aligned", "--aligned-episodes", "5"]
    flags += ["--replay.hybrid", "--replay.recent-ratio", "0.25", "--fit.snippets.copies", "20"]
    out = tmp_path / "c.toml"
    assert train_cli.main([*flags, "--print-config", str(out)]) == 0
    base = TrainConfig()
    assert load_config(out) == dataclasses.replace(
        base,
        algo="sac",
        selector="policy-aligned",
        aligned_episodes=5,
        replay=ReplayConfig(hybrid=True, recent_ratio=0.25),
        fit=dataclasses.replace(base.fit, snippets=SnippetConfig(copies=20)),
    )


def test_hybrid_replay_with_an_on_policy_learner_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:  # tyro's usage error: a message, no traceback
        train_cli.main(["--algo", "ppo", "--replay.hybrid", "--print-config"])
    assert exc.value.code == 2
    assert "off-policy" in capsys.readouterr().err
