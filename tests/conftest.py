"""Shared fixtures: single-threaded torch and JAX, a throwaway PostgreSQL cluster on loopback, the config
of a short PPO run on Pendulum for loop tests.

Records (segments, queries, judgements) for tests come from :mod:`preflab.testing.factories`.

Rendering is headless (EGL), set before any test imports MuJoCo or dm_control: their GL backend
is fixed when they are first imported, and one xdist worker runs many test files."""

from __future__ import annotations

import gc
import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
# JAX (the sbx backend) on one thread, like torch here: three xdist workers share two cores, and
# XLA's own thread pool would take both from the other worker (subprocesses inherit this)
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)
# ... and its compiled programs shared between the test processes (the runs of a test compile
# the same small networks again and again)
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(__import__("tempfile").gettempdir(), f"preflab-tests-jax-{os.getuid()}"),
)
# SB3 makes a folder /tmp/SB3-<time> for the logger of every agent a test builds itself (PrefLab's
# own agents log nowhere, policy/agents.py); SB3_LOGDIR gives them all one folder
os.environ.setdefault(
    "SB3_LOGDIR",
    os.path.join(__import__("tempfile").gettempdir(), f"preflab-tests-sb3-{os.getuid()}"),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from preflab.config import TrainConfig
from preflab.errors import StoreError
from preflab.testing.pgcluster import PostgresCluster

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seeded_torch() -> None:
    """Every test starts from the same state of torch's global generator (this torch seeds it
    at random in each process), whatever ran before it in its worker: dropout and module
    initialisation outside the loop's own seeding draw from it."""
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a fresh PostgreSQL database (scripts/setup.sh --dev installs the server)."""
    try:
        cluster = PostgresCluster.start()
    except StoreError as exc:
        pytest.fail(f"{exc}; run `bash scripts/setup.sh --dev` (installs postgresql)")
    try:
        yield cluster.new_database()
    finally:
        cluster.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL (or SQLite path) of an empty store location: a SQLite file, or a fresh PostgreSQL
    database dropped afterwards; arrays go to tmp_path/segments."""
    if request.param == "sqlite":
        yield str(tmp_path / "feedback.db")
        return
    from tests.store.conftest import drop_pg_database, fresh_pg_database

    base = request.getfixturevalue("postgres_url")
    url, name = fresh_pg_database(base)
    try:
        yield url
    finally:
        drop_pg_database(base, name)


@pytest.fixture(scope="session")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished smoke run (``TrainConfig.smoke()``), trained once per session and shared:
    read it only; change a copy (:func:`tests.run_support.copy_run`)."""
    from preflab.runs import train

    run = tmp_path_factory.mktemp("finished") / "run"
    train(TrainConfig.smoke(), run_dir=run)
    return run


PENDULUM_PPO: dict[str, Any] = {"env_id": "Pendulum-v1", "algo": "ppo", "eval_episodes": 1}
"""What the loop tests on Pendulum share: PPO, seed 0 (the default), one evaluation episode."""


@pytest.fixture
def pendulum_ppo_config() -> Callable[..., TrainConfig]:
    """Builds the TrainConfig of a short PPO run on Pendulum-v1 (:data:`PENDULUM_PPO`); the test
    passes its budgets (steps, labels, segment length) and whatever else it changes."""

    def build(**overrides: Any) -> TrainConfig:
        return TrainConfig(**(PENDULUM_PPO | overrides))

    return build


# Property-based tests are deterministic: the same examples on every run (no flaky CI).
from hypothesis import settings as _hyp_settings  # noqa: E402

_hyp_settings.register_profile("preflab", derandomize=True, deadline=None, print_blob=True)
_hyp_settings.load_profile("preflab")


LONGEST_FIRST = (
    "tests/bench/test_smoke_all.py",  # 96 s
    "tests/runstate/test_resume_sbx.py",  # 96 s
    "tests/docs/test_pages.py",  # 91 s
    "tests/studio/test_e2e_rank.py",  # 83 s
    "tests/studio/test_e2e.py",  # 73 s
    "tests/studio/test_study_assign_sql.py",  # 138 s (100 examples; 50 since)
    "tests/studio/test_e2e_rate.py",  # 54 s
    "tests/test_loop.py",  # 51 s
    "tests/studio/test_api.py",  # 45 s
    "tests/runstate/test_resume_exact.py",  # 45 s
    "tests/runstate/test_resume_pretrained.py",  # 44 s
    "tests/studio/test_e2e_groups_image.py",  # 38 s
    "tests/studio/test_e2e_queue.py",  # 37 s
    "tests/studio/test_study_overlap.py",  # 31 s
    "tests/studio/test_e2e_groupwise.py",  # 30 s
    "tests/studio/test_lifecycle.py",  # 29 s
    "tests/studio/test_e2e_study.py",  # 28 s
    "tests/policy/test_sbx_backend.py",  # 28 s
    "tests/store/test_person_queue.py",  # 27 s
    "tests/llm/test_local_judge.py",  # 26 s
    "tests/studio/test_ranking_api.py",  # 26 s
    "tests/media/test_service.py",  # 25 s
    "tests/sweep/test_sweep.py",  # 22 s
    "tests/studio/test_e2e_finish.py",  # 22 s
    "tests/rundir/test_tracking.py",  # 21 s
    "tests/cli/test_train_sources.py",  # 21 s
    "tests/studio/test_e2e_lifecycle.py",  # 21 s
    "tests/test_layering.py",  # 20 s
    "tests/vlm/test_vlm_train.py",  # 19 s
    "tests/test_packaging.py",  # 19 s
)
"""The modules that take longest, collected first, longest first: scripts/test.sh gives each module
whole to one of three xdist workers in collection order (``--dist loadfile
--no-loadscope-reorder``), so a long module collected late runs on after the others have ended
(on 2026-12-07 the study-assignment test, 138 s and not in this list, was collected 249th of
272 modules). The seconds are each module's ``--durations=0`` total in a full run of
scripts/test.sh on this 2-core machine with nothing else running (2026-12-07, pytest 773 s, before
the run wrote bytecode: docs/guide/test-time.md); the list is the 30 longest, the modules after
them are under 19 s each. Replaying that run's module times (the study-assignment test's halved)
through this order gives the three workers 709-710 s each (the order before: 702, 705 and
721 s; with the test's 138 s, 706, 722 and 770 s, as the run took)."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def key(item: pytest.Item) -> int:
        return rank.get(item.path.relative_to(root).as_posix(), len(rank))

    items.sort(key=key)  # stable: every module keeps its own order


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """No garbage collection while the test modules are collected, then everything collection
    made is frozen (:func:`gc.freeze`): each xdist worker collects every module (~570,000
    objects) and spent 3.6 s of its 15 s of collection in 19 full collections; frozen, the full
    collections while tests run no longer walk those objects (docs/guide/test-time.md)."""
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()
