"""The site's CLI reference, generated at build time (docs/hooks.py) from the parsers themselves:
each command's ``--help`` text as ``preflab`` prints it, so the page cannot drift from the code.
"""

from __future__ import annotations

import contextlib
import io
import os

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("train", "--help-all"),
    ("eval", "--help"),
    ("record", "--help"),
    ("export", "--help"),
    ("label", "--help"),
    ("fit", "--help"),
    ("studio", "--help"),
    ("studio", "add-annotator", "--help"),
    ("studio", "task", "--help"),
    ("crowd", "aggregate", "--help"),
    ("sweep", "--help"),
    ("llm", "serve-fake", "--help"),
    ("llm", "serve-local", "--help"),
    ("bench", "--help"),
)
"""Every command and sub-command of ``preflab`` (a test checks this covers cli.main.COMMANDS)."""


def help_text(argv: tuple[str, ...]) -> str:
    """What ``preflab ARGV`` prints (argparse exits after printing help)."""
    from preflab.cli.main import main

    buf = io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # the same line width on every machine
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                rc = main(list(argv))
            except SystemExit as exc:
                rc = int(exc.code or 0)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    if rc != 0:
        raise RuntimeError(f"preflab {' '.join(argv)} exited {rc}: {buf.getvalue()[-500:]}")
    return buf.getvalue().rstrip()


def page() -> str:
    from preflab.cli.main import USAGE

    out = [
        "# CLI reference",
        "",
        "Generated from the parsers when the site is built (`docs/gen_cli.py`): each section "
        "is what `preflab COMMAND --help` prints. `preflab train --help` shows the options most "
        "runs need; below is `--help-all`, every option.",
        "",
        "```text",
        USAGE,
        "```",
        "",
    ]
    for argv in COMMANDS:
        words = " ".join(w for w in argv if not w.startswith("--help"))
        out += [f"## preflab {words}", "", "```text", help_text(argv), "```", ""]
    return "\n".join(out)
