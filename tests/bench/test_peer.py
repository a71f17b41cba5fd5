"""Tests of the imitation peer wrapper that need no imitation venv (one slow test builds it)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from preflab.errors import ConfigError, SourceError
from preflab_bench import peer

GOOD = {
    "mode": "preference_comparisons",
    "wall_s": 12.5,
    "env_steps": 100_000,
    "agent_timesteps": 67_584,
    "labels": 200,
    "true_return_mean": -370.0,
    "true_return_std": 50.0,
}


def load_runner_module():
    """The runner script as a module (it imports imitation lazily, so this works here)."""
    spec = importlib.util.spec_from_file_location("imitation_runner", peer.RUNNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_default_paths_point_into_the_repo():
    assert peer.RUNNER.is_file()
    assert (peer.REPO_ROOT / "pyproject.toml").is_file()
    assert peer.DEFAULT_VENV == peer.REPO_ROOT / ".venv-imitation"
    assert peer.venv_python(Path("/x/v")) == Path("/x/v/bin/python")


def test_runner_command_round_trips_through_the_runners_own_parser(tmp_path):
    cmd = peer.runner_command(
        Path("/venv/bin/python"),
        env_id="Pendulum-v1",
        seed=3,
        labels=120,
        timesteps=20_000,
        out=tmp_path / "r.json",
        n_envs=4,
        eval_episodes=5,
        iterations=7,
        ppo_only=True,
    )
    assert cmd[:2] == ["/venv/bin/python", str(peer.RUNNER)]
    args = load_runner_module().parse_args(cmd[2:])
    assert (args.env, args.seed, args.labels, args.timesteps) == ("Pendulum-v1", 3, 120, 20_000)
    assert (args.n_envs, args.eval_episodes, args.iterations) == (4, 5, 7)
    assert args.ppo_only is True
    assert args.out == tmp_path / "r.json"


def test_runner_command_passes_the_like_for_like_options(tmp_path):
    cmd = peer.runner_command(
        Path("/venv/bin/python"),
        env_id="Pendulum-v1",
        seed=1,
        labels=100,
        timesteps=1,
        out=tmp_path / "r.json",
        n_envs=1,
        env_steps=15_000,
        agent="sac",
        policy="mlp",
        fragment_length=50,
        learning_starts=1000,
    )
    args = load_runner_module().parse_args(cmd[2:])
    assert (args.agent, args.policy, args.fragment_length) == ("sac", "mlp", 50)
    assert (args.env_steps, args.learning_starts, args.n_envs) == (15_000, 1000, 1)


# imitation 1.0.1's query schedule for 200 labels, 10 iterations (printed by its train()).
SCHEDULE_200 = [20, 26, 23, 21, 19, 18, 17, 15, 14, 14, 13]


def test_predicted_env_steps_matches_the_measured_count():
    # Measured 2026-11-22: total_timesteps=50k, 200 labels, fragments of 100, 8 envs ->
    # 91,584 real env steps for all five seeds (67,584 PPO steps + 24,000 fragment sampling).
    runner = load_runner_module()
    shape = dict(n_envs=8, fragment_length=100, horizon=200, rollout=2048)
    assert runner.predicted_env_steps(50_000, SCHEDULE_200, **shape) == 91_584


@pytest.mark.parametrize(
    ("target", "shape"),
    [
        (90_000, dict(n_envs=8, fragment_length=50, horizon=200, rollout=2048)),
        (15_000, dict(n_envs=1, fragment_length=50, horizon=200, rollout=1)),
    ],
)
def test_timesteps_for_comes_closest_to_the_target_from_below(target, shape):
    runner = load_runner_module()
    schedule = [10, 13, 12, 11, 10, 9, 8, 8, 7, 6, 6]
    t = runner.timesteps_for(target, schedule, **shape)
    got = runner.predicted_env_steps(t, schedule, **shape)
    assert got <= target
    others = [runner.predicted_env_steps(u, schedule, **shape) for u in range(1, target, 97)]
    assert got >= max(x for x in others if x <= target)
    if shape["rollout"] == 1:  # SAC, one env: the target is hit exactly
        assert runner.predicted_env_steps(t, schedule, **shape) == target


def test_timesteps_for_refuses_a_target_below_the_fragment_sampling():
    runner = load_runner_module()
    with pytest.raises(ValueError, match="fragment sampling"):
        runner.timesteps_for(
            1000, SCHEDULE_200, n_envs=1, fragment_length=50, horizon=200, rollout=1
        )


def test_runner_defaults_match_the_tutorial_setup():
    args = load_runner_module().parse_args(["--out", "x.json"])
    assert (args.env, args.labels, args.n_envs, args.eval_episodes) == ("Pendulum-v1", 200, 8, 10)
    assert args.ppo_only is False


def test_runner_parser_rejects_bad_values():
    runner = load_runner_module()
    with pytest.raises(SystemExit):
        runner.parse_args(["--out", "x.json", "--n-envs", "3"])
    with pytest.raises(SystemExit):
        runner.parse_args(["--out", "x.json", "--labels", "0"])


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ({"labels": 0}, "labels"),
        ({"timesteps": -5}, "timesteps"),
        ({"n_envs": 3}, "divide 2048"),
        ({"seed": -1}, "seed"),
        ({"eval_episodes": 1.5}, "eval_episodes"),
        ({"env_id": ""}, "env_id"),
    ],
)
def test_runner_command_rejects_bad_settings(tmp_path, override, match):
    kwargs = dict(env_id="Pendulum-v1", seed=0, labels=200, timesteps=50_000, out=tmp_path)
    kwargs.update(override)
    with pytest.raises(ConfigError, match=match):
        peer.runner_command(Path(sys.executable), **kwargs)


def test_parse_result_accepts_the_runner_format():
    text = json.dumps({**GOOD, "versions": {"imitation": "1.0.1"}})
    out = peer.parse_result(text)
    assert out["labels"] == 200
    assert out["versions"]["imitation"] == "1.0.1"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("not json {", "unparsable"),
        ("[1, 2]", "JSON object"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "env_steps"}), "missing"),
        (json.dumps({**GOOD, "labels": "200"}), "labels"),
        (json.dumps({**GOOD, "env_steps": True}), "env_steps"),
    ],
)
def test_parse_result_rejects_malformed_output(text, match):
    with pytest.raises(SourceError, match=match):
        peer.parse_result(text)


def test_run_imitation_with_a_python_lacking_imitation_raises_with_stderr_tail():
    # Our own venv has gymnasium, SB3 and torch but not imitation: the runner must fail and the
    # error must carry the subprocess's stderr (the ModuleNotFoundError).
    with pytest.raises(SourceError) as info:
        peer.run_imitation(
            Path(sys.executable), env_id="Pendulum-v1", seed=0, labels=10, timesteps=100
        )
    message = str(info.value)
    assert "exit code 1" in message
    assert "No module named 'imitation'" in message
    assert "ensure_imitation_venv" in message


def test_run_imitation_missing_python_is_a_clear_error(tmp_path):
    with pytest.raises(SourceError, match="ensure_imitation_venv"):
        peer.run_imitation(tmp_path / "nope" / "bin" / "python", seed=0)


def write_fake_runner(tmp_path: Path, body: str) -> Path:
    """A stand-in runner script (plain python, no imitation) with the runner's CLI."""
    script = tmp_path / "fake_runner.py"
    script.write_text(
        textwrap.dedent(
            """
            import argparse, json, sys, time
            p = argparse.ArgumentParser()
            for name in ["--env", "--seed", "--labels", "--timesteps", "--n-envs",
                         "--eval-episodes", "--iterations", "--out"]:
                p.add_argument(name)
            p.add_argument("--ppo-only", action="store_true")
            a, _ = p.parse_known_args()
            """
        )
        + textwrap.dedent(body)
    )
    return script


