"""Markdown helpers for the llm_* benchmarks: a header with command, date and budgets; tables."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
"""Where benchmark outputs go (the repository's benchmarks/results)."""


def header(title: str, module: str, argv: list[str] | None, budgets: str) -> str:
    """Markdown title plus the exact command, the date and the budgets."""
    args = sys.argv[1:] if argv is None else argv
    return (
        f"# {title}\n\n"
        f"Command: `nice -n 10 python -m {module} {' '.join(args)}`  \n"
        f"Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}  \n"
        f"Budgets: {budgets}\n\n"
    )


def md_table(head: list[str], rows: list[list[object]]) -> str:
    """A markdown table; floats with 3 decimals."""

    def fmt(x: object) -> str:
        return f"{x:.3f}" if isinstance(x, float) else str(x)

    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(fmt(x) for x in r) + " |" for r in rows]
    return "\n".join(out) + "\n"
