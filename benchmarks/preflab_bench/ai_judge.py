"""An AI judge's accuracy against the oracle on a fixed, shipped set of clip pairs: point it at
any OpenAI-compatible vision-language server and get the number in one command::

    preflab bench ai_judge --base-url http://HOST:8000/v1 --model Qwen/Qwen2.5-VL-3B-Instruct

The set (``ai_judge_pairs.npz`` beside this module, made once by ``--make-set``, seeded) holds,
per env (DeepMind Control walker-walk and cheetah-run, Meta-World button-press), pairs of
random-policy segments whose true returns differ clearly (the gap is in the upper half of
random pairs' gaps): the simulator state of every step (rendered here by the studio's
replayers) and both true returns. Per env it asks :class:`preflab.vlm.VLMJudge` about every pair
``--samples`` times and reports: the share of answers with no verdict (unparseable), of
"no difference" answers, the accuracy of the decisive answers against the oracle (the higher
true return) with a 95% Wilson interval, the accuracy of the soft labels (mean answer ≠ 0.5),
failed requests, and prompt tokens, completion tokens and seconds per answer (from the server's
``usage`` and the client's clock).

Without ``--base-url`` it starts the stand-in server (:mod:`preflab.testing.vlmserver`, a pixel
rule, not a model): the plumbing is measured, not a model's judgement.

``--view states`` asks a text-only model the same question over described states (the judge's
``view='states'``, as the text judge of paper 004 reads states): each clip is ``--frames`` key
steps in words, from quantities the simulator state gives (:func:`state_features`: the walker's
torso height, uprightness and speed; the cheetah's speed and pitch; the gripper's distance to the
button and how far the button is pressed). Point it at ``preflab llm serve-local``::

    preflab llm serve-local --port 8000 &
    preflab bench ai_judge --view states --base-url http://127.0.0.1:8000/v1 --prompt one-stage
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from preflab.kinds import PAIR
from preflab.llm import ChatClient, ClientConfig, MemoryCache
from preflab.llm.describers import known_describers, register_describer
from preflab.records import Segment
from preflab.rundir.reporting import append_jsonl, md_table
from preflab.sources.routing.calibration import wilson_interval
from preflab.vlm import FrameSpec, VLMJudge, VLMTemplate
from preflab_bench._report import RESULTS, command, header, write_report

SET_PATH = Path(__file__).with_name("ai_judge_pairs.npz")
"""The shipped set of clip pairs."""
ENVS: dict[str, str] = {
    "walker": "dm_control/walker-walk-v0",
    "cheetah": "dm_control/cheetah-run-v0",
    "button": "metaworld/button-press-v3",
}
"""Short name → env id of the set's envs."""
TASKS: dict[str, str] = {
    "walker": "the walker robot stands upright and walks forward",
    "cheetah": "the cheetah robot runs forward as fast as possible",
    "button": "the robot arm presses the button on the box",
}
"""The task text each env's question states."""


# ----- the set ------------------------------------------------------------------------------
def make_set(path: Path, *, pairs: int, length: int, steps: int, seed: int) -> None:
    """Roll out random actions in each env, cut segments, keep ``pairs`` pairs per env whose
    true-return gap is in the upper half of random pairs' gaps; save states and returns."""
    from preflab.envs import make_env
    from preflab.media.capture import capture_state
    from preflab.policy.rollout import sample_action

    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {"envs": np.array(list(ENVS)), "length": np.array(length)}
    for short, env_id in ENVS.items():
        env = make_env(env_id)
        env.reset(seed=int(rng.integers(2**31)))
        states, rewards = [], []
        segs: list[tuple[np.ndarray, float]] = []
        for _ in range(steps):
            st = capture_state(env.unwrapped)
            assert st is not None, env_id
            _, r, term, trunc, _ = env.step(sample_action(env.action_space, rng))
            states.append(st)
            rewards.append(float(r))
            if len(states) == length:
                segs.append((np.stack(states), float(np.sum(rewards))))
                states, rewards = [], []
            if term or trunc:
                env.reset(seed=int(rng.integers(2**31)))
                states, rewards = [], []
        env.close()
        rets = np.array([r for _, r in segs])
        cand = rng.integers(0, len(segs), size=(4000, 2))
        cand = np.unique(np.sort(cand[cand[:, 0] != cand[:, 1]], axis=1), axis=0)
        rng.shuffle(cand)
        gaps = np.abs(rets[cand[:, 0]] - rets[cand[:, 1]])
        keep = cand[gaps > np.median(gaps)][:pairs]
        flip = rng.random(len(keep)) < 0.5  # the better clip first in about half the pairs
        keep[flip] = keep[flip][:, ::-1]
        out[f"{short}/a_states"] = np.stack([segs[i][0] for i in keep[:, 0]])
        out[f"{short}/b_states"] = np.stack([segs[j][0] for j in keep[:, 1]])
        out[f"{short}/a_return"] = rets[keep[:, 0]]
        out[f"{short}/b_return"] = rets[keep[:, 1]]
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, allow_pickle=False, **out)