def test_run_imitation_returns_the_json_the_runner_writes(tmp_path):
    script = write_fake_runner(
        tmp_path,
        """
        out = dict(mode="ppo_only" if a.ppo_only else "preference_comparisons", wall_s=0.1,
                   env_steps=int(a.timesteps) * 2, agent_timesteps=int(a.timesteps),
                   labels=int(a.labels), true_return_mean=-1.5, true_return_std=0.5,
                   seed=int(a.seed), env_id=a.env)
        open(a.out, "w").write(json.dumps(out))
        """,
    )
    result = peer.run_imitation(
        Path(sys.executable),
        env_id="Pendulum-v1",
        seed=4,
        labels=30,
        timesteps=1000,
        ppo_only=True,
        runner=script,
    )
    assert result["mode"] == "ppo_only"
    assert (result["seed"], result["labels"], result["env_steps"]) == (4, 30, 2000)


def test_run_imitation_reports_a_runner_that_writes_nothing(tmp_path):
    script = write_fake_runner(tmp_path, "sys.stderr.write('nothing to see')\n")
    with pytest.raises(SourceError, match=r"wrote no result\.json") as info:
        peer.run_imitation(Path(sys.executable), seed=0, runner=script)
    assert "nothing to see" in str(info.value)


def test_run_imitation_times_out_clearly(tmp_path):
    script = write_fake_runner(tmp_path, "time.sleep(30)\n")
    with pytest.raises(SourceError, match="did not finish within"):
        peer.run_imitation(Path(sys.executable), seed=0, runner=script, timeout_s=1.0)


