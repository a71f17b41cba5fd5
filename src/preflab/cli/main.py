"""``preflab`` console script: dispatches to subcommand modules with ``main(argv) -> int``."""

from __future__ import annotations

import importlib
import logging
import sys

from preflab.errors import PrefLabError

COMMANDS = {
    "train": (
        "preflab.cli.train",
        "run the preference-learning loop (default: Pendulum-v1, oracle teacher)",
    ),
    "export": (
        "preflab.cli.export",
        "write a run's labels and segments in an open format; read them back",
    ),
    "crowd": (
        "preflab.cli.crowd",
        "aggregate crowd judgements (majority or Spectral Meta-Learner)",
    ),
    "studio": (
        "preflab.cli.studio",
        "serve PrefLab Studio for a run; add-annotator prints personal links",
    ),
    "sweep": (
        "preflab.cli.sweep",
        "run a grid of training runs (labels × seeds × methods) on Ray or one after another",
    ),
    "eval": (
        "preflab.cli.eval",
        "evaluate a run's trained policy: true and learned returns, mean ± std",
    ),
    "record": (
        "preflab.cli.record",
        "write a video (MP4) of a run's trained policy",
    ),
    "bench": (
        "preflab.cli.bench",
        "run a benchmark / paper reproduction; tables go to benchmarks/results/",
    ),
    "label": (
        "preflab.cli.label",
        "a labelling run from your own trajectories (npz, export, Minari) for the studio",
    ),
    "fit": (
        "preflab.cli.fit",
        "fit a labelling run's reward model on the answers (no policy training)",
    ),
    "llm": (
        "preflab.cli.llm",
        "serve-local: a small real model as the judge; serve-fake: a scripted stand-in",
    ),
}

USAGE = (
    "usage: preflab COMMAND [ARGS]  (preflab COMMAND --help for its options)\n\ncommands:\n"
    + "\n".join(f"  {name:<8} {text}" for name, (_mod, text) in COMMANDS.items())
)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        from preflab import __version__

        print(__version__)
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"preflab: unknown command {name!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    if name in LIGHT_HELP and LIGHT_HELP[name][0](rest):  # help without torch: fast
        return LIGHT_HELP[name][1](rest)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from preflab.env_families import headless_gl

    headless_gl()  # MuJoCo fixes its GL backend when first imported; render without a display
    quiet_third_party_loggers()
    try:
        module = importlib.import_module(COMMANDS[name][0])
        return int(module.main(rest) or 0)
    except PrefLabError as exc:
        print(f"preflab {name}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except (OSError, UnicodeError) as exc:  # files: missing, unreadable, not text
        print(f"preflab {name}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except ValueError as exc:  # formats: JSON, TOML, CSV, numbers
        print(f"preflab {name}: error: invalid input: {_one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:
        if _is_database_error(exc):
            print(f"preflab {name}: error: database: {_one_line(exc)}", file=sys.stderr)
            return 1
        raise
    except KeyboardInterrupt as exc:
        run_dir = getattr(exc, "run_dir", None)  # set by a run (cli.train.RunInterrupted)
        how = f"; continue with: preflab train --resume {run_dir}" if run_dir else ""
        print(
            f"preflab {name}: interrupted; everything already stored is kept{how}",
            file=sys.stderr,
        )
        return 130


# ----- fast help and quiet libraries -----------------------------------------------------------


def _train_wants_help(rest: list[str]) -> bool:
    from preflab.cli.train_help import wants_help

    return wants_help(rest)


def _train_help(rest: list[str]) -> int:
    from preflab.cli.train_help import main as help_main

    return help_main(rest)


LIGHT_HELP = {"train": (_train_wants_help, _train_help)}
"""Commands whose ``--help`` is answered without importing the command (and torch)."""

NOISY_LOGGERS = (
    "httpx",
    "httpcore",
    "urllib3",
    "openai",
    "matplotlib",
    "PIL",
    "multipart",
    "absl",  # dm_control: its GL backend and MuJoCo version at import
    "OpenGL",  # PyOpenGL: "No OpenGL_accelerate module loaded"
)
"""Third-party loggers that log every request or file at INFO; the CLI shows their warnings only."""


def quiet_third_party_loggers() -> None:
    """Show only warnings and errors of :data:`NOISY_LOGGERS` (one INFO line per LLM request
    would drown the progress bar)."""
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def _one_line(exc: BaseException) -> str:
    """The message on one line, without passwords in URLs."""
    import re

    text = " ".join(str(exc).split()) or type(exc).__name__
    text = re.sub(r"(://[^:/@\s]*):[^@\s]*@", r"\1:***@", text)
    return text if len(text) <= 800 else text[:797] + "..."


def _is_database_error(exc: BaseException) -> bool:
    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:
        return False
    return isinstance(exc, SQLAlchemyError)


if __name__ == "__main__":
    raise SystemExit(main())
