"""The README's claims that name a file or a setting hold against what they name.

- the modules it calls mypy-strict are the strict override list of ``pyproject.toml``;
- every row of its verdict table names plan entries that exist in ``benchmarks/plan.toml`` and
  result files that exist in ``benchmarks/results/``; a row with no plan entry says
  "exploratory" and claims no verdict; a "met" names an entry;
- every result file it names (``benchmarks/results/X``, or a bare ``X.md`` in its section
  "Reproducing the papers") and every ``docs/`` page it links exists.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from preflab_bench._plan import load_plan

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
RESULTS = ROOT / "benchmarks" / "results"
VERDICT_HEADER = "| result | plan entry | verdict under the protocol |"


def _strict_modules() -> set[str]:
    """Short names of the modules in pyproject's strict override (``preflab.kinds.*`` →
    ``kinds``)."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (strict,) = [
        o for o in cfg["tool"]["mypy"]["overrides"] if o.get("disallow_untyped_defs") is True
    ]
    return {m.removeprefix("preflab.").removesuffix(".*") for m in strict["module"]}


def test_the_strict_modules_the_readme_names_are_pyprojects() -> None:
    m = re.search(r"\(strict on\s+([^:]+):", README)
    assert m, "README.md no longer says which modules mypy checks strictly"
    named = {w.strip() for w in re.split(r",|\band\b", " ".join(m.group(1).split())) if w.strip()}
    assert named == _strict_modules()


def _verdict_rows() -> list[list[str]]:
    lines = README.splitlines()
    start = lines.index(VERDICT_HEADER)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_every_verdict_row_names_entries_and_files_that_exist() -> None:
    ids = set(load_plan(ROOT / "benchmarks" / "plan.toml").ids())
    rows = _verdict_rows()
    assert len(rows) >= 10
    for result, entry, verdict in (r[:3] for r in rows):
        named = set(re.findall(r"`([a-z0-9][a-z0-9-]+)`", entry))
        assert named <= ids, f"{result[:50]}: no plan entry {sorted(named - ids)}"
        for f in re.findall(r"`([A-Za-z0-9_.-]+\.md)`", verdict):
            assert (RESULTS / f).is_file(), f"{result[:50]}: no benchmarks/results/{f}"
        if not named:
            assert verdict.startswith("exploratory"), f"{result[:50]}: no entry, yet a verdict"
        if "**met**" in verdict or verdict.startswith("met"):
            assert named, f"{result[:50]}: 'met' without a plan entry"


def test_every_result_file_and_docs_page_the_readme_names_exists() -> None:
    for path in re.findall(r"benchmarks/results/([A-Za-z0-9_./-]+\.(?:md|jsonl))", README):
        assert (RESULTS / path).is_file(), f"README names benchmarks/results/{path}"
    papers = README.split("\n## Reproducing the papers\n", 1)[1].split("\n## ", 1)[0]
    for name in set(re.findall(r"`([a-z0-9_]+\.md)`", papers)):  # bare names: result files
        assert (RESULTS / name).is_file(), f"README names {name}, not in benchmarks/results"
    for page in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / page).exists(), f"README links {page}"
