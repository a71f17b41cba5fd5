"""``preflab train --help``: the options a newcomer needs, one line each, printed fast.

The descriptions are the first sentences of the config fields' docstrings, read from source
(:mod:`preflab.fielddocs`) so help imports neither torch nor the config modules; ``--help-all``
is tyro's full list of every option.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

from preflab.fielddocs import class_docs, module_literal

PACKAGE = Path(__file__).resolve().parents[1]

HELP_FLAGS = ("-h", "--help")
HELP_ALL = "--help-all"

RUN_OPTIONS: tuple[tuple[str, str], ...] = (
    ("--run-dir DIR", "Where the run is written (default runs/<env>-<algo>-s<seed>-<time>)."),
    ("--resume DIR", "Continue a stopped run from its directory (its config.json)."),
    ("--config FILE.toml", "Read options from a TOML file; flags given as well override it."),
    (
        "--print-config [FILE]",
        "Write the resolved options as TOML (to FILE, else the terminal) and exit.",
    ),
    (
        "--teacher bpref-NAME",
        "One of B-Pref's simulated teachers: oracle, stoc, mistake, skip, equal, myopic.",
    ),
    ("--studio", "People answer in the browser while it trains (see STUDIO below)."),
    ("--studio-host HOST", "Address the studio listens on (default 127.0.0.1)."),
    ("--studio-port PORT", "Port the studio listens on (default 8765)."),
)
"""Options of the command itself (not fields of the run's config)."""

CONFIG_OPTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "task and budgets",
        (
            "env_id",
            "algo",
            "backend",
            "total_steps",
            "total_labels",
            "seed",
            "n_envs",
            "segment_length",
        ),
    ),
    ("who answers", ("source", "teacher.beta", "teacher.epsilon", "llm.base_url", "llm.model")),
)
"""The config fields a newcomer needs, by section (``sub.field`` for a sub-config's field)."""

SUB_CONFIGS = {
    "teacher": ("sources/teacher.py", "TeacherConfig"),
    "llm": ("config/__init__.py", "LLMSourceConfig"),
}
"""Where the sub-configs named in :data:`CONFIG_OPTIONS` are defined (file under preflab/)."""

LITERALS = {"Algo": ("policy/algos.py", "Algo"), "Backend": ("policy/algos.py", "Backend")}
"""Literal aliases defined outside preflab/config/__init__.py (module file, alias name)."""


def wants_help(argv: list[str]) -> bool:
    """Whether ``argv`` asks for the short help (``-h``/``--help``, and not ``--help-all``)."""
    return any(a in HELP_FLAGS for a in argv) and HELP_ALL not in argv


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _choices(annotation: str) -> tuple[str, ...]:
    if annotation.startswith("Literal["):
        return module_literal_from_text(annotation)
    path, alias = LITERALS.get(annotation, ("config/__init__.py", annotation))
    return module_literal(PACKAGE / path, alias)


def module_literal_from_text(annotation: str) -> tuple[str, ...]:
    import ast

    node = ast.parse(annotation, mode="eval").body
    if not isinstance(node, ast.Subscript):
        return ()
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return tuple(str(e.value) for e in items if isinstance(e, ast.Constant))


def _metavar(annotation: str, name: str) -> str:
    choices = _choices(annotation)
    if choices:
        return "{" + ",".join(choices) + "}"
    if annotation.startswith("int"):
        return "N"
    if annotation.startswith("float"):
        return "X"
    return name.rsplit(".", 1)[-1].split("_")[-1].upper()


def _default(text: str) -> str:
    text = text.strip("'\"").replace("math.inf", "inf")
    if text.isdigit() and len(text) > 4:
        text = f"{int(text):,}"
    return text


def config_rows() -> list[tuple[str, list[tuple[str, str]]]]:
    """(section, [(flag and metavar, description (default))]) for :data:`CONFIG_OPTIONS`."""
    top = class_docs(PACKAGE / "config" / "__init__.py", "TrainConfig")
    sections = []
    for title, names in CONFIG_OPTIONS:
        rows = []
        for name in names:
            if "." in name:
                sub, field = name.split(".", 1)
                path, cls = SUB_CONFIGS[sub]
                doc = class_docs(PACKAGE / path, cls)[field]
            else:
                doc = top[name]
            summary = doc.summary
            if doc.default:
                shown = _default(doc.default)
                summary = f"{summary.rstrip('.')} (default {shown or repr('')})."
            rows.append((f"{_flag(name)} {_metavar(doc.annotation, name)}", summary))
        sections.append((title, rows))
    return sections


FLAG_WIDTH = 24
"""Column where descriptions start; a longer flag has its description on the next line."""


def _option_lines(flag: str, desc: str) -> list[str]:
    width = max(60, min(100, shutil.get_terminal_size((100, 24)).columns))
    indent = " " * (FLAG_WIDTH + 2)
    lines = textwrap.wrap(desc, width=width, initial_indent=indent, subsequent_indent=indent)
    head = f"  {flag}"
    if len(head) < FLAG_WIDTH + 2:
        return [head.ljust(FLAG_WIDTH + 2) + lines[0].lstrip(), *lines[1:]]
    return [head, *lines]


def short_help() -> str:
    """The text of ``preflab train --help``."""
    sections: list[tuple[str, list[tuple[str, str]]]] = [("run", list(RUN_OPTIONS))]
    sections += config_rows()
    lines = [
        "usage: preflab train [OPTIONS]",
        "",
        "Learn a reward from preference feedback and train a policy on it. With no options:",
        "Pendulum-v1, SAC, 20,000 env steps, 100 labels from a simulated perfect teacher.",
    ]
    for title, rows in sections:
        lines += ["", f"{title}:"]
        for flag, desc in rows:
            lines += _option_lines(flag, desc)
    lines += [""]
    lines += _option_lines("-h, --help", "Show this help and exit.")
    lines += _option_lines(
        HELP_ALL, "Show every option (reward model, fitting, schedule, crowd, ...) and exit."
    )
    lines += [
        "",
        "STUDIO: --studio sets --source store and defaults for a 20-40 minute session of about",
        "1 s clips (200 labels for MuJoCo and Atari, 150 for other envs); Atari ids (ALE/...)",
        "have defaults of their own too. See the options a run would use, without running it:",
        "  preflab train --studio --env-id HalfCheetah-v5 --print-config",
        "",
        "examples:",
        "  preflab train --total-labels 50 --seed 1",
        "  preflab train --print-config my_run.toml   # edit it, then:",
        "  preflab train --config my_run.toml --run-dir runs/mine",
        "  preflab train --resume runs/mine",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Print the short help (``argv`` is the train command's arguments)."""
    del argv
    sys.stdout.write(short_help() + "\n")
    return 0


__all__ = ["HELP_ALL", "main", "short_help", "wants_help"]
