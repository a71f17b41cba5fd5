"""What a run's settings must satisfy so that its feedback can become labels, checked before
anything is written (:func:`preflab.config.checks.check_run` calls :func:`check_constraints`).

Each feedback source declares its constraints on a :class:`TrainConfig` in one function here
(:data:`SOURCE_CONSTRAINTS`, one per ``--source``); the budgets that can never give a label and
the sub-config flags the chosen source never reads are checked beside them. Every violated
constraint is collected and all of them are reported in one :class:`ConfigError`, each in CLI
terms (the flags and the fix), so a run takes one attempt to set right, not one per mistake.

:func:`start_notes` gives the warnings a run that may work but may also wait forever gets at
its start (people answer through the store, but nothing says a studio is running).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from preflab.config import SourceName, TrainConfig
from preflab.env_families import family_of
from preflab.errors import ConfigError
from preflab.policy.algos import is_on_policy

Constraint = Callable[[TrainConfig, "int | None"], list[str]]
"""A source's constraints: the config and the env's episode length (None: no time limit) →
one message per violated constraint (empty when the run can work)."""


def flag(field: str) -> str:
    """The command-line flag of a config field path, e.g. 'scalar.n_evaluators' →
    '--scalar.n-evaluators'."""
    return "--" + field.replace("_", "-")


# ----- per source ---------------------------------------------------------------------------
def teacher_constraints(config: TrainConfig, episode_steps: int | None) -> list[str]:
    """The simulated teacher answers every pair query at once: nothing beyond the budgets."""
    return []


def crowd_constraints(config: TrainConfig, episode_steps: int | None) -> list[str]:
    """The simulated crowd answers pair queries at once: nothing beyond the budgets."""
    return []


def llm_constraints(config: TrainConfig, episode_steps: int | None) -> list[str]:
    """The LLM judge describes states in words: the env needs a state describer."""
    from preflab.llm.describers import get_describer, known_describers

    try:
        get_describer(config.env_id)
    except ConfigError:
        return [
            f"--source llm describes states in words, and there is no describer for "
            f"--env-id {config.env_id}; use one of {', '.join(known_describers())} (from "
            "Python, preflab.llm.register_describer adds one)"
        ]
    name = config.selector_in_use
    if name == "transitions" and config.reward.use_actions:
        return [
            "--source llm with --selector transitions (the default, 'auto') asks about single "
            "states (s_{t−1}, s_t), which carry no action: the reward model must score states "
            "alone; add --reward.no-use-actions (paper 004's σ(s); --policy-reward.mode "
            "potential gives its potential-based reward)"
        ]
    if name != "transitions" and config.segment_length > 1:
        return [
            f"--source llm ranks consecutive states of one trajectory (paper 004), but --selector "
            f"{name} pairs {config.segment_length}-step segments of unrelated rollouts, and the "
            "judge would see only their last states; use --selector transitions (the default, "
            "'auto') or --segment-length 1"
        ]
    return []


def scalar_constraints(config: TrainConfig, episode_steps: int | None) -> list[str]:
    """Simulated raters rate every step of the live phase; Pref-GUIDE's windowed labels compare
    the rated segments inside a window of ``scalar.window`` consecutive segments of one stream.
    A stream is the consecutive segments of one env episode recorded between two rounds, so it
    holds at most min(episode, steps per env between rounds, live steps per env) //
    segment_length segments; fewer than a window give 0 labels however many ratings come in."""
    c, s, out = config, config.scalar, []
    live = c.policy_reward.live_steps
    if live < 1:
        out.append(
            "--source scalar rates the steps of the live phase; set "
            "--policy-reward.live-steps to the number of rated env steps (e.g. 10000)"
        )
    if not is_on_policy(c.algo) and c.relabel:
        out.append(
            f"--source scalar with --algo {c.algo}: relabelling the replay buffer at every "
            "reward fit would overwrite the live ratings; add --no-relabel (the buffer is "
            "relabelled once when the live phase ends) or use --algo ppo"
        )
    if c.aggregator not in ("auto", "window", "voting"):
        out.append(
            f"--source scalar gives ratings, which --aggregator {c.aggregator} does not turn "
            "into labels; use --aggregator window (the default) or voting"
        )
    limits = {  # the longest stream one episode can give is the shortest of these
        "an episode": episode_steps,
        "a round per env": max(c.initial_steps, c.steps_per_round) // c.n_envs,
        "the live phase per env": math.ceil(live / c.n_envs) if live > 0 else None,
    }
    why, longest = min(((k, v) for k, v in limits.items() if v is not None), key=lambda kv: kv[1])
    items = longest // c.segment_length
    if items < s.window:
        fixes = [f"--segment-length {longest // s.window}"] if longest >= s.window else []
        if items >= 2:
            fixes.append(f"--scalar.window {items}")
        out.append(
            "--source scalar cannot make a label: a label compares rated segments inside a "
            f"window of --scalar.window {s.window} consecutive segments of one stream, but {why} "
            f"is {longest} steps, only {items} segment(s) of --segment-length "
            f"{c.segment_length}. Use {' or '.join(fixes) or 'longer episodes'} "
            "(--segment-length 1 rates single steps)"
        )
    return out


def vlm_constraints(config: TrainConfig, episode_steps: int | None) -> list[str]:
    """The vision-language judge renders clips as the studio does (checked when a segment is
    rendered); shown states in words (``--vlm.view states``), the env needs a describer."""
    if config.vlm.view != "states":
        return []
    from preflab.llm.describers import known_describers

    if config.env_id in known_describers():
        return []
    return [
        f"--vlm.view states describes each clip's states in words, and {config.env_id} has no "
        f"state describer (known: {', '.join(known_describers())}); use --vlm.view frames, or "
        "register one with preflab.llm.register_describer"
    ]


def store_constraints(config: TrainConfig, episode_steps: int | None) -> list[str]:
    """People answer through the store (the studio): constraints are start notes, since a
    studio may be started at any time (:func:`start_notes`)."""
    return []


def route_constraints(config: TrainConfig, episode_steps: int | None) -> list[str]:
    """Routing sends pair queries to the reward model and the AI judge (people take the other
    kinds); a vision or text judge needs the task in words (and a text view a describer);
    people in the studio pace the run."""
    c, r, out = config, config.route, []
    name = c.selector_in_use
    if name in ("ranking", "transitions"):
        out.append(
            f"--source route asks the reward model and the AI judge pair queries; --selector "
            f"{name} asks other kinds. Use --selector disagreement, entropy or random"
        )
    if r.people == "crowd" and name == "groupwise":
        out.append(
            "--route.people crowd answers pair queries only, and --selector groupwise asks "
            "group comparisons (routed to people); use --selector disagreement, entropy or "
            "random, or --route.people oracle"
        )
    if r.ai in ("vlm", "llm") and not c.task.strip():
        out.append(
            f"--route.ai {r.ai} shows the judge the task in words: pass --task 'what the agent "
            "should do' (e.g. 'walk forward fast without falling')"
        )
    if r.ai == "llm":
        out += vlm_constraints(
            dataclasses.replace(c, vlm=dataclasses.replace(c.vlm, view="states")), episode_steps
        )
    elif r.ai == "vlm":
        out += vlm_constraints(c, episode_steps)
    if r.people == "store" and c.clock == "steps":
        out.append(
            "--route.people store: people answer in the studio and pace the run; drop --clock "
            "steps (or use --route.people oracle for a simulated run)"
        )
    if r.people != "store" and c.clock == "labels":
        out.append(
            f"--clock labels waits for people in the studio, and --route.people {r.people} "
            "answers at once; drop --clock labels or use --route.people store"
        )
    return out


SOURCE_CONSTRAINTS: dict[SourceName, Constraint] = {
    "teacher": teacher_constraints,
    "crowd": crowd_constraints,
    "llm": llm_constraints,
    "vlm": vlm_constraints,
    "scalar": scalar_constraints,
    "store": store_constraints,
    "route": route_constraints,
}
"""Each ``--source``'s constraints on a config (one function per source)."""


