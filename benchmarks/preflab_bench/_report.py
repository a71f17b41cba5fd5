"""What only benchmarks write: the results directory, a header with the ``preflab bench``
command that made the table, and writing a result file while echoing it to the terminal.

The numbers and their wording (means ± CIs, paired differences, verdicts, markdown tables,
JSON-lines run logs) are in :mod:`preflab.rundir.reporting`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path("benchmarks") / "results"
"""Where benchmark outputs go by default: ``benchmarks/results`` under the current directory
(the checkout's own when run from its top; any folder when PrefLab is installed as a package).
Every benchmark takes ``--out``."""


def command(bench: str, argv: Sequence[str] | None) -> str:
    """The command line that reproduces a result: ``preflab bench NAME ARGS``."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["preflab", "bench", bench.removeprefix("preflab_bench."), *args])


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


def log_and_report(
    args: Any,
    *,
    bench: str,
    title: str,
    budgets: str,
    runs: Callable[[], Iterable[dict[str, Any]]],
    report: Callable[[list[dict[str, Any]], Path], str],
) -> int:
    """The body of a benchmark under the protocol: stop before any run if ``args.plan`` names
    no plan entry or ``args.run_root`` (where the runs go) cannot be a folder; unless
    ``args.report``, append every row ``runs()`` yields to ``args.jsonl`` as it comes; then
    rebuild ``args.out`` from all of the log's rows of ``bench``."""
    from preflab.rundir.folders import check_output_dir
    from preflab.rundir.reporting import append_jsonl, read_jsonl
    from preflab_bench._plan import load_plan

    if args.plan:
        load_plan(args.plan_file).entry(args.plan)  # an unknown entry stops before any run
    if not args.report and getattr(args, "run_root", None) is not None:
        check_output_dir(args.run_root, what="--run-root")
    if not args.report:
        for row in runs():
            append_jsonl(args.jsonl, row, default=float)
    found = read_jsonl(args.jsonl) if args.jsonl.exists() else []
    rows = [r for r in found if r.get("bench") == bench]
    write_report(header(title, bench, args.argv, budgets) + report(rows, args.plan_file), args.out)
    return 0


def in_log(args: Any, bench: str, env: str, arm: str, seed: int, **key: Any) -> bool:
    """Whether ``args.jsonl`` holds the row of this run: the same command (``args.argv``), env,
    arm and seed, and the same ``key`` fields (e.g. a label budget)."""
    from preflab.rundir.reporting import read_jsonl

    if not args.jsonl.exists():
        return False
    want = {"command": command(bench, args.argv), "env": env, "arm": arm, "seed": seed, **key}
    return any(all(r.get(k) == v for k, v in want.items()) for r in read_jsonl(args.jsonl))


def log_row(bench: str, args: Any, env: str, arm: str, seed: int, **fields: Any) -> dict[str, Any]:
    """A run-log row: the bench, its plan entry (``args.plan``), the command that ran it, env,
    arm, seed and the time (UTC), then ``fields``."""
    return {
        "bench": bench,
        "plan": args.plan or None,
        "command": command(bench, args.argv),
        "env": env,
        "arm": arm,
        "seed": seed,
        "time": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        **fields,
    }
