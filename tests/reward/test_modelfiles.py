"""A run's standard model files: policy.zip loads with Stable-Baselines3 alone, the reward model
loads with no store and gives load_run's rewards."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from stable_baselines3 import PPO

import preflab
from preflab.config import TrainConfig
from preflab.errors import ConfigError, StoreError
from preflab.reward.modelfiles import _preflab_params, policy_zip_bytes
from preflab.runs import load_run, train


@pytest.fixture(scope="module")
def run_dir(finished: Path) -> Path:
    """The session's finished smoke run (tests/conftest.py), read only: these tests read its
    model files (a run of its own cost each worker another training run)."""
    return finished


def _obs_acts() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(16, 3)).astype(np.float32)
    acts = rng.uniform(-2, 2, size=(16, 1)).astype(np.float32)
    return obs, acts


_LOAD_ALONE = """
import json, sys
import numpy as np
from stable_baselines3 import PPO
obs = np.asarray(json.loads(sys.argv[1]), np.float32)
for path in sys.argv[2:]:
    model = PPO.load(path, device="cpu")
    acts, _ = model.predict(obs, deterministic=True)
    print(json.dumps({"acts": acts.tolist(),
                      "preflab": sorted(m for m in sys.modules if m.startswith("preflab"))}))
"""


def _predict_alone(policies: list[Path], obs: np.ndarray) -> list[dict[str, list]]:
    """Each policy zip loaded in turn by one fresh interpreter with SB3 and no PrefLab on its
    path; after each, its actions and every PrefLab module loaded so far."""
    out = subprocess.run(
        [sys.executable, "-c", _LOAD_ALONE, json.dumps(obs.tolist()), *map(str, policies)],
        capture_output=True,
        text=True,
        check=True,
        cwd=policies[0].parent,
        env={"PATH": "/usr/bin:/bin", "PYTHONNOUSERSITE": "1"},  # no PYTHONPATH: no src/
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.fixture(scope="module")
def plain_agent(tmp_path_factory: pytest.TempPathFactory) -> tuple[PPO, Path, Path]:
    """An SB3 agent carrying a PrefLab object, saved by SB3 alone (plain.zip) and by
    policy_zip_bytes (policy.zip)."""
    agent = PPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=32, device="cpu", seed=0)
    agent.preflab_config = TrainConfig.smoke()  # type: ignore[attr-defined]
    d = tmp_path_factory.mktemp("plain")
    agent.save(d / "plain.zip")
    (d / "policy.zip").write_bytes(policy_zip_bytes(agent))
    return agent, d / "plain.zip", d / "policy.zip"


@pytest.fixture(scope="module")
def alone(run_dir: Path, plain_agent: tuple[PPO, Path, Path]) -> dict[Path, dict[str, list]]:
    """The run's policy.zip and the plain agent's policy.zip, each loaded by SB3 alone: one
    fresh interpreter (~2.5 s of CPU for torch and SB3) loads both, the run's first, so what it
    reports as loaded after the second includes what the first loaded (a stricter check)."""
    paths = [run_dir / "policy.zip", plain_agent[2]]
    return dict(zip(paths, _predict_alone(paths, _obs_acts()[0]), strict=True))


def test_policy_zip_loads_with_stable_baselines3_alone(
    run_dir: Path, alone: dict[Path, dict[str, list]]
) -> None:
    obs, _ = _obs_acts()
    got = alone[run_dir / "policy.zip"]
    assert got["preflab"] == []  # nothing in the zip made PrefLab load
    expected, _ = load_run(run_dir).agent.predict(obs, deterministic=True)
    np.testing.assert_allclose(np.asarray(got["acts"]), expected, rtol=1e-6)


def test_reward_model_loads_without_a_store_and_matches_load_run(
    run_dir: Path, tmp_path: Path
) -> None:
    obs, acts = _obs_acts()
    expected = load_run(run_dir).reward_model.reward(obs, acts)
    alone = tmp_path / "elsewhere"  # the folder on its own: no config, store or checkpoints
    shutil.copytree(run_dir / "reward_model", alone)
    for path in (run_dir, alone):
        model = preflab.load_reward_model(path)
        np.testing.assert_allclose(model.reward(obs, acts), expected, rtol=1e-6)
    assert sorted(p.name for p in alone.iterdir()) == ["reward_config.json", "reward_state.pt"]


def test_no_reward_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds no reward model"):
        preflab.load_reward_model(tmp_path)


_BROKEN_CONFIGS = [
    pytest.param(lambda m: [1], 'must be a JSON object with a "config" object', id="list"),
    pytest.param(
        lambda m: m | {"config": "x"},
        'must be a JSON object with a "config" object',
        id="config-str",
    ),
    pytest.param(
        lambda m: m | {"config": m["config"] | {"hidden": 5}},
        "config.hidden .* list of integers",
        id="hidden-int",
    ),
    pytest.param(
        lambda m: m | {"config": m["config"] | {"members": "2"}},
        "config.members .* an integer",
        id="members-str",
    ),
    pytest.param(
        lambda m: m | {"config": m["config"] | {"bogus": 1}},
        "unknown key 'bogus'",
        id="unknown-key",
    ),
    pytest.param(
        lambda m: m | {"obs_dim": "3"},
        "obs_dim in reward_config.json must be an integer ≥ 1",
        id="obs_dim-str",
    ),
    pytest.param(
        lambda m: m | {"act_dim": -1},
        "act_dim in reward_config.json must be an integer ≥ 0",
        id="act_dim-negative",
    ),
    pytest.param(
        lambda m: m | {"obs_shape": "abc"},
        r"obs_shape .* must be a list \(C, H, W\)",
        id="obs_shape-str",
    ),
    # a network of terabytes is refused before it is built (its shapes are not the file's)
    pytest.param(
        lambda m: m | {"obs_dim": 10**12},
        "does not describe the network in reward_state.pt",
        id="obs_dim-huge",
    ),
]


@pytest.mark.parametrize(("edit", "says"), _BROKEN_CONFIGS)
def test_a_broken_reward_config_json_is_a_clear_error(
    run_dir: Path, tmp_path: Path, edit: Any, says: str
) -> None:
    folder = shutil.copytree(run_dir / "reward_model", tmp_path / "rm")
    meta = json.loads((folder / "reward_config.json").read_text())
    (folder / "reward_config.json").write_text(json.dumps(edit(meta)))
    with pytest.raises(StoreError, match=f"from {re.escape(str(folder))}: .*{says}"):
        preflab.load_reward_model(folder)


@pytest.mark.parametrize("state", [bytes(range(256)) * 4, b""])  # not a torch file; empty
def test_a_broken_reward_state_pt_is_a_clear_error(
    run_dir: Path, tmp_path: Path, state: bytes
) -> None:
    folder = shutil.copytree(run_dir / "reward_model", tmp_path / "rm")
    (folder / "reward_state.pt").write_bytes(state)
    says = "reward_state.pt is empty, truncated or not a saved state_dict"
    with pytest.raises(StoreError, match=f"from {re.escape(str(folder))}: {says}"):
        preflab.load_reward_model(folder)


def test_preflab_objects_are_kept_out_of_the_policy_zip(
    plain_agent: tuple[PPO, Path, Path], alone: dict[Path, dict[str, list]]
) -> None:
    agent, plain, clean = plain_agent
    with zipfile.ZipFile(plain) as z:  # SB3 alone would pickle it (by reference to PrefLab)
        assert _preflab_params(z.read("data")) == ["preflab_config"]
    with zipfile.ZipFile(clean) as z:
        assert _preflab_params(z.read("data")) == []
    obs, _ = _obs_acts()
    assert alone[clean]["preflab"] == []
    np.testing.assert_allclose(
        np.asarray(alone[clean]["acts"]), agent.predict(obs, deterministic=True)[0], rtol=1e-6
    )


def test_model_files_are_written_first_then_rarely_and_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SBX policy takes ~0.3 s to save: the files are written at the first checkpoint, then
    at most every MODEL_FILES_EVERY_S, and once more at the end with the final weights."""
    import preflab.loop.rounds

    rounds: list[int] = []
    real = preflab.loop.rounds.write_model_files

    def counted(run_dir: Path, agent: object, model: object) -> None:
        rounds.append(len(list((Path(run_dir) / "checkpoints").glob("ckpt-*"))))
        real(run_dir, agent, model)  # type: ignore[arg-type]

    monkeypatch.setattr(preflab.loop.rounds, "write_model_files", counted)
    monkeypatch.setattr(preflab.loop.rounds, "MODEL_FILES_EVERY_S", float("inf"))
    d = tmp_path / "run"
    res = train(TrainConfig.smoke(total_steps=800, total_labels=4), run_dir=d)
    assert res.rounds >= 3
    assert len(rounds) == 2  # the first checkpoint and the end, not every round
    obs, _ = _obs_acts()
    # loaded here, not in a fresh interpreter: that policy.zip loads with SB3 alone is the two
    # tests above; this one checks that it holds the final weights
    final, _ = PPO.load(d / "policy.zip", device="cpu").predict(obs, deterministic=True)
    expected, _ = load_run(d).agent.predict(obs, deterministic=True)  # the last checkpoint
    np.testing.assert_allclose(final, expected, rtol=1e-6)
