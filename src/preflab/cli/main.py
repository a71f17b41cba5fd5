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
    "bench": (
        "preflab.cli.bench",
        "run a benchmark / paper reproduction; tables go to benchmarks/results/",
    ),
    "llm": (
        "preflab.cli.llm",
        "serve-fake: a stand-in judge server (scripted answers) for --source llm",
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
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
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
    except KeyboardInterrupt:
        print(f"preflab {name}: interrupted; everything already stored is kept", file=sys.stderr)
        return 130


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
