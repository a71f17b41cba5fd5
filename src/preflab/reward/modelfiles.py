"""A run's standard model files: the policy as an SB3 ``.zip``, the reward model on its own.

At every checkpoint (so also at the end of a run) the run directory gets:

- ``policy.zip``: the trained agent in Stable-Baselines3's own format, loadable with no PrefLab
  code: ``stable_baselines3.SAC.load("RUN/policy.zip")`` (the class is the run's ``algo``;
  ``sb3_contrib.TRPO`` for trpo). Nothing of PrefLab is pickled into it: the environment, the
  replay buffer and the training-time state (last observations, episode buffers) are left out,
  and any other entry that would refer to a PrefLab class is dropped.
- ``reward_model/``: ``reward_config.json`` (architecture and sizes) and ``reward_state.pt``
  (a torch state_dict of tensors only, read with ``weights_only=True``), as written by
  :meth:`preflab.reward.ensemble.RewardEnsemble.save`. :func:`load_reward_model` reads it back
  without a store, envs or the run's config.

Both are replaced atomically (write aside, then rename), so a reader never sees half a file.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import shutil
import zipfile
from pathlib import Path

from stable_baselines3.common.base_class import BaseAlgorithm

from preflab.errors import ConfigError
from preflab.reward.ensemble import RewardEnsemble

log = logging.getLogger(__name__)

POLICY_FILE = "policy.zip"
"""The policy file in a run directory (Stable-Baselines3's zip format)."""
REWARD_DIR = "reward_model"
"""The reward model's folder in a run directory (reward_config.json, reward_state.pt)."""

RUNTIME_PARAMS = (
    "_last_obs",
    "_last_original_obs",
    "_last_episode_starts",
    "ep_info_buffer",
    "ep_success_buffer",
)
"""Training-time state a saved policy does not need (SB3 sets them again when it trains)."""
ESSENTIAL_PARAMS = ("policy_class", "observation_space", "action_space", "policy_kwargs")
"""What ``Algo.load`` needs to rebuild the policy: never dropped."""


def _preflab_params(data: bytes) -> list[str]:
    """Entries of an SB3 zip's ``data`` JSON whose pickled value refers to a PrefLab module."""
    return [
        key
        for key, value in json.loads(data).items()
        if isinstance(value, dict)
        and ":serialized:" in value
        and b"preflab" in base64.b64decode(value[":serialized:"])
    ]


def policy_zip_bytes(agent: BaseAlgorithm) -> bytes:
    """``agent`` saved in SB3's zip format with nothing PrefLab-specific pickled into it."""
    exclude = list(RUNTIME_PARAMS)
    for _attempt in range(3):
        buf = io.BytesIO()
        agent.save(buf, exclude=exclude)
        data = buf.getvalue()
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            foreign = _preflab_params(z.read("data"))
        droppable = [k for k in foreign if k not in ESSENTIAL_PARAMS and k not in exclude]
        if not droppable:
            if foreign:
                log.warning(
                    "policy.zip refers to PrefLab classes in %s: loading it needs PrefLab "
                    "installed",
                    ", ".join(foreign),
                )
            return data
        exclude += droppable
    return data


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_model_files(run_dir: str | Path, agent: BaseAlgorithm, model: RewardEnsemble) -> None:
    """Write (replace) ``policy.zip`` and ``reward_model/`` in ``run_dir``."""
    d = Path(run_dir)
    _write_atomic(d / POLICY_FILE, policy_zip_bytes(agent))
    final, tmp, old = d / REWARD_DIR, d / f".{REWARD_DIR}.tmp", d / f".{REWARD_DIR}.old"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    model.save(tmp)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def load_reward_model(path: str | Path) -> RewardEnsemble:
    """The reward model of a run, for inference, with no store, env or config: ``path`` is a
    run directory or its ``reward_model`` folder. ``model.reward(obs, acts)`` gives the reward
    the policy was trained on, shape (batch,): ``obs`` (batch, obs_dim), ``acts`` (batch,
    act_dim), actions of discrete spaces one-hot."""
    from preflab.reward.models import load_reward_model as load_dir

    p = Path(path)
    folder = p / REWARD_DIR if (p / REWARD_DIR).is_dir() else p
    if not (folder / "reward_config.json").is_file():
        raise ConfigError(
            f"{p} holds no reward model (expected {p / REWARD_DIR}/reward_config.json). Pass a "
            "run directory that has finished a round since PrefLab began writing model files "
            "(`preflab train --resume RUN` writes them at its next checkpoint), or the "
            "reward_model folder itself"
        )
    return load_dir(folder)