# ----- budgets --------------------------------------------------------------------------------
def budget_constraints(config: TrainConfig, episode_steps: int | None) -> list[str]:
    """Budgets that are accepted one by one but give 0 labels or a NaN result together."""
    c, out = config, []
    if c.pool_size < 2 and c.source != "scalar":
        out.append(
            f"--pool-size {c.pool_size}: a query compares two segments drawn from the pool of "
            "the most recent segments, so no query can be asked; use --pool-size ≥ 2 "
            "(default 400)"
        )
    if c.eval_episodes < 1:
        out.append(
            f"--eval-episodes {c.eval_episodes}: the final true return would be the mean of "
            "no episodes (nan); use --eval-episodes ≥ 1"
        )
    if c.log_clip_every < 0:
        out.append(
            f"--log-clip-every must be ≥ 0 (0: no clips of the policy), got {c.log_clip_every}"
        )
    no_clips = family_of(c.env_id).unsupported("clips", c.env_id) if c.log_clip_every else None
    if no_clips:
        out.append(no_clips)
    if c.log_clip_every and not c.log:
        out.append(
            f"--log-clip-every {c.log_clip_every} shows clips in the trackers, and no --log "
            "tracker is on; add --log tensorboard (or wandb)"
        )
    if c.eval_every_rounds < 0:
        out.append(
            f"--eval-every-rounds must be ≥ 0 (0: only at the end), got {c.eval_every_rounds}"
        )
    if c.aggregator in ("window", "voting") and c.source not in ("scalar", "store"):
        out.append(
            f"--aggregator {c.aggregator} makes labels from rating streams, which --source "
            f"{c.source} does not give (0 labels); use --aggregator auto, or --source scalar"
        )
    if c.wait_for_labels_s < 0:
        out.append(f"--wait-for-labels-s must be ≥ 0, got {c.wait_for_labels_s}")
    return out


