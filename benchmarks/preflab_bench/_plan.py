"""Pre-registered benchmark experiments: ``benchmarks/plan.toml`` (issue #27).

Each ``[[experiment]]`` states, before any run, the question, the arms, the evaluation seeds
(disjoint from the seeds used for tuning), the budget, the metric, the target and how often the
result will be read. Extending an experiment after reading its result (more seeds) is a NEW
entry with ``extends = "<id>"``; the looks are counted along that chain, and the reporting
protocol (:func:`preflab_bench._protocol.corrected_confidence`) widens the interval for them.

Keys of an entry::

    id            unique name, e.g. "bpref-walker-oracle"
    bench         the `preflab bench` name that runs it
    question      what the experiment answers, one sentence
    arms          names of the arms compared (the first is the one under test)
    eval_seeds    seeds whose results are reported (in an extension: the seeds it adds)
    tuning_seeds  seeds used to choose settings; none of them may be an evaluation seed
    budget        free-form table (env_steps, labels, note, ...)
    metric        what is measured, in words
    target        {value, direction = "above" | "below", kind = "ratio" | ..., note?}
    looks         times the result is read within this entry (1 = once, at the end)
    committed     date the entry was committed (ISO, e.g. 2026-11-28)
    extends       optional: the id of the entry this one extends after a look
    env / envs    optional: the env (or envs) it runs on
    task          optional: the task within the env (e.g. a Meta-World MT1 task)
    env_seeds     optional: env → seeds, when envs got different seeds at this look
    reuse         optional: arm → the entry whose runs give that arm, e.g.
                  {sac_true_reward = "bpref-walker-sbx100k"}: experiments that differ only in
                  the arm under test share a baseline, which is not run again
    note          optional: anything the reader must know

An entry whose runs turn out not to answer its question (a defect in what ran, found after the
runs) is declared void in ``plan_voids.toml`` beside the plan, never by editing the entry::

    [void]
    "bpref-walker-equal-stop-sbx100k" = "why, found when"

Its report then shows the runs and this reason and no verdict (the bpref and crowd_ppo
reports). The keys of plan.toml stay as listed above: queued runs of older commits
(``benchmarks/run_queue.py``) read the same plan file with their own, stricter parser.

A run-log row (one JSON object of a ``*_runs.jsonl`` file) counts as planned only when it names
its entry (``"plan": "<id>"``) and records the ``"command"`` that ran it; otherwise it is
exploratory (:func:`check_row`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from preflab.errors import ConfigError, DataError

PLAN = Path("benchmarks") / "plan.toml"
"""The committed plan, relative to the checkout's top."""
VOIDS = "plan_voids.toml"
"""The file beside the plan that declares entries void (see the module docstring)."""

REQUIRED = (
    "id",
    "bench",
    "question",
    "arms",
    "eval_seeds",
    "tuning_seeds",
    "budget",
    "metric",
    "target",
    "looks",
    "committed",
)
"""Keys every ``[[experiment]]`` entry must have."""
OPTIONAL = ("extends", "env", "envs", "task", "env_seeds", "reuse", "note")
"""Keys an entry may have."""
TARGET_KEYS = ("value", "direction", "kind", "note")
"""Keys of an entry's ``target`` table (``note`` optional)."""


Direction = Literal["above", "below"]
"""Which side of a target a result must clear."""
Verdict = Literal["met", "missed", "not shown"]
"""A pre-registered target's verdict."""


def verdict(lo: float, hi: float, target: float, direction: Direction) -> Verdict:
    """ "met" when the whole interval [lo, hi] clears ``target`` on the ``direction`` side
    (strictly), "missed" when the whole interval lies on the other side, "not shown" when it
    contains the target. Pass the looks-corrected interval."""
    if direction not in ("above", "below"):
        raise ConfigError(f'direction must be "above" or "below", got {direction!r}')
    if not lo <= hi:
        raise DataError(f"an interval needs lo ≤ hi, got [{lo}, {hi}]")
    if direction == "above":
        return "met" if lo > target else "missed" if hi < target else "not shown"
    return "met" if hi < target else "missed" if lo > target else "not shown"