def test_local_torch_wheel_is_found_in_pips_find_links(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (wheels / "torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    assert wheels in peer.pip_find_links()
    found = peer.local_torch_wheel("2.13.0")
    assert found is not None
    assert found.name.startswith("torch-2.13.0")


def test_ensure_imitation_venv_refuses_a_path_that_is_not_a_venv(tmp_path):
    target = tmp_path / "occupied"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    with pytest.raises(SourceError, match="virtualenv"):
        peer.ensure_imitation_venv(target)
    assert (target / "precious.txt").read_text() == "keep me"


@pytest.mark.slow
def test_imitation_venv_and_a_small_real_run():
    # Creates the venv (~2 min, 1.7 GB) unless it exists; then a tiny real run.
    path = Path(os.environ.get("PREFLAB_IMITATION_VENV", peer.DEFAULT_VENV))
    python = peer.ensure_imitation_venv(path)
    assert peer.ensure_imitation_venv(path) == python  # idempotent, no reinstall
    result = peer.run_imitation(
        python,
        env_id="Pendulum-v1",
        seed=0,
        labels=20,
        timesteps=4000,
        iterations=2,
        eval_episodes=2,
        timeout_s=600,
    )
    # 2 iterations -> 3 agent trainings of 2000 steps, each rounded up to one 2048-step rollout.
    assert result["agent_timesteps"] == 3 * 2048 == peer.predicted_agent_timesteps(4000, 2)
    assert result["labels"] == 20
    assert result["env_steps"] > result["agent_timesteps"]  # + fragment sampling
    assert -2000.0 < result["true_return_mean"] <= 0.0
    assert result["versions"]["imitation"] == "1.0.1"
    assert result["versions"]["torch"].startswith("2.13.0")


@pytest.mark.parametrize(
    ("timesteps", "iterations", "expected"),
    [
        # 11 rounds x ceil(2000 / 2048) rollouts of 2048 steps
        (20_000, 10, 11 * 2048),
        # 11 rounds x ceil(5000 / 2048) = 3 rollouts
        (50_000, 10, 33 * 2048),
        # 6 rounds x ceil(1000 / 2048) = 1 rollout (the tutorial's own log ends at 12288)
        (5_000, 5, 6 * 2048),
        # 3 rounds of 2048 each, the remainder 1 goes to round 1: ceil(2049 / 2048) = 2
        (4_097, 2, 4 * 2048),
    ],
)
def test_predicted_agent_timesteps_hand_computed(timesteps, iterations, expected):
    assert peer.predicted_agent_timesteps(timesteps, iterations) == expected


def test_predicted_agent_timesteps_rejects_zero():
    with pytest.raises(ConfigError, match="num_iterations"):
        peer.predicted_agent_timesteps(1000, 0)
