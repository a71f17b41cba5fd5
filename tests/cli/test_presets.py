"""`preflab train --preset NAME`: the B-Pref set-ups PrefLab ships, read like --config files,
flags on top, unknown names and clashes refused with what to do."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import gymnasium as gym
import pytest

from preflab.cli import train as train_cli
from preflab.config.file import load_config
from preflab.env_families import register_family
from preflab.errors import ConfigError
from preflab.presets import preset_names, preset_path


def test_the_b_pref_presets_are_shipped() -> None:
    assert {
        "bpref/walker_walk-pebble",
        "bpref/cheetah_run-pebble",
        "bpref/quadruped_walk-pebble",
        "bpref/button_press-pebble",
        "bpref/walker_walk-prefppo",
    } <= set(preset_names())


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_is_a_valid_run_on_a_known_env(name: str) -> None:
    config = load_config(preset_path(name))  # unknown keys or wrong types would be refused
    register_family(config.env_id)
    assert config.env_id in gym.registry
    assert config.teacher.beta == float("inf") and config.teacher.epsilon == 0.0  # the oracle
    kwargs = json.loads(config.agent_kwargs)
    assert "learning_starts" not in kwargs  # initial_steps plays that part in PrefLab
    assert config.initial_steps < config.total_steps


def test_walker_pebble_carries_b_prefs_numbers(tmp_path: Path) -> None:
    out = tmp_path / "run.toml"
    assert (
        train_cli.main(
            ["--preset", "bpref/walker_walk-pebble", "--seed", "3", "--print-config", str(out)]
        )
        == 0
    )
    data = tomllib.loads(out.read_text())
    # scripts/walker_walk/1000/oracle/run_PEBBLE.sh and config/agent/sac.yaml of B-Pref
    assert data["total_labels"] == 1000 and data["steps_per_round"] == 20000
    assert data["total_steps"] == 500000 and data["segment_length"] == 50
    assert data["net_arch"] == [1024, 1024]
    agent = json.loads(data["agent_kwargs"])
    assert agent["learning_rate"] == 0.0005 and agent["batch_size"] == 1024
    assert data["reward"]["members"] == 3 and data["fit"]["lr"] == 0.0003
    assert data["fit"]["epochs"] == 50 and data["fit"]["stop_accuracy"] == 0.97  # train_PEBBLE.py
    assert data["seed"] == 3  # a flag after --preset overrides it


def test_an_unknown_preset_names_the_close_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"no such preset\. Did you mean bpref/walker_walk-pebble"
    ):
        train_cli.main(["--preset", "bpref/walker-pebble", "--print-config"])


def test_preset_and_config_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="use one"):
        train_cli.main(
            ["--preset", "bpref/walker_walk-pebble", "--config", str(tmp_path / "x.toml")]
        )
