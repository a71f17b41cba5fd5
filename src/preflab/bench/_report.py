"""What only benchmarks write: the results directory, a header with the ``preflab bench``
command that made the table, and writing a result file while echoing it to the terminal.

The numbers and their wording (means ± CIs, paired differences, verdicts, markdown tables,
JSON-lines run logs) are in :mod:`preflab.reporting`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path("benchmarks") / "results"
"""Where benchmark outputs go by default: ``benchmarks/results`` under the current directory
(the checkout's own when run from its top; any folder when PrefLab is installed as a package).
Every benchmark takes ``--out``."""


def command(bench: str, argv: Sequence[str] | None) -> str:
    """The command line that reproduces a result: ``preflab bench NAME ARGS``."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["preflab", "bench", bench.removeprefix("preflab.bench."), *args])


def header(title: str, bench: str, argv: Sequence[str] | None, budgets: str) -> str:
    """Markdown title plus the exact command, the date and the budgets."""
    return (
        f"# {title}\n\n"
        f"Command: `{command(bench, argv)}`  \n"
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}  \n"
        f"Budgets: {budgets}\n\n"
    )


def write_report(md: str, out: Path) -> None:
    """Write a result file (creating its folder) and echo it to the terminal."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    sys.stdout.write(md)