def load_set(path: Path, env: str) -> tuple[list[tuple[Segment, Segment]], np.ndarray]:
    """The pairs of ``env`` as segments (states only: what is rendered) and the oracle's
    P(a ≻ b) per pair."""
    with np.load(path, allow_pickle=False) as z:
        sa, sb = z[f"{env}/a_states"], z[f"{env}/b_states"]
        ra, rb = z[f"{env}/a_return"], z[f"{env}/b_return"]
    pairs = [
        (
            _segment(f"{env}-{k}-a", ENVS[env], sa[k], ra[k]),
            _segment(f"{env}-{k}-b", ENVS[env], sb[k], rb[k]),
        )
        for k in range(len(sa))
    ]
    return pairs, (ra > rb).astype(float)


def _segment(sid: str, env_id: str, states: np.ndarray, ret: float) -> Segment:
    t = states.shape[0]
    return Segment(
        id=sid,
        obs=np.zeros((t, 1), np.float32),
        acts=np.zeros((t, 1), np.float32),
        true_rewards=np.full(t, ret / t, np.float32),
        env_id=env_id,
        states=states,
    )


# ----- the states in words (--view states) --------------------------------------------------
STATE_IDS: dict[str, str] = {env: f"ai_judge/{env}-state" for env in ENVS}
"""Short name → the describer id of the bench's state features (not an env's observation)."""


def state_features(env: str, clips: list[np.ndarray]) -> list[np.ndarray]:
    """Per clip of simulator states (T, n), the (T, k) quantities the states view puts into
    words: walker: torso height (m), uprightness (cosine of the torso's tilt), horizontal speed
    (m/s); cheetah: forward speed (m/s), torso pitch (rad); button: the gripper's distance to the
    button (m), the button's distance to fully pressed (m)."""
    from preflab.envs import make_env

    e = make_env(ENVS[env])
    try:
        return [np.asarray([_features(env, e.unwrapped, s) for s in c], np.float64) for c in clips]
    finally:
        e.close()


def _features(env: str, u: Any, s: np.ndarray) -> list[float]:
    if env in ("walker", "cheetah"):
        ph = u._env.physics
        with ph.reset_context():
            ph.set_state(s)
        if env == "walker":
            return [
                float(ph.torso_height()),
                float(ph.torso_upright()),
                float(ph.horizontal_velocity()),
            ]
        return [float(np.ravel(ph.speed())[0]), float(np.ravel(ph.named.data.qpos["rooty"])[0])]
    import mujoco

    m, d = u.model, u.data
    nq, nv = int(m.nq), int(m.nv)
    i, nb = nq + nv, m.body_pos.size
    d.qpos[:], d.qvel[:] = s[:nq], s[nq:i]
    m.body_pos[:] = s[i : i + nb].reshape(m.body_pos.shape)
    m.site_pos[:] = s[i + nb :].reshape(m.site_pos.shape)
    mujoco.mj_forward(m, d)
    button = u._get_pos_objects()
    hole = u._get_site_pos("hole")
    return [float(np.linalg.norm(button - u.tcp_center)), float(abs(hole[1] - button[1]))]