# ----- sub-configs the chosen source never reads ------------------------------------------------
_USED_BY: dict[str, tuple[str, ...]] = {
    "teacher": ("teacher", "route"),
    "crowd": ("crowd", "route"),
    "llm": ("llm",),
    "vlm": ("vlm", "route"),
    "scalar": ("scalar",),
    "route": ("route",),
}
"""Which ``--source`` reads each sub-config (fields of ``scalar`` that windowed labels use are
also read by people's ratings and the window/voting aggregators: :func:`unused_settings`)."""

_WINDOW_FIELDS = ("window", "delta", "max_labels")
"""``scalar.*`` fields that windowed labels read (any source with --aggregator window/voting,
and people's ratings with --source store)."""


def _baseline(config: TrainConfig, name: str) -> list[Any]:
    """Values of sub-config ``name`` that are defaults, not a user's choice (the dataclass
    default, and the preset's of the env's family: ``TrainConfig.atari`` for an Atari id)."""
    f = {x.name: x for x in dataclasses.fields(TrainConfig)}[name]
    out = [f.default_factory()] if callable(f.default_factory) else [f.default]
    start = family_of(config.env_id).config_preset
    if start is not None:
        out.append(getattr(getattr(TrainConfig, start)(config.env_id), name))
    return out


def unused_settings(config: TrainConfig) -> list[str]:
    """Flags of sub-configs set away from their defaults that the chosen source never reads,
    as '--crowd.n-users 5'."""
    c, out = config, []
    windows = c.source == "store" or c.aggregator in ("window", "voting")
    for name, users in _USED_BY.items():
        if c.source in users:
            continue
        value = getattr(c, name)
        bases = _baseline(c, name)
        if value in bases:
            continue
        for f in dataclasses.fields(value):
            if name == "scalar" and windows and f.name in _WINDOW_FIELDS:
                continue
            v = getattr(value, f.name)
            if all(v != getattr(b, f.name) for b in bases):
                shown = " ".join(map(str, v)) if isinstance(v, tuple) else str(v)
                out.append(f"{flag(f'{name}.{f.name}')} {shown}")
    return out


def _unused_message(config: TrainConfig, unused: Sequence[str]) -> str:
    heads = sorted({u.split(".")[0].removeprefix("--") for u in unused})
    return (
        f"{', '.join(unused)} would be ignored: --source {config.source} does not read "
        f"{' or '.join(f'--{h}.*' for h in heads)}; add "
        f"{' or '.join(f'--source {h}' for h in heads)}, or drop "
        f"{'it' if len(unused) == 1 else 'them'}"
    )


# ----- all together -------------------------------------------------------------------------------
def constraint_problems(config: TrainConfig, episode_steps: int | None) -> list[str]:
    """Every violated constraint of ``config`` (the source's, the budgets', unused flags)."""
    out = SOURCE_CONSTRAINTS[config.source](config, episode_steps)
    out += budget_constraints(config, episode_steps)
    unused = unused_settings(config)
    if unused:
        out.append(_unused_message(config, unused))
    return out


def check_constraints(
    config: TrainConfig, episode_steps: int | None, *, also: Sequence[str] = ()
) -> None:
    """Raise one ConfigError listing ``also`` (problems found by other checks) and every
    violated constraint; nothing when there is none."""
    problems = [*also, *constraint_problems(config, episode_steps)]
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(
            f"{len(problems)} settings cannot work: "
            + " ".join(f"({k}) {p.rstrip('.')}." for k, p in enumerate(problems, 1))
        )


def start_notes(config: TrainConfig, run_dir: str, *, studio: bool) -> list[str]:
    """Warnings for the start of a run that can work but may not: people answer through the
    store and no studio is started with it (``studio``: the run has --studio); a teacher with
    the user's own preference function."""
    if config.source == "teacher" and config.teacher.score:
        target = config.eval_target or config.teacher.score
        return [
            f"the teacher prefers by your --teacher.score {config.teacher.score}: reward accuracy "
            f"and correlation measure agreement with {target}, and target_return (final table, "
            "eval_target_return in metrics.csv, the plot) is the policy's score by it; "
            "true_return and the train/eval return columns are still the env's own reward"
        ]
    people = config.source == "store" or (
        config.source == "route" and config.route.people == "store"
    )
    if not people or studio:
        return []
    how = f"`preflab studio {run_dir}` in another terminal, or start the run with --studio"
    if not config.paced_by_labels:
        return [
            "--source store --clock steps: the trainer never waits for answers, so unless a "
            f"studio runs ({how}) and people answer while it trains, it trains on an untrained "
            "reward with 0 labels; drop --clock steps to let the trainer wait for them"
        ]
    return [f"people answer this run in the studio ({how}); the trainer waits for their answers"]
