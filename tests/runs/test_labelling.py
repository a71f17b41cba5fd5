"""Label your own trajectories (issue #29): ``preflab label`` makes a labelling run from a Minari
dataset made here from a few Pendulum rollouts (nothing downloaded) or from an export's
segments.npz; the real studio serves its pairs and renders its clips from the recorded states;
a scripted person answers by the trajectories' own rewards; ``preflab fit`` fits a reward model
that orders held-out segments like those rewards and that ``LearnedReward`` can use."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from preflab import load_reward_model
from preflab.cli.main import main
from preflab.config import TrainConfig
from preflab.errors import ConfigError, DataError
from preflab.policy.wrappers import LearnedReward
from preflab.reward.batch import SegmentBatch
from preflab.runs.labelling import cut_segments, fit_labelled, read_trajectories, start_labelling
from preflab.store import FeedbackStore
from tests import warm_python
from tests.studio.api_server import free_port
from tests.studio.e2e_support import e2e_env, wait_until

minari = pytest.importorskip("minari")


def pendulum_minari(root: Path, episodes: int, steps: int, seed: int) -> Path:
    """A Minari dataset of random Pendulum-v1 episodes, each step's simulator state in
    ``infos["state"]`` (Minari's storage API; its DataCollector would need JAX)."""
    from minari.data_collector.episode_buffer import EpisodeBuffer
    from minari.dataset.minari_storage import MinariStorage

    env = gym.make("Pendulum-v1")
    env.action_space.seed(seed)
    data = root / "data"
    root.mkdir(parents=True)
    storage = MinariStorage.new(
        data,
        observation_space=env.observation_space,
        action_space=env.action_space,
        env_spec=env.spec,
        data_format="arrow",
    )
    buffers = []
    for ep in range(episodes):
        o, _ = env.reset(seed=seed + ep)
        obs, acts, rews, states = [o], [], [], [np.array(env.unwrapped.state)]
        for _ in range(steps):
            a = env.action_space.sample()
            o, r, *_ = env.step(a)
            obs.append(o)
            acts.append(a)
            rews.append(float(r))
            states.append(np.array(env.unwrapped.state))
        buffers.append(
            EpisodeBuffer(
                id=ep,
                seed=seed + ep,
                observations=np.array(obs),
                actions=np.array(acts),
                rewards=rews,
                terminations=[False] * steps,
                truncations=[False] * (steps - 1) + [True],
                infos={"state": np.array(states)},
            )
        )
    storage.update_episodes(buffers)
    storage.update_metadata(
        {
            "dataset_id": "pendulum/random-v0",
            "algorithm_name": "random",
            "minari_version": minari.__version__,
        }
    )
    return root


def call(base: str, token: str, path: str, body: dict[str, Any] | None = None) -> Any:
    req = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_people_label_a_minari_dataset_in_the_studio_and_a_reward_is_fitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds = pendulum_minari(tmp_path / "ds", episodes=8, steps=100, seed=0)
    run = tmp_path / "run"
    argv = ["label", str(ds), "--run-dir", str(run), "--pairs", "40", "--segment-length", "20"]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "40 segments of 20 steps from 8 trajectories, 40 pairs" in said
    assert f"preflab studio {run}" in said and "cannot render" not in said
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    pool = store.rounds.pool(0)
    assert pool is not None  # the Groups view's pool: every segment
    true = {s.id: s.true_return for s in store.segments.get(list(pool["segment_ids"]))}
    store.close()

    port = free_port()
    studio = warm_python.popen(
        [
            sys.executable,
            "-m",
            "preflab.cli.main",
            "studio",
            str(run),
            "--port",
            str(port),
            "--min-answer-s",
            "0.05",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        env=e2e_env(),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        token = wait_until(
            lambda: (
                (run / "studio_owner_token").is_file()
                and (run / "studio_owner_token").read_text().strip()
            ),
            60,
            "the studio's owner token",
        )

        def up() -> bool:
            try:
                return bool(call(base, token, "/api/status"))
            except OSError:
                return False

        wait_until(up, 60, "the studio to answer")
        first = call(base, token, "/api/queries/next?kind=pair")["query"]
        key = first["a"][0]["media_key"]
        wait_until(  # the clip renders from the dataset's recorded states
            lambda: call(base, token, f"/api/media/{key}")["status"] == "ready",
            120,
            "the first clip to render",
        )
        answered = 0
        q = first
        while q is not None:
            time.sleep(0.1)  # this studio's minimum between showing and answering (0.05 s)
            a, b = q["a"][0]["segment_id"], q["b"][0]["segment_id"]
            p = 1.0 if true[a] > true[b] else 0.0
            body = {"query_id": q["id"], "p": p, "client_key": f"key-{answered:04d}"}
            call(base, token, "/api/judgements", body)
            answered += 1
            q = call(base, token, "/api/queries/next?kind=pair")["query"]
        assert answered == 40
    finally:
        studio.terminate()
        studio.wait(timeout=20)

    assert main(["fit", str(run)]) == 0
    assert "fitted on 40 labels" in capsys.readouterr().out
    model = load_reward_model(run)
    # held-out segments: fresh Pendulum episodes, ordered like their true returns
    held, _ = read_trajectories(pendulum_minari(tmp_path / "held", episodes=6, steps=100, seed=50))
    segs = cut_segments(held, 20, "Pendulum-v1")
    learned = model.segment_returns(SegmentBatch.from_segments(segs), normalise=True).mean(0)
    truth = np.array([s.true_return for s in segs])
    i, j = np.triu_indices(len(segs), 1)
    agree = np.mean(np.sign(learned[i] - learned[j]) == np.sign(truth[i] - truth[j]))
    assert agree > 0.75, agree
    env = LearnedReward(gym.make("Pendulum-v1"), run)  # usable in your own training script
    env.reset(seed=0)
    assert np.isfinite(env.step(np.zeros(1, np.float32))[1])


def test_an_exports_segments_become_a_labelling_run(finished: Path, tmp_path: Path) -> None:
    assert main(["export", str(finished), "--out", str(tmp_path / "export")]) == 0
    made = start_labelling(
        tmp_path / "export", tmp_path / "run", TrainConfig(segment_length=10), pairs=5
    )
    with np.load(tmp_path / "export" / "segments.npz") as z:
        lengths, has_states = z["lengths"], "states" in z.files
    assert made.n_trajectories == len(lengths)
    assert made.n_segments <= int(np.sum(lengths // 10)) and made.n_pairs == 5
    assert made.renders == has_states  # an export keeps the segments' simulator states
    store = FeedbackStore(tmp_path / "run" / "feedback.db", array_dir=tmp_path / "run" / "segments")
    assert len(store.queries.all()) == 5 and store.rounds.all()[0]["status"] == "waiting"
    store.close()
    with pytest.raises(DataError, match="no answers with a preference yet"):
        fit_labelled(tmp_path / "run")


def test_bad_inputs_say_what_was_expected(finished: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        read_trajectories(tmp_path / "nowhere.npz")
    np.savez(tmp_path / "bad.npz", obs=np.zeros((2, 5, 3)))
    with pytest.raises(DataError, match="lacks"):
        read_trajectories(tmp_path / "bad.npz")
    with pytest.raises(ConfigError, match="not a labelling run"):
        fit_labelled(finished)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        start_labelling(tmp_path / "bad.npz", tmp_path / "full", TrainConfig(), pairs=3)


def test_a_damaged_npz_is_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.npz"
    np.savez(good, obs=np.zeros((2, 5, 3)), acts=np.zeros((2, 5, 1)), lengths=np.array([5, 5]))
    data = good.read_bytes()
    (tmp_path / "truncated.npz").write_bytes(data[: len(data) // 2])
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "segments.npz").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.npz").write_text("not an archive\n" * 20)
    np.savez(tmp_path / "pickled.npz", obs=np.array([{"a": 1}], dtype=object))
    for name, shown in [
        ("truncated.npz", "truncated.npz"),
        ("export", "segments.npz"),
        ("text.npz", "text.npz"),
        ("pickled.npz", "pickled.npz"),
    ]:
        with pytest.raises(ConfigError, match=rf"{shown} is not a valid \.npz \(expected"):
            read_trajectories(tmp_path / name)
        run = tmp_path / f"run-{name}"
        assert main(["label", str(tmp_path / name), "--run-dir", str(run)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"preflab label: error: {tmp_path / name}"), err
        assert "is not a valid .npz" in err and len(err.strip().splitlines()) == 1
        assert not run.exists()


GOOD_NPZ = {"obs": np.zeros((2, 5, 3)), "acts": np.zeros((2, 5, 1)), "lengths": np.array([5, 5])}


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        ({"true_rewards": np.zeros(2)}, "true_rewards has shape (2,)"),
        ({"states": np.zeros(2)}, "states has shape (2,)"),
        ({"states": np.zeros((1, 5, 2))}, "states has shape (1, 5, 2)"),
        ({"obs": np.full((2, 5, 3), "a")}, "obs holds <U1 values, not numbers"),
        ({"acts": np.full((2, 5, 1), "x")}, "acts holds <U1 values, not numbers"),
    ],
    ids=["rewards-1d", "states-1d", "states-short", "string-obs", "string-acts"],
)
def test_npz_arrays_of_the_wrong_shape_or_type_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: dict[str, Any], shown: str
) -> None:
    f = tmp_path / "mine.npz"
    np.savez(f, **(GOOD_NPZ | extra))
    with pytest.raises(DataError, match=r"as `preflab export` writes segments\.npz") as err:
        read_trajectories(f)
    assert str(err.value).startswith(f"{f}: {shown}"), err.value
    run = tmp_path / "run"
    assert main(["label", str(f), "--run-dir", str(run), "--segment-length", "2"]) == 1
    said = capsys.readouterr().err
    assert said.startswith(f"preflab label: error: {f}: {shown}") and len(said.splitlines()) == 1
    assert not run.exists()


def broken_minari(root: Path, metadata: bytes) -> Path:
    (root / "data").mkdir(parents=True)
    (root / "data" / "metadata.json").write_bytes(metadata)
    return root


@pytest.mark.parametrize(
    ("metadata", "shown"),
    [
        (b'{"dataset_id": "x"}', "{data} is not a Minari dataset that minari can read"),
        (b"[1]", "{data}/metadata.json is not a JSON object"),
        (b'{"dataset_id": "caf\xe9"}', "Minari metadata {data}/metadata.json is not UTF-8 text"),
    ],
    ids=["no-spaces", "a-list", "latin-1"],
)
def test_a_broken_minari_dataset_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], metadata: bytes, shown: str
) -> None:
    ds = broken_minari(tmp_path / "ds", metadata)
    shown = shown.format(data=ds / "data")
    with pytest.raises((ConfigError, DataError)) as err:
        read_trajectories(ds)
    assert str(err.value).startswith(shown), err.value
    run = tmp_path / "run"
    assert main(["label", str(ds), "--run-dir", str(run)]) == 1
    said = capsys.readouterr().err
    assert said.startswith(f"preflab label: error: {shown}") and len(said.splitlines()) == 1
    assert not run.exists()


def test_a_labelling_run_is_not_taken_for_a_training_run(
    capsys, finished: Path, tmp_path: Path
) -> None:
    """eval, record and resume on a labelling run say what it is and what to do with it,
    instead of 'no checkpoint: the run never started'."""
    from preflab.runs import check_run_dir

    assert main(["export", str(finished), "--out", str(tmp_path / "export")]) == 0
    run = tmp_path / "lab"
    start_labelling(tmp_path / "export", run, TrainConfig(segment_length=10), pairs=4)
    with pytest.raises(ConfigError, match=r"is a labelling run .*preflab fit"):
        check_run_dir(run)
    record = ["record", str(run), "--out", str(tmp_path / "clip.mp4")]
    for argv in (["eval", str(run)], record, ["train", "--resume", str(run)]):
        assert main(argv) != 0
        assert "is a labelling run" in capsys.readouterr().err