def _walker_text(o: np.ndarray) -> str:
    tilt = math.degrees(math.acos(float(np.clip(o[1], -1.0, 1.0))))
    return (
        f"torso height {o[0]:.2f} m, torso tilted {tilt:.0f} degrees from upright, "
        f"moving {'forward' if o[2] >= 0 else 'backward'} at {abs(o[2]):.2f} m/s."
    )


def _cheetah_text(o: np.ndarray) -> str:
    return (
        f"moving {'forward' if o[0] >= 0 else 'backward'} at {abs(o[0]):.2f} m/s, "
        f"torso pitched {math.degrees(o[1]):.0f} degrees."
    )


def _button_text(o: np.ndarray) -> str:
    return f"gripper {o[0]:.3f} m from the button, button {o[1]:.3f} m from fully pressed."


def register_state_describers() -> None:
    """Describers of :func:`state_features`' rows under :data:`STATE_IDS` (once)."""
    texts = {
        "walker": (_walker_text, 3),
        "cheetah": (_cheetah_text, 2),
        "button": (_button_text, 2),
    }
    have = set(known_describers())
    for env, (fn, dim) in texts.items():
        if STATE_IDS[env] not in have:
            register_describer(STATE_IDS[env], fn, obs_dim=dim)


def as_described(pairs: list[tuple[Segment, Segment]], env: str) -> list[tuple[Segment, Segment]]:
    """The same pairs with each segment's observations replaced by its state features (what
    the states view describes)."""
    register_state_describers()
    segs = [s for ab in pairs for s in ab]
    feats = state_features(env, [np.asarray(s.states) for s in segs])
    out = [
        Segment(
            id=s.id,
            obs=f,
            acts=s.acts,
            true_rewards=s.true_rewards,
            env_id=STATE_IDS[env],
            states=s.states,
        )
        for s, f in zip(segs, feats, strict=True)
    ]
    return [(out[2 * k], out[2 * k + 1]) for k in range(len(pairs))]


