"""What every benchmark writes: the results directory, a header with the command that made the
table, markdown tables, and mean ± 95% confidence intervals."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from scipy import stats

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
"""Where benchmark outputs go (the repository's benchmarks/results)."""


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


def md_table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table; floats with 4 significant digits."""

    def fmt(x: object) -> str:
        return f"{x:.4g}" if isinstance(x, float) else str(x)

    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(fmt(x) for x in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Mean and the half-width of its Student-t confidence interval (nan with one value)."""
    x = np.asarray(values, float)
    if x.size < 2:
        return (float(x.mean()) if x.size else math.nan), math.nan
    half = stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return float(x.mean()), float(half)


def ci_side(values: Sequence[float]) -> int | None:
    """Where the 95% CI of the mean of paired differences lies: +1 above 0, −1 below 0, 0 when
    it spans 0; None with fewer than two values (no CI)."""
    m, h = mean_ci(values)
    if not math.isfinite(h):
        return None
    return 1 if m - h > 0 else (-1 if m + h < 0 else 0)


def fmt_ci(values: Sequence[float]) -> str:
    """'mean ± half-width (n=k)' for a table cell."""
    m, h = mean_ci(values)
    return f"{m:.3g} ± {h:.2g} (n={len(values)})" if math.isfinite(h) else f"{m:.3g} (n=1)"


def invocations(rows: Sequence[dict]) -> str:
    """'Invocations that recorded these runs:' and one line per distinct ``command`` in
    ``rows`` (records appended by several invocations); empty when none has one."""
    commands = sorted({r["command"] for r in rows if r.get("command")})
    if not commands:
        return ""
    return "Invocations that recorded these runs:\n\n" + "".join(f"- `{c}`\n" for c in commands)


def write_report(md: str, out: Path) -> None:
    """Write a result file (creating its folder) and echo it to the terminal."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    sys.stdout.write(md)