@dataclass(frozen=True, kw_only=True)
class Target:
    """What counts as success."""

    value: float
    """The threshold the (looks-corrected) interval must clear."""
    direction: Literal["above", "below"]
    """Which side of ``value`` is success."""
    kind: str
    """What the value is a value of: "ratio", "difference", "fraction_of_true_reward", ..."""
    note: str = ""
    """Anything the reader needs about the target (e.g. a published figure quoted beside it)."""


@dataclass(frozen=True, kw_only=True)
class Experiment:
    """One ``[[experiment]]`` entry of the plan."""

    id: str
    """Unique name of the entry."""
    bench: str
    """The ``preflab bench`` name that runs it."""
    question: str
    """What the experiment answers."""
    arms: tuple[str, ...]
    """The arms compared; the first is the one under test."""
    eval_seeds: tuple[int, ...]
    """Seeds whose results are reported (in an extension: the seeds it adds)."""
    tuning_seeds: tuple[int, ...]
    """Seeds used to choose settings; disjoint from every evaluation seed of the chain."""
    budget: Mapping[str, Any]
    """Free-form budget table (env_steps, labels, note, ...)."""
    metric: str
    """What is measured."""
    target: Target
    """What counts as success."""
    looks: int
    """Times the result is read within this entry (1 = once, at the end)."""
    committed: dt.date
    """Date the entry was committed."""
    extends: str | None = None
    """The entry this one extends after a look, or None for a first entry."""
    envs: tuple[str, ...] = ()
    """The envs it runs on (from ``env`` or ``envs``)."""
    task: str = ""
    """The task within the env, when the env has several."""
    env_seeds: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Env → seeds added for that env, when envs got different seeds; empty when every env
    runs ``eval_seeds``."""
    reuse: Mapping[str, str] = field(default_factory=dict)
    """Arm → the entry whose run-log rows give that arm (same bench, env and seeds); those runs
    are not made again for this entry."""
    note: str = ""
    """Anything the reader must know."""
    void: str = ""
    """Why the entry's runs do not answer its question, when a defect is found after they ran
    (e.g. the code did not do what the entry registered; from ``plan_voids.toml``); its report
    then shows the runs and this reason, never a verdict. Empty for a sound entry."""

    def verdict_clause(self, lo: float, hi: float) -> str:
        """The end of a result line: the target and the verdict of the looks-corrected interval
        [lo, hi], or, for a void entry, why there is none."""
        t = self.target
        if self.void:
            return (
                f"; target {t.direction} {t.value}: **no verdict**, the entry is void: {self.void}"
            )
        return f"; target {t.direction} {t.value}: **{verdict(lo, hi, t.value, t.direction)}**"

    def seeds_for(self, env: str | None) -> tuple[int, ...]:
        """The evaluation seeds this entry adds for ``env`` (all of them for None)."""
        if env is None or not self.env_seeds:
            return self.eval_seeds if env is None or not self.envs or env in self.envs else ()
        return self.env_seeds.get(env, ())


@dataclass(frozen=True, kw_only=True)
class RowCheck:
    """Whether a run-log row belongs to a plan entry."""

    status: Literal["planned", "exploratory"]
    """"planned" when the row names an entry of the plan and records its command."""
    entry: str | None
    """The plan id the row names, if any."""
    reasons: tuple[str, ...]
    """Why the row is exploratory (empty when planned)."""


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The parsed plan file."""

    experiments: tuple[Experiment, ...]
    """Every entry, in file order."""
    path: Path | None = None
    """The file it was read from."""

    def ids(self) -> list[str]:
        return [e.id for e in self.experiments]

    def entry(self, id: str) -> Experiment:
        """The entry called ``id``; a ConfigError naming close ids otherwise."""
        for e in self.experiments:
            if e.id == id:
                return e
        close = difflib.get_close_matches(id, self.ids(), n=3, cutoff=0.5)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise ConfigError(
            f"no experiment {id!r} in the plan{f' {self.path}' if self.path else ''}{hint}; "
            f"its ids: {', '.join(self.ids()) or 'none'}"
        )

    def chain(self, id: str) -> tuple[Experiment, ...]:
        """The entries from the first one to ``id``, following ``extends``."""
        out = [self.entry(id)]
        while out[-1].extends is not None:
            out.append(self.entry(out[-1].extends))
        return tuple(reversed(out))

    def looks(self, id: str, env: str | None = None) -> int:
        """How often the result of ``id`` has been read, counting every entry it extends: the
        sum of ``looks`` along the chain (its length when each entry is read once). With
        ``env``, only entries that added seeds for that env count."""
        return sum(e.looks for e in self.chain(id) if e.seeds_for(env))

    def seeds(self, id: str, env: str | None = None) -> tuple[int, ...]:
        """Every evaluation seed of the chain up to ``id`` (for ``env``), sorted."""
        return tuple(sorted({s for e in self.chain(id) for s in e.seeds_for(env)}))

    def envs(self, id: str) -> tuple[str, ...]:
        """Every env of the chain up to ``id``, in first-seen order."""
        return tuple(dict.fromkeys(env for e in self.chain(id) for env in e.envs))

    def head(self, id: str) -> Experiment:
        """The latest entry that extends ``id`` (directly or not), or ``id`` itself."""
        current = self.entry(id)
        while True:
            children = [e for e in self.experiments if e.extends == current.id]
            if not children:
                return current
            if len(children) > 1:
                raise ConfigError(
                    f"{current.id!r} is extended by several entries "
                    f"({', '.join(c.id for c in children)}); name the one to report"
                )
            current = children[0]


