"""``preflab train``: run (or resume) a preference-learning loop with progress and a summary table."""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any, cast

import tyro
from rich.console import Console
from rich.table import Table
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from preflab.cli import train_help
from preflab.config import TrainConfig
from preflab.errors import ConfigError
from preflab.policy.termination_config import TerminationConfig
from preflab.rundir.folders import check_output_dir
from preflab.runs import check_resume_config, check_run_dir, open_loop, start_loop
from preflab.sources.base import ReportsUsage
from preflab.sources.teacher import bpref_teacher


class _Progress:
    """The env-steps bar, shown when the loop starts its rounds (so that a run refused by its
    checks prints its error alone). It starts at the steps the run already had (``initial``:
    a resumed run's, none for a new one) and at that moment, so its rate and time left count
    only the steps this process takes, from when it takes them: a bar made at the first
    round's row and moved there at once showed that round's steps (or a resumed run's earlier
    ones) done in no time, e.g. 11428621 step/s."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: tqdm | None = None

    def start(self, steps: int) -> None:
        """Show the bar at ``steps`` env steps, the run's when this process starts its rounds."""
        self.bar = tqdm(
            total=self.total, initial=steps, unit="step", desc="env steps", dynamic_ncols=True
        )

    def update(self, row: dict[str, Any]) -> None:
        if self.bar is None:  # not started: the rate counts from this row on
            self.start(int(row["env_steps"]))
        assert self.bar is not None
        self.bar.update(max(0, int(row["env_steps"]) - self.bar.n))
        self.bar.set_postfix(
            labels=row["n_labels"],
            acc=f"{row.get('reward_accuracy', float('nan')):.2f}",
            ret=f"{row.get('train_true_return', float('nan')):.0f}",
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def print_summary(summary: dict[str, Any], run_dir: Path) -> None:
    table = Table(title=f"PrefLab run {run_dir}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in (
        "env_id",
        "algo",
        "seed",
        "true_return",
        "true_return_std",
        "success_rate",
        "target_return",
        "target_return_std",
        "n_labels",
        "n_equal",
        "n_skipped",
        "ended_by",
        "reward_accuracy",
        "reward_corr",
        "env_steps",
        "wall_s",
    ):
        v = summary.get(key)
        if key in ("success_rate", "target_return", "target_return_std") and v is None:
            continue  # only envs that report success (Meta-World); only runs with a target
        if key in ("n_equal", "n_skipped") and not v:
            continue  # only when some answers were ties or no answer
        table.add_row(key, f"{v:.3f}" if isinstance(v, float) else str(v))
    judge = summary.get("ai_judge")
    if isinstance(judge, dict):  # what an AI judge's server was asked and what it cost
        cost = judge.get("cost_usd")
        table.add_row(
            "ai_judge",
            f"{judge.get('requests')} requests ({judge.get('cached')} cached, "
            f"{judge.get('failed')} failed), {judge.get('prompt_tokens')} + "
            f"{judge.get('completion_tokens')} tokens, {judge.get('seconds')} s"
            + (f", ${cost:.4f}" if isinstance(cost, float) else ""),
        )
    route = summary.get("routing")
    if isinstance(route, dict):  # who answered: the model, the AI judge, people
        labels, acc = route["labels"], route["ai_accuracy"]
        lo, hi = acc["interval"]
        shown = "n/a" if acc["accuracy"] is None else f"{acc['accuracy']:.3f}"
        table.add_row(
            "routing",
            f"labels: model {labels['model']}, AI {labels['ai']}, people {labels['people']}; "
            f"AI accuracy {shown} [{lo:.3f}, {hi:.3f}] on {acc['records']} calibration answers",
        )
    if summary.get("warnings"):  # a run that failed quietly must not look fine
        from rich.text import Text

        text = Text("\n".join(f"- {w}" for w in summary["warnings"]), justify="left")
        table.add_row(Text("warnings", style="bold red"), text)
    Console().print(table)
    print(f"outputs: {run_dir}/summary.json, metrics.csv, learning_curves.png, feedback.db")


CLIP_SECONDS = 1.0
"""Real-time length of a segment people compare with --studio (Christiano et al. showed 1–2 s)."""


def _falls(env_id: str) -> bool:
    """Whether a MuJoCo env ends episodes on a fall (it takes ``terminate_when_unhealthy``)."""
    import inspect

    import gymnasium as gym

    try:
        entry = gym.spec(env_id).entry_point
        cls = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
        return cls is not None and "terminate_when_unhealthy" in inspect.signature(cls).parameters
    except Exception:  # unknown or unloadable: check_run reports it
        return False


def studio_defaults(env_id: str) -> TrainConfig:
    """A --studio run's defaults for ``env_id`` (every flag still overrides them): people answer
    (clock 'labels'), segments of about :data:`CLIP_SECONDS` of real time, the label budget of
    the env's family and its run settings (:attr:`preflab.env_families.EnvFamily.studio_labels`,
    ``studio_run``; MuJoCo: 200 labels, PPO on 4 envs, 300k steps, and no early termination on
    falls, ``--termination.fixed-horizon``: an early policy falls long before a one-second
    segment ends); Atari: Christiano et al. 2017's set-up; other envs (DeepMind Control
    included): 150 labels, the defaults, 50k steps."""
    from preflab.env_families import family_of
    from preflab.media.timing import step_seconds

    family = family_of(env_id)
    labels = family.studio_labels
    if family.config_preset is not None:  # Atari: TrainConfig.atari
        start = getattr(TrainConfig, family.config_preset)
        return start(env_id, source="store", total_labels=labels)
    seg = max(10, round(CLIP_SECONDS / step_seconds(env_id)))
    base = TrainConfig(env_id=env_id)
    kw: dict[str, Any] = {"source": "store", "total_labels": labels, "segment_length": seg}
    kw |= family.studio_run
    if family.studio_fixed_horizon_on_falls and _falls(env_id):
        # a 1 s segment needs episodes longer than an early policy's falls
        kw["termination"] = TerminationConfig(fixed_horizon=True)
    kw["initial_steps"] = max(base.initial_steps, 4 * seg)
    return dataclasses.replace(base, **kw)


def _env_id(argv: list[str]) -> str:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--env-id", "--env_id", default="")
    return str(pre.parse_known_args(argv)[0].env_id)


def _env_defaults(argv: list[str], *, studio: bool) -> TrainConfig | None:
    """Defaults for the env named on the command line: with --studio, :func:`studio_defaults`;
    the ``TrainConfig`` constructor of the env's family (``EnvFamily.config_preset``:
    Christiano et al. 2017's settings for Atari ids, A2C, 25-step segments,
    convolutional reward model); None otherwise."""
    from preflab.env_families import family_of

    env_id = _env_id(argv)
    if studio:
        return studio_defaults(env_id or TrainConfig().env_id)
    start = family_of(env_id).config_preset if env_id else None
    if start is None:
        return None
    return getattr(TrainConfig, start)(env_id)


# ----- command options: --config FILE.toml, --print-config [FILE], --help-all ------------------

FULL_HELP_DESCRIPTION = (
    "Learn a reward from preference feedback and train a policy on it. Every option follows "
    "(`preflab train --help` shows the ones most runs need). Options of the command itself: "
    "--run-dir DIR (default runs/<env>-<algo>-s<seed>-<time>); --resume DIR (continue a stopped "
    "run); --config FILE.toml (options from a file, flags override it); --preset NAME (options "
    "PrefLab ships, e.g. bpref/walker_walk-pebble, B-Pref's set-up; flags override it); "
    "--print-config [FILE] "
    "(write the resolved options as TOML and exit); --studio [--studio-host H --studio-port P] "
    "(people answer in the browser while it trains; the run ends when the label budget is met, "
    "the owner presses Finish now, or --max-minutes pass. --studio defaults: about 1 s clips, "
    "200 labels for MuJoCo (PPO, 4 envs, 300k steps, no termination on falls) and Atari, 150 "
    "for other envs: a 20-40 minute session; `preflab train --studio --env-id ID "
    "--print-config` shows them). The defaults shown here are those of the env and options given."
)


def _check_command_options(known: argparse.Namespace, rest: list[str]) -> None:
    """Refuse command options that cannot go together, all in one message."""
    problems = []
    if known.resume and known.run_dir:
        problems.append(
            f"--resume continues the run in its own directory ({known.resume}); drop --run-dir"
        )
    if known.preset and known.config:
        problems.append(
            f"--preset {known.preset} and --config {known.config} both give a run's options; "
            "use one (flags override either), or write the preset out with --print-config and edit it"
        )
    if known.resume and known.preset:
        problems.append("--resume keeps the run's own options (its config.json); drop --preset")
    if known.resume and known.config:
        problems.append(
            "--resume keeps the run's own options (its config.json); drop --config (flags "
            "after --resume DIR still change single options)"
        )
    if known.resume and known.teacher:
        problems.append(
            f"--resume keeps the run's own teacher; drop --teacher {known.teacher} (a resumed run "
            "may not change who answers)"
        )
    if known.teacher and known.studio:
        problems.append(
            f"--teacher {known.teacher} is a simulated teacher; with --studio people answer: drop "
            "one of them"
        )
    if known.teacher:
        bpref_teacher(known.teacher)  # an unknown name is refused with the names there are
    if problems:
        raise ConfigError("; ".join(problems))


def _file_defaults(
    argv: list[str], *, studio: bool, path: str | Path, where: str = ""
) -> TrainConfig:
    """The defaults of a run from ``--config FILE`` (or a preset's file): those of the env (its
    id from the flags, else from the file; see :func:`_env_defaults`), with the file's values
    put in."""
    from preflab.config.file import apply_config_data, read_config_file

    where = where or f"--config {path}"
    data = read_config_file(path)
    if studio and data.get("source", "store") != "store":
        raise ConfigError(
            f"--studio means people answer in the browser (source 'store'), but {path} sets "
            f"source = {data['source']!r}; remove that line or drop --studio"
        )
    env_argv = argv
    if not _env_id(argv) and isinstance(data.get("env_id"), str):
        env_argv = [*argv, "--env-id", data["env_id"]]
    base = _env_defaults(env_argv, studio=studio) or TrainConfig()
    return apply_config_data(base, data, where=where)


def _print_config(config: TrainConfig, target: str) -> None:
    """Write ``config`` as TOML to ``target`` ('-': the terminal)."""
    from preflab.config.file import config_to_toml

    text = config_to_toml(config)
    if target == "-":
        print(text, end="")
        return
    Path(target).write_text(text, encoding="utf-8")
    print(f"wrote {target}; run it with `preflab train --config {target}` (flags override it)")


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C while a run trains; ``preflab``'s handler says how to continue the run."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(str(run_dir))
        self.run_dir = run_dir
        """The run directory to resume."""


def _start_notes(loop: Any, run_dir: Path, *, studio: bool) -> None:
    """Say at once how people answer a run they pace (preflab.config.constraints.start_notes)."""
    import logging

    from preflab.config.constraints import start_notes

    for note in start_notes(loop.config, str(run_dir), studio=studio):
        logging.getLogger("preflab").warning("%s", note)
    if studio:
        loop.answer_hint = "people answer at the studio link above"


def _source_other_than_store(argv: list[str]) -> bool:
    """Whether ``argv`` names a --source other than 'store' (people in the studio)."""
    for k, a in enumerate(argv):
        if a == "--source":
            if k + 1 >= len(argv) or argv[k + 1] != "store":
                return True
        elif a.startswith("--source") and a != "--source=store":
            return True
    return False


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, TrainConfig, Path]:
    """``preflab train``'s command line: its own options (--resume, --studio, ...), the run's
    config and its run directory. Refuses bad options with a ConfigError (or tyro's usage
    error); runs nothing and writes nothing, except reading the run directory of --resume."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--run-dir", default="")
    pre.add_argument("--resume", default="")
    pre.add_argument("--studio", action="store_true")
    pre.add_argument("--studio-host", default="127.0.0.1")
    pre.add_argument("--studio-port", type=int, default=8765)
    pre.add_argument("--config", default="")
    pre.add_argument("--preset", default="")
    pre.add_argument("--print-config", nargs="?", const="-", default=None)
    pre.add_argument("--teacher", default="", metavar="bpref-NAME")
    pre.add_argument(train_help.HELP_ALL, action="store_true")
    known, rest = pre.parse_known_args(argv)
    if known.help_all:
        rest = [*rest, "--help"]  # tyro prints every option and exits
    _check_command_options(known, rest)
    if known.studio and _source_other_than_store(rest):
        raise ConfigError(
            "--studio means people answer in the browser (source 'store'); drop --source "
            "(or give --source store)"
        )
    if known.resume:
        run_dir = Path(known.resume)
        config = check_run_dir(run_dir, resuming=True)
        if rest:
            config = tyro.cli(TrainConfig, args=rest, default=config, prog="preflab train --resume")
        config = check_resume_config(run_dir, config)
    else:
        # tyro types the result as Optional when its default may be None; it is a TrainConfig
        base: TrainConfig | None
        if known.preset:
            from preflab.presets import preset_path

            base = _file_defaults(
                rest,
                studio=known.studio,
                path=preset_path(known.preset),
                where=f"--preset {known.preset}",
            )
        elif known.config:
            base = _file_defaults(rest, studio=known.studio, path=known.config)
        else:
            base = _env_defaults(rest, studio=known.studio)
        if known.teacher:  # a B-Pref teacher by name; --teacher.* flags still override it
            base = dataclasses.replace(base or TrainConfig(), teacher=bpref_teacher(known.teacher))
        config = cast(
            TrainConfig,
            tyro.cli(
                TrainConfig,
                args=rest,
                default=base,
                prog="preflab train",
                description=FULL_HELP_DESCRIPTION,
            ),
        )
        if known.studio:
            config = dataclasses.replace(config, source="store")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_dir = check_output_dir(
            known.run_dir
            or f"runs/{config.env_id.replace('/', '_')}-{config.algo}-s{config.seed}-{stamp}",
            what="--run-dir",
        )
    return known, config, run_dir


def main(argv: list[str]) -> int:
    if train_help.wants_help(argv):
        return train_help.main(argv)
    known, config, run_dir = parse_args(argv)
    if known.print_config is not None:  # write the resolved options and stop; nothing runs
        _print_config(config, known.print_config)
        return 0
    if known.studio:  # a busy port fails here, before the run directory is made
        from preflab.studio.launch import check_port_free

        check_port_free(known.studio_host, known.studio_port)
    bar = _Progress(config.total_steps)
    update = bar.update
    if known.resume:
        loop = open_loop(run_dir, config=config, progress=update)
    else:
        loop = start_loop(config, run_dir, progress=update)
    _start_notes(loop, run_dir, studio=known.studio)
    studio = None
    if known.studio:
        from preflab.studio.bootstrap import owner_token
        from preflab.studio.heartbeat import start_trainer_heartbeat
        from preflab.studio.launch import start_studio_process, stop_studio_on_signals

        studio = start_studio_process(
            run_dir, known.studio_host, known.studio_port, store_url=config.store_url or None
        )
        stop_studio_on_signals(studio)  # SIGTERM/SIGHUP of the trainer stop the studio too
        start_trainer_heartbeat(loop.store)  # pages say "trainer stopped" when it is gone
        link = f"http://{known.studio_host}:{known.studio_port}/#token="
        tqdm.write(
            f"studio: {link}{owner_token(loop.store, run_dir)}  (owner link; invite "
            f"annotators with `preflab studio add-annotator NAME {run_dir}`)"
        )
    try:
        bar.start(loop.env_steps)
        with logging_redirect_tqdm():  # log lines go above the bar, not into its line
            summary = loop.run().summary()
    except KeyboardInterrupt:
        raise RunInterrupted(run_dir) from None
    finally:
        if studio is not None:
            studio.terminate()
            studio.wait(timeout=30)
    bar.close()
    summary = _add_ai_usage(loop.source, summary, run_dir)
    summary = _add_routing(loop.source, summary, run_dir)
    print_summary(summary, run_dir)
    return 0


def _add_ai_usage(source: object, summary: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """``summary`` with ``ai_judge`` (requests, tokens, seconds, cost) when the run's source
    asks a metered server (:class:`preflab.sources.base.ReportsUsage`: the LLM and
    vision-language judges), also written to summary.json."""
    if not isinstance(source, ReportsUsage):
        return summary
    out = {**summary, "ai_judge": source.usage_report()}
    path = run_dir / "summary.json"
    if path.is_file():
        import json

        on_disk = json.loads(path.read_text())
        on_disk["ai_judge"] = out["ai_judge"]
        path.write_text(json.dumps(on_disk, indent=2))
    return out


def _add_routing(source: object, summary: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """``summary`` with ``routing`` (labels per answerer, budgets used, the AI's live accuracy
    with its interval) when the run's source routes (``--source route``), also written to
    summary.json."""
    from preflab.sources.routing.router import RoutingSource

    if not isinstance(source, RoutingSource):
        return summary
    out = {**summary, "routing": source.routing_report()}
    path = run_dir / "summary.json"
    if path.is_file():
        import json

        on_disk = json.loads(path.read_text())
        on_disk["routing"] = out["routing"]
        path.write_text(json.dumps(on_disk, indent=2))
    return out


__all__ = ["main"]