# ----- measuring ------------------------------------------------------------------------------
def measure(env: str, client: ChatClient, args: argparse.Namespace) -> dict[str, Any]:
    """Ask the judge about every pair of ``env``; the row of the table."""
    pairs, truth = load_set(args.set, env)
    pairs, truth = pairs[: args.pairs], truth[: args.pairs]
    if args.view == "states":
        pairs = as_described(pairs, env)
    frames = FrameSpec(count=args.frames, size=args.image_size, format=args.format)
    judge = VLMJudge(
        client,
        task=TASKS[env],
        template=VLMTemplate.load(args.prompt),
        frames=frames,
        samples=args.samples,
        view=args.view,
    )
    queries = [PAIR.query(a.id, b.id) for a, b in pairs]
    segs = {s.id: s for ab in pairs for s in ab}
    t0 = time.perf_counter()
    try:
        judge.submit(queries, segs)
    finally:
        wall = time.perf_counter() - t0
        judge.close()
    by_query = {q.id: k for k, q in enumerate(queries)}
    js = judge.collect()
    answered = [j for j in js if j.meta["response"] is not None or j.meta["description"]]
    decisive = [j for j in js if j.p in (0.0, 1.0)]
    right = sum(j.p == truth[by_query[j.query_id]] for j in decisive)
    soft: dict[int, list[float]] = {}
    for j in js:
        if j.p is not None:
            soft.setdefault(by_query[j.query_id], []).append(j.p)
    soft_p = {k: float(np.mean(v)) for k, v in soft.items() if np.mean(v) != 0.5}
    soft_right = sum((p > 0.5) == (truth[k] == 1.0) for k, p in soft_p.items())
    usage = judge.usage_report()
    n_ans = max(1, len(answered))
    lo, hi = wilson_interval(right, len(decisive))  # 95 %; [0, 1] when none was decisive
    return {
        "env": env,
        "pairs": len(pairs),
        "answers": len(answered),
        "unparseable": sum(j.p is None for j in answered) / n_ans,
        "equal": sum(j.p == 0.5 for j in js) / n_ans,
        "accuracy": right / len(decisive) if decisive else math.nan,
        "ci": (lo, hi),
        "soft_accuracy": soft_right / len(soft_p) if soft_p else math.nan,
        "failed": usage["failed"],
        "prompt_tokens": usage["prompt_tokens"] / n_ans,
        "completion_tokens": usage["completion_tokens"] / n_ans,
        "seconds": usage["seconds"] / n_ans,
        "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="preflab bench ai_judge", description=__doc__)
    ap.add_argument("--base-url", default="", help="the server (empty: the stand-in server)")
    ap.add_argument("--model", default="default")
    ap.add_argument("--api-key-env", default="OPENAI_API_KEY")
    ap.add_argument("--prompt", choices=["two-stage", "one-stage"], default="two-stage")
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--format", choices=["jpeg", "png"], default="jpeg")
    ap.add_argument(
        "--view",
        choices=["frames", "states"],
        default="frames",
        help="frames: images (a vision-language model); states: the key steps' states in words "
        "(a text-only model, e.g. preflab llm serve-local)",
    )
    ap.add_argument("--max-tokens", type=int, default=512, help="per answer")
    ap.add_argument("--pairs", type=int, default=20, help="pairs per env (at most the set's)")
    ap.add_argument("--envs", nargs="+", choices=sorted(ENVS), default=list(ENVS))
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--timeout-s", type=float, default=120.0)
    ap.add_argument("--set", type=Path, default=SET_PATH, help="the set of clip pairs")
    ap.add_argument("--make-set", action="store_true", help="(re)make the set, then stop")
    ap.add_argument("--out", type=Path, default=RESULTS / "ai_judge.md")
    ap.add_argument("--jsonl", type=Path, default=None, help="run log (default: beside --out)")
    args = ap.parse_args(argv)
    if args.make_set:
        make_set(args.set, pairs=20, length=25, steps=2000, seed=0)
        return 0
    from contextlib import ExitStack

    with ExitStack() as stack:
        url, who = args.base_url, f"{args.model} at {args.base_url}"
        if not url:
            from preflab.testing.vlmserver import FrameJudgeServer

            url = stack.enter_context(FrameJudgeServer()).base_url
            who = "the stand-in server (brightness rule, not a model: plumbing only)"
        cfg = ClientConfig(
            base_url=url,
            model=args.model,
            api_key_env=args.api_key_env,
            max_tokens=args.max_tokens,
            concurrency=args.concurrency,
            timeout_s=args.timeout_s,
        )
        client = stack.enter_context(ChatClient(cfg, cache=MemoryCache()))
        rows = [measure(env, client, args) for env in args.envs]
    md = header(
        "AI judge against the oracle (fixed clip pairs)",
        "preflab_bench.ai_judge",
        argv,
        f"{who}; {args.prompt}, {args.samples} sample(s), "
        + (
            f"{args.frames} key steps' states in words"
            if args.view == "states"
            else f"{args.frames} frames of {args.image_size} px {args.format}"
        )
        + f"; max {args.max_tokens} tokens per answer; up to {args.pairs} pairs per env from "
        f"{args.set.name}",
    )
    md += md_table(
        [
            "env",
            "pairs",
            "answers",
            "unparseable",
            "no difference",
            "accuracy (decisive)",
            "95% CI",
            "soft-label accuracy",
            "failed requests",
            "prompt tok/answer",
            "completion tok/answer",
            "s/answer",
        ],
        [
            [
                r["env"],
                r["pairs"],
                r["answers"],
                r["unparseable"],
                r["equal"],
                r["accuracy"],
                f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]",
                r["soft_accuracy"],
                r["failed"],
                r["prompt_tokens"],
                r["completion_tokens"],
                r["seconds"],
            ]
            for r in rows
        ],
    )
    md += (
        "\nThe oracle prefers the clip with the higher true return; chance is 0.5. Seconds are "
        "each request's wall time (concurrent requests overlap).\n"
    )
    write_report(md, args.out)
    log = args.jsonl or args.out.with_name(args.out.stem + "_runs.jsonl")
    for r in rows:  # the run log: one row per env, with the command that made it
        append_jsonl(log, {"command": command("ai_judge", argv), "model": args.model, **r})
    return 0