def _fail(where: str, msg: str) -> ConfigError:
    return ConfigError(f"{where}: {msg}")


def _str(where: str, raw: Mapping[str, Any], key: str) -> str:
    v = raw[key]
    if not isinstance(v, str) or not v.strip():
        raise _fail(where, f"{key} must be a non-empty string, got {v!r}")
    return v


def _seeds(where: str, key: str, v: Any, *, empty_ok: bool) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) for s in v
    ):
        raise _fail(where, f"{key} must be a list of integers, e.g. [10, 11, 12], got {v!r}")
    if not v and not empty_ok:
        raise _fail(where, f"{key} must name at least one seed")
    if len(set(v)) != len(v):
        raise _fail(where, f"{key} repeats a seed: {v}; list each seed once")
    return tuple(v)


def _target(where: str, v: Any) -> Target:
    if not isinstance(v, dict):
        raise _fail(
            where,
            f'target must be a table {{value = 0.8, direction = "above", kind = "ratio"}}, '
            f"got {v!r}",
        )
    unknown = sorted(set(v) - set(TARGET_KEYS))
    missing = [k for k in ("value", "direction", "kind") if k not in v]
    if unknown or missing:
        raise _fail(
            where,
            f"target needs value, direction and kind (note optional); "
            f"missing {missing}, unknown {unknown}",
        )
    value = v["value"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(where, f"target.value must be a number, got {value!r}")
    if v["direction"] not in ("above", "below"):
        raise _fail(where, f'target.direction must be "above" or "below", got {v["direction"]!r}')
    if not isinstance(v["kind"], str) or not v["kind"]:
        raise _fail(
            where, f'target.kind must name what the value is, e.g. "ratio"; got {v["kind"]!r}'
        )
    return Target(
        value=float(value), direction=v["direction"], kind=v["kind"], note=str(v.get("note", ""))
    )


def _experiment(n: int, raw: Any) -> Experiment:
    where = f"[[experiment]] #{n}"
    if not isinstance(raw, dict):
        raise _fail(where, "must be a table")
    if isinstance(raw.get("id"), str):
        where = f"[[experiment]] {raw['id']!r}"
    missing = [k for k in REQUIRED if k not in raw]
    if missing:
        raise _fail(where, f"missing {', '.join(missing)}; every entry needs {', '.join(REQUIRED)}")
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise _fail(
            where,
            f"unknown keys {unknown}; an entry has {', '.join(REQUIRED)} and optionally "
            f"{', '.join(OPTIONAL)} (free-form details go in budget or note)",
        )
    arms = raw["arms"]
    if not isinstance(arms, list) or not arms or not all(isinstance(a, str) and a for a in arms):
        raise _fail(
            where, f'arms must be a non-empty list of names, e.g. ["pebble", "sac"]; got {arms!r}'
        )
    if len(set(arms)) != len(arms):
        raise _fail(where, f"arms repeats a name: {arms}")
    eval_seeds = _seeds(where, "eval_seeds", raw["eval_seeds"], empty_ok=False)
    tuning_seeds = _seeds(where, "tuning_seeds", raw["tuning_seeds"], empty_ok=True)
    overlap = sorted(set(eval_seeds) & set(tuning_seeds))
    if overlap:
        raise _fail(
            where,
            f"seeds {overlap} are both evaluation and tuning seeds; a result on a seed that "
            "chose the settings is not a test. Use disjoint lists, e.g. tuning_seeds = [0, 1, 2] "
            "and eval_seeds from 10 on",
        )
    if not isinstance(raw["budget"], dict):
        raise _fail(
            where, f"budget must be a table, e.g. {{env_steps = 100000}}, got {raw['budget']!r}"
        )
    looks = raw["looks"]
    if isinstance(looks, bool) or not isinstance(looks, int) or looks < 1:
        raise _fail(
            where, f"looks must be an integer ≥ 1 (1 = read once, at the end), got {looks!r}"
        )
    committed = raw["committed"]
    if isinstance(committed, str):
        try:
            committed = dt.date.fromisoformat(committed)
        except ValueError:
            committed = None
    if isinstance(committed, dt.datetime) or not isinstance(committed, dt.date):
        raise _fail(
            where, f"committed must be an ISO date such as 2026-11-28, got {raw['committed']!r}"
        )
    if "env" in raw and "envs" in raw:
        raise _fail(where, "give env (one) or envs (a list), not both")
    envs_raw = [raw["env"]] if "env" in raw else raw.get("envs", [])
    if not isinstance(envs_raw, list) or not all(isinstance(e, str) and e for e in envs_raw):
        raise _fail(where, f"env must be a string and envs a list of strings, got {envs_raw!r}")
    env_seeds: dict[str, tuple[int, ...]] = {}
    if "env_seeds" in raw:
        table = raw["env_seeds"]
        if not isinstance(table, dict) or not table:
            raise _fail(where, 'env_seeds must be a table env → seeds, e.g. {"Hopper-v5" = [0, 1]}')
        for env, seeds in table.items():
            if envs_raw and env not in envs_raw:
                raise _fail(where, f"env_seeds names {env!r}, which is not in envs {envs_raw}")
            env_seeds[env] = _seeds(where, f"env_seeds.{env}", seeds, empty_ok=False)
        union = {s for seeds in env_seeds.values() for s in seeds}
        if union != set(eval_seeds):
            raise _fail(
                where,
                f"eval_seeds must be the union of env_seeds ({sorted(union)}), got "
                f"{sorted(eval_seeds)}",
            )
    extends = raw.get("extends")
    if extends is not None and (not isinstance(extends, str) or not extends):
        raise _fail(where, f"extends must be the id of another entry, got {extends!r}")
    for key in ("task", "note"):
        if key in raw and not isinstance(raw[key], str):
            raise _fail(where, f"{key} must be a string, got {raw[key]!r}")
    reuse = raw.get("reuse", {})
    if not isinstance(reuse, dict) or not all(
        isinstance(a, str) and isinstance(e, str) and e for a, e in reuse.items()
    ):
        raise _fail(
            where,
            'reuse must be a table arm → entry id, e.g. {sac_true_reward = "bpref-walker-sbx100k"}'
            f", got {reuse!r}",
        )
    for arm in reuse:
        if arm not in arms[1:]:
            raise _fail(
                where,
                f"reuse names {arm!r}, which is not one of the arms compared with the arm under "
                f"test ({arms[1:]}); the arm under test is always run for its entry",
            )
    return Experiment(
        id=_str(where, raw, "id"),
        bench=_str(where, raw, "bench"),
        question=_str(where, raw, "question"),
        arms=tuple(arms),
        eval_seeds=eval_seeds,
        tuning_seeds=tuning_seeds,
        budget=dict(raw["budget"]),
        metric=_str(where, raw, "metric"),
        target=_target(where, raw["target"]),
        looks=looks,
        committed=committed,
        extends=extends,
        envs=tuple(envs_raw),
        task=str(raw.get("task", "")),
        env_seeds=env_seeds,
        reuse=dict(reuse),
        note=str(raw.get("note", "")),
    )


def _check_chains(plan: Plan) -> None:
    """Extensions point at existing entries without cycles, keep the question's design, and
    never reuse a seed: no tuning seed of a chain is an evaluation seed anywhere in it, and no
    evaluation seed is added twice for the same env."""
    for e in plan.experiments:
        if e.extends is None:
            continue
        seen = [e.id]
        current = e
        while current.extends is not None:
            if current.extends in seen:
                raise ConfigError(
                    f"[[experiment]] {e.id!r}: extends forms a cycle "
                    f"({' → '.join([*seen, current.extends])}); the first entry has no extends"
                )
            try:
                parent = plan.entry(current.extends)
            except ConfigError as err:
                raise ConfigError(f"[[experiment]] {current.id!r}: extends {err}") from err
            seen.append(parent.id)
            current = parent
        parent = plan.entry(e.extends)
        for key in ("bench", "arms", "metric", "target"):
            if getattr(parent, key) != getattr(e, key):
                raise ConfigError(
                    f"[[experiment]] {e.id!r}: an extension keeps its entry's {key} "
                    f"({getattr(parent, key)!r}), got {getattr(e, key)!r}; a changed design "
                    "is a new experiment without extends"
                )
        if e.committed < parent.committed:
            raise ConfigError(
                f"[[experiment]] {e.id!r}: committed {e.committed} is before the entry it "
                f"extends ({parent.id!r}, {parent.committed})"
            )
    for e in plan.experiments:
        chain = plan.chain(e.id)
        tuning = {s for c in chain for s in c.tuning_seeds}
        evaluated = {s for c in chain for s in c.eval_seeds}
        if tuning & evaluated:
            raise ConfigError(
                f"[[experiment]] {e.id!r}: seeds {sorted(tuning & evaluated)} are tuning seeds "
                "in one entry of its extends chain and evaluation seeds in another; keep them "
                "disjoint along the chain"
            )
        envs = plan.envs(e.id) or (None,)
        for env in envs:
            added: set[int] = set()
            for c in chain:
                again = added & set(c.seeds_for(env))
                if again:
                    raise ConfigError(
                        f"[[experiment]] {c.id!r}: seeds {sorted(again)}"
                        f"{f' of {env}' if env else ''} were already evaluated earlier in its "
                        "extends chain; an extension adds new seeds only"
                    )
                added |= set(c.seeds_for(env))


SHARED_RUNS = frozenset({("efficiency", "bpref", "sac_true_reward")})
"""(bench, another bench, arm): the other bench's arm is the same run, so an entry of the first
may reuse it (``preflab bench efficiency`` runs ``sac_true_reward`` by the B-Pref bench's own
function, with the same options)."""


def _check_reuse(plan: Plan) -> None:
    """A reused arm comes from an entry of the same bench (or of a bench whose arm is the same
    run, :data:`SHARED_RUNS`) that has that arm itself (not reused again) and evaluated it on
    every env and seed of the entry that reuses it."""
    for e in plan.experiments:
        for arm, source_id in e.reuse.items():
            where = f"[[experiment]] {e.id!r}: reuse {arm} = {source_id!r}"
            try:
                source = plan.entry(source_id)
            except ConfigError as err:
                raise ConfigError(f"{where}: {err}") from err
            same_runs = source.bench == e.bench or (e.bench, source.bench, arm) in SHARED_RUNS
            if not same_runs or arm not in source.arms or arm in source.reuse:
                raise ConfigError(
                    f"{where}: that entry must be a {e.bench!r} entry that runs {arm!r} itself "
                    f"(it is a {source.bench!r} entry with arms {list(source.arms)}"
                    + (f", reusing {arm!r} too" if arm in source.reuse else "")
                    + ")"
                )
            for env in plan.envs(e.id) or (None,):
                lacking = sorted(set(plan.seeds(e.id, env)) - set(plan.seeds(source_id, env)))
                if lacking:
                    raise ConfigError(
                        f"{where}: {source_id!r} has no {arm!r} runs for seeds {lacking}"
                        f"{f' of {env}' if env else ''}; reuse needs every evaluation seed"
                    )


def parse_plan(text: str, path: Path | None = None) -> Plan:
    """A plan from the text of a plan file (see the module docstring for its keys)."""
    where = str(path) if path else "plan"
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where} is not valid TOML ({e}); fix the line it names") from e
    unknown = sorted(set(raw) - {"experiment"})
    if unknown:
        raise ConfigError(
            f"{where}: unknown top-level keys {unknown}; a plan holds [[experiment]] entries only"
        )
    entries = raw.get("experiment", [])
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{where} has no [[experiment]] entries; add at least one")
    experiments = tuple(_experiment(n, e) for n, e in enumerate(entries, 1))
    ids = [e.id for e in experiments]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(f"{where}: ids {dupes} are used twice; every entry needs its own id")
    plan = Plan(experiments=experiments, path=path)
    _check_chains(plan)
    _check_reuse(plan)
    return plan


