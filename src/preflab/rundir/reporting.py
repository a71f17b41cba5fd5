"""Numbers a result file states, and the files runs are recorded in: means with Student-t
confidence intervals, paired differences, how a CI is written, markdown tables, verdict
wording, and JSON-lines run logs.

One module for every benchmark, the sweep report and any library code that reports results;
it imports nothing of PrefLab but its errors, so any layer may use it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np

from preflab.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

K = TypeVar("K", bound="SupportsRichComparison")
"""A key that pairs values (a seed, a run name): hashable and ordered."""


# ----- statistics ------------------------------------------------------------------------------
def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Mean and the half-width of its Student-t confidence interval at ``level`` (half-width
    nan with fewer than two values; both nan with none)."""
    x = np.asarray(values, float)
    if x.size < 2:
        return (float(x.mean()) if x.size else math.nan), math.nan
    from scipy import stats  # loaded on first use: scipy.stats takes about a second

    half = stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return float(x.mean()), float(half)


def paired_differences(a: Mapping[K, float], b: Mapping[K, float]) -> list[float]:
    """``a[k] − b[k]`` for every key both have (e.g. seeds both arms ran), in key order."""
    return [float(a[k]) - float(b[k]) for k in sorted(a.keys() & b.keys())]


def ci_side(values: Sequence[float], target: float = 0.0) -> int | None:
    """Where the 95% CI of the mean lies against ``target``: +1 above, −1 below, 0 when it
    spans it; None with fewer than two values (no CI)."""
    m, h = mean_ci(values)
    if not math.isfinite(h):
        return None
    return 1 if m - h > target else (-1 if m + h < target else 0)


# ----- wording ---------------------------------------------------------------------------------
def fmt_ci(
    values: Sequence[float],
    digits: int | None = None,
    *,
    n: Literal["always", "single", "never"] = "always",
    empty: str | None = None,
) -> str:
    """'mean ± half-width' of the 95% CI for a table cell.

    ``digits`` None writes 3 significant digits of the mean and 2 of the half-width, else
    that many decimals of both. With fewer than two values only the mean is written. ``n``
    says when ' (n=k)' follows: always, only when there is a single value, or never.
    ``empty`` is the cell for no values (default: the nan mean).
    """
    if not values and empty is not None:
        return empty
    m, h = mean_ci(values)
    if digits is None:
        text = f"{m:.3g} ± {h:.2g}" if math.isfinite(h) else f"{m:.3g}"
    else:
        text = f"{m:.{digits}f} ± {h:.{digits}f}" if math.isfinite(h) else f"{m:.{digits}f}"
    if n == "always" or (n == "single" and len(values) == 1):
        text += f" (n={len(values)})"
    return text


def verdict(
    values: Sequence[float],
    *,
    above: str,
    below: str,
    spans: str = "not shown (CI spans 0)",
    few: str = "n < 2",
    target: float = 0.0,
) -> str:
    """The words for where the 95% CI of the mean lies against ``target`` (see
    :func:`ci_side`): ``above``, ``below``, ``spans``, or ``few`` without a CI."""
    side = ci_side(values, target)
    if side is None:
        return few
    return above if side > 0 else below if side < 0 else spans


def target_verdict(
    values: Sequence[float], target: float, *, at_most: bool, target_name: str = "it"
) -> str:
    """'met' or 'missed' for a target the mean should reach (``at_most``: mean ≤ target, else
    mean ≥ target), decided by the point estimate; when the 95% CI spans the target, 'point
    estimate meets/misses it; CI spans {target_name}'."""
    m, h = mean_ci(values)
    good = m <= target if at_most else m >= target
    if math.isfinite(h) and m - h < target < m + h:
        return f"point estimate {'meets' if good else 'misses'} it; CI spans {target_name}"
    return "met" if good else "missed"


def md_table(
    head: Sequence[str], rows: Sequence[Sequence[object]], *, empty: str | None = None
) -> str:
    """A markdown table; floats with 4 significant digits. ``empty``: the text instead of a
    table without rows (default: the table's head alone)."""
    if not rows and empty is not None:
        return empty

    def fmt(x: object) -> str:
        return f"{x:.4g}" if isinstance(x, float) else str(x)

    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    out += ["| " + " | ".join(fmt(x) for x in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def invocations(rows: Sequence[Mapping[str, Any]]) -> str:
    """'Invocations that recorded these runs:' and one line per distinct ``command`` in
    ``rows`` (records appended by several invocations); empty when none has one."""
    commands = sorted({r["command"] for r in rows if r.get("command")})
    if not commands:
        return ""
    return "Invocations that recorded these runs:\n\n" + "".join(f"- `{c}`\n" for c in commands)


# ----- JSON-lines run logs ---------------------------------------------------------------------
def append_jsonl(
    path: Path, record: Mapping[str, Any], *, default: Callable[[Any], Any] | None = None
) -> None:
    """Append one record as one JSON line (creating the folder); ``default`` converts values
    json cannot write (e.g. ``float`` for numpy numbers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(record, default=default) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every record of a JSON-lines file, in order (blank lines skipped); a line that is not
    JSON raises :class:`ConfigError` naming it."""
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ConfigError(
                f"{path}:{n} is not a JSON line ({e}); remove or repair the line"
            ) from e
    return rows
