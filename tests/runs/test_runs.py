"""Runs from the outside: load_run reads a run and changes nothing; branch_run continues a copy."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from preflab.aggregate.capped import NoLabels
from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.reward.batch import SegmentBatch
from preflab.runs import branch_run, load_run, resume, train
from tests.run_support import digest_run


def test_load_run_changes_nothing_in_the_run_or_the_process(finished: Path) -> None:
    before = digest_run(finished)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    rng_state = torch.random.get_rng_state()
    try:
        back = load_run(finished)
        assert torch.equal(torch.random.get_rng_state(), rng_state), "torch's RNG was touched"
        assert torch.get_num_threads() == 2, "torch's thread count was changed"
    finally:
        torch.set_num_threads(threads)
    assert digest_run(finished) == before  # not a byte written: metrics, store, checkpoints
    assert back.n_labels == 12 and back.rounds == 3 and back.env_steps == 600
    assert back.n_judgements == 12


def test_a_run_trains_on_its_threads_and_gives_the_callers_back(tmp_path: Path) -> None:
    """A researcher trains from a notebook whose torch runs on 3 threads: the run computes on its
    own ``torch_threads`` and the notebook has its 3 back afterwards (a new run and a resume);
    the run's count stayed set for good before."""
    threads = torch.get_num_threads()
    during: list[int] = []

    def note(_row: dict[str, Any]) -> None:
        during.append(torch.get_num_threads())

    cfg = TrainConfig.smoke(torch_threads=1)
    torch.set_num_threads(3)
    try:
        train(cfg, run_dir=tmp_path / "run", progress=note)
        assert during and set(during) == {1}
        assert torch.get_num_threads() == 3
        more = dataclasses.replace(cfg, total_steps=cfg.total_steps + cfg.steps_per_round)
        resume(tmp_path / "run", config=more, progress=note)
        assert set(during) == {1} and torch.get_num_threads() == 3

        class Broken:  # a user's source that fails while the run is being built
            @property
            def persists(self) -> bool:
                raise RuntimeError("broken source")

        with pytest.raises(RuntimeError, match="broken source"):
            train(cfg, run_dir=tmp_path / "bad", source=Broken())  # type: ignore[arg-type]
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(threads)


def test_load_run_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_run(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="not a PrefLab run directory") as refused:
        load_run(tmp_path)
    assert "--resume" not in str(refused.value)  # nothing is resumed here
    assert list(tmp_path.iterdir()) == []


def test_branch_run_continues_a_copy_on_a_fixed_reward(finished: Path, tmp_path: Path) -> None:
    """The source run stays as it was; the branch trains on the given reward model only."""
    before = digest_run(finished)
    other = train(TrainConfig.smoke(seed=7), run_dir=tmp_path / "other").reward_model
    cfg = TrainConfig.smoke(total_steps=1000)  # 2 more rounds of 200 steps
    loop = branch_run(finished, tmp_path / "branch", cfg, aggregator=NoLabels())
    loop.fix_reward(other, SegmentBatch.from_segments(loop.pool[-20:]))
    assert loop.fitted and loop.reward.live is None
    result = loop.run()
    loop.close()
    assert result.env_steps == 1000 and result.rounds == 5
    fixed, got = other.state_dict(), result.reward_model.state_dict()
    for name, value in fixed.items():
        if not name.startswith("mix_"):  # the policy's re-standardisation is the branch's own
            assert torch.equal(value, got[name]), name
    assert digest_run(finished) == before
    with pytest.raises(ConfigError, match="exists already"):
        branch_run(finished, tmp_path / "branch", cfg)


def test_the_loaded_agent_acts_like_the_trained_one(finished: Path) -> None:
    a = load_run(finished)
    b = load_run(finished)
    obs = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    np.testing.assert_array_equal(
        a.agent.predict(obs, deterministic=True)[0], b.agent.predict(obs, deterministic=True)[0]
    )