def add_plan_options(
    ap: argparse.ArgumentParser, help: str = "the plan entry these runs belong to (plan.toml)"
) -> None:
    """``--plan ENTRY`` and ``--plan-file PATH`` (default :data:`PLAN`), as every bench run
    under the protocol takes them."""
    ap.add_argument("--plan", default="", help=help)
    ap.add_argument("--plan-file", type=Path, default=PLAN)


def load_plan(path: Path | str = PLAN) -> Plan:
    """The plan in ``path`` (default ``benchmarks/plan.toml``), validated, with the voids of
    the ``plan_voids.toml`` beside it (if there is one)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"no plan file at {p}; run from the checkout's top or pass its path")
    plan = parse_plan(p.read_text(), p)
    voids = p.with_name(VOIDS)
    return with_voids(plan, voids.read_text(), voids) if voids.is_file() else plan


def with_voids(plan: Plan, text: str, path: Path | None = None) -> Plan:
    """``plan`` with the reasons of a voids file (``[void]``: entry id = why) on its entries."""
    where = str(path) if path else VOIDS
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where} is not valid TOML ({e}); fix the line it names") from e
    table = raw.get("void", {})
    if set(raw) - {"void"} or not isinstance(table, dict):
        raise ConfigError(f'{where} holds one table, [void], of entry id = "why"; got {raw!r}')
    for id, why in table.items():
        plan.entry(id)  # an unknown id: a ConfigError naming close ones
        if not isinstance(why, str) or not why.strip():
            raise ConfigError(f"{where}: {id!r} needs the reason it is void, as a string")
    return dataclasses.replace(
        plan,
        experiments=tuple(
            dataclasses.replace(e, void=table[e.id]) if e.id in table else e
            for e in plan.experiments
        ),
    )


def check_row(row: Mapping[str, Any], plan: Plan) -> RowCheck:
    """Whether a run-log row is planned: it names an entry of ``plan`` (``"plan": "<id>"``) and
    records the ``"command"`` that ran it; its ``seed`` (when it has one) is an evaluation seed
    of that entry's chain. Otherwise it is exploratory, with the reasons."""
    reasons = []
    entry = row.get("plan")
    if not isinstance(entry, str) or not entry:
        reasons.append('names no plan entry (no "plan" field)')
        entry = None
    elif entry not in plan.ids():
        reasons.append(f"names {entry!r}, which is not in the plan")
    command = row.get("command")
    if not isinstance(command, str) or not command.strip():
        reasons.append('records no command (no "command" field)')
    if entry is not None and entry in plan.ids():
        env = row.get("env") if isinstance(row.get("env"), str) else None
        envs = plan.envs(entry)
        if env is not None and envs and env not in envs:
            reasons.append(f"env {env!r} is not one of {entry!r}'s envs {list(envs)}")
        elif "seed" in row and row["seed"] not in plan.seeds(entry, env if envs else None):
            reasons.append(f"seed {row['seed']!r} is not an evaluation seed of {entry!r}")
        source = plan.entry(entry).reuse.get(str(row.get("arm")))
        if source is not None:
            reasons.append(f"{entry!r} takes its {row['arm']!r} runs from {source!r}")
    return RowCheck(
        status="exploratory" if reasons else "planned", entry=entry, reasons=tuple(reasons)
    )
