"""The render worker's start (``python -m preflab.media.worker``): what it loads before it says
ready."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.studio.e2e_support import e2e_env

PROGRAM = """
import os, sys
sys.stdin = open(os.devnull)  # no jobs: main() returns after saying ready
from preflab.media import worker
worker.main()
sys.stderr.write("loaded " + " ".join(m for m in ("mujoco", "pygame") if m in sys.modules))
"""


def _start(warm: str) -> tuple[dict[str, object], set[str]]:
    """The worker's ready line and which renderers (mujoco, pygame) it had loaded by then."""
    env = e2e_env()
    env.pop("PREFLAB_MEDIA_WARM", None)
    if warm:
        env["PREFLAB_MEDIA_WARM"] = warm
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    loaded = out.stderr.rsplit("loaded", 1)[1].split()
    return json.loads(out.stdout), set(loaded)


@pytest.mark.parametrize(
    ("warm", "expected"),
    [
        # the run's env named (the studio names it): its family's renderer alone is loaded
        ("Pendulum-v1@32", {"pygame"}),
        # none named: every family's renderer, MuJoCo's GL driver among them
        ("", {"mujoco"}),
    ],
)
def test_a_worker_loads_the_renderers_of_its_runs_env_before_it_is_ready(
    warm: str, expected: set[str]
) -> None:
    ready, loaded = _start(warm)
    assert ready["ready"] is True
    if warm:
        assert loaded == expected
    else:
        assert expected <= loaded
