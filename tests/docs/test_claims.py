"""The claims of the README and of the site's pages (docs/**/*.md) that name a file or a setting
hold against what they name.

- the modules the docs call mypy-strict are the strict override list of ``pyproject.toml``;
- every row of the verdict table (docs/concepts/reporting.md) names plan entries that exist in
  ``benchmarks/plan.toml`` and result files that exist in ``benchmarks/results/``; a row with no
  plan entry says "exploratory" and claims no verdict; a "met" names an entry; a void entry
  is void in ``benchmarks/plan_voids.toml``;
- every interval a verdict row or the README's "Results in brief" quotes (``0.949 [0.719,
  1.315]``) is written in a result file that row names;
- every result file a page's prose names (``benchmarks/results/X``, or a bare ``X.md`` in
  backticks; code blocks may name the files their commands will write) and every ``docs/`` page
  the README links exists.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from preflab_bench._plan import load_plan

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {
    p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
    for p in sorted((ROOT / "docs").rglob("*.md"))
}
ALL = {"README.md": README, **PAGES}
REPORTING = PAGES["docs/concepts/reporting.md"]
VERDICT_HEADER = "| result | plan entry | verdict under the protocol |"
NOT_RESULTS = {"README.md", "results.md"}
"""Bare ``X.md`` names in backticks that are not result files (an export's dataset card, a
sweep's table)."""
INTERVAL = re.compile(r"([-−]?\d[\d.]*) \[([-−]?\d[\d.]*), ([-−]?\d[\d.]*)\]")


def _strict_modules() -> set[str]:
    """Short names of the modules in pyproject's strict override (``preflab.kinds.*`` →
    ``kinds``)."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (strict,) = [
        o for o in cfg["tool"]["mypy"]["overrides"] if o.get("disallow_untyped_defs") is True
    ]
    return {m.removeprefix("preflab.").removesuffix(".*") for m in strict["module"]}


def test_the_strict_modules_the_docs_name_are_pyprojects() -> None:
    found = 0
    for name, text in ALL.items():
        for m in re.finditer(r"\(strict on\s+([^:]+):", text):
            named = {
                w.strip() for w in re.split(r",|\band\b", " ".join(m.group(1).split())) if w.strip()
            }
            assert named == _strict_modules(), f"{name} names other strict modules"
            found += 1
    assert found, "no page says which modules mypy checks strictly (docs/concepts/development.md)"


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of the Markdown table under ``header`` in ``text``, row by row."""
    lines = text.splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _verdict_rows() -> list[list[str]]:
    return table_rows(REPORTING, VERDICT_HEADER)


def _numbers(m: re.Match[str]) -> tuple[str, ...]:
    return tuple(g.replace("−", "-").rstrip(".") for g in m.groups())


def _rounds_to(written: str, quoted: str) -> bool:
    """``written`` (a file's number) rounds to ``quoted`` at ``quoted``'s precision."""
    decimals = len(quoted.partition(".")[2])
    return abs(float(written) - float(quoted)) <= 0.5 * 10**-decimals + 1e-9


def _intervals_hold(text: str, files: list[str], where: str) -> None:
    """Every interval quoted in ``text`` (``0.56 [0.25, 0.88]``) is one that one of ``files``
    writes, to the digits quoted (``0.5608 [0.2456, 0.8816]``)."""
    written = [
        _numbers(m)
        for f in files
        for m in INTERVAL.finditer((RESULTS / f).read_text(encoding="utf-8").replace("**", ""))
    ]
    for m in INTERVAL.finditer(text.replace("**", "")):
        quoted = _numbers(m)
        assert any(
            all(_rounds_to(w, q) for w, q in zip(ws, quoted, strict=True)) for ws in written
        ), f"{where}: {m.group(0)} is in none of {files}"


def test_every_verdict_row_names_entries_and_files_that_exist() -> None:
    plan = load_plan(ROOT / "benchmarks" / "plan.toml")
    ids = set(plan.ids())
    voids = tomllib.loads((ROOT / "benchmarks" / "plan_voids.toml").read_text())["void"]
    rows = _verdict_rows()
    assert len(rows) >= 10
    for result, entry, verdict in (r[:3] for r in rows):
        named = set(re.findall(r"`([a-z0-9][a-z0-9-]+)`", entry))
        assert named <= ids, f"{result[:50]}: no plan entry {sorted(named - ids)}"
        files = re.findall(r"`([A-Za-z0-9_.-]+\.md)`", verdict)
        for f in files:
            assert (RESULTS / f).is_file(), f"{result[:50]}: no benchmarks/results/{f}"
        if not named:
            assert verdict.startswith("exploratory"), f"{result[:50]}: no entry, yet a verdict"
        if "**met**" in verdict or verdict.startswith("met"):
            assert named, f"{result[:50]}: 'met' without a plan entry"
        for e in named:
            if f"`{e}` (void)" in entry:
                assert e in voids, f"{result[:50]}: {e} is called void, plan_voids.toml disagrees"
        _intervals_hold(verdict, files, result[:50])


def test_the_readmes_results_in_brief_quote_their_files() -> None:
    brief = README.split("\n## Results in brief\n", 1)[1].split("\n## ", 1)[0]
    bullets = [b for b in brief.split("\n- ")[1:]]
    assert bullets, "README.md's Results in brief lists no result"
    for b in bullets:
        files = re.findall(r"`([a-z0-9_]+\.md)`", b)
        assert files, f"README result without its file: {b[:60]}"
        _intervals_hold(b, files, b[:50])


def _prose(text: str) -> str:
    """A page without its fenced code blocks: there a command may name the file it will write
    (``--out benchmarks/results/x.md``); a claim is in the prose."""
    return re.sub(r"^( *)```.*?^\1```", "", text, flags=re.S | re.M)


def test_every_result_file_and_docs_page_named_exists() -> None:
    assert "device_check_gpu" not in _prose("a\n```bash\nrun  # writes device_check_gpu.md\n```\n")
    for name, page in ALL.items():
        text = _prose(page)
        for path in re.findall(r"benchmarks/results/([A-Za-z0-9_./-]+\.(?:md|jsonl))", text):
            assert (RESULTS / path).is_file(), f"{name} names benchmarks/results/{path}"
        for bare in set(re.findall(r"`([a-z0-9_]+\.md)`", text)) - NOT_RESULTS:
            assert (RESULTS / bare).is_file(), f"{name} names {bare}, not in benchmarks/results"
    for page in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / page).exists(), f"README links {page}"


def test_every_verdict_is_of_an_entry_registered_before_its_runs() -> None:
    """Issue 63: a verdict (met, missed, not shown) of the verdict table or of the claims page
    rests on entries that the record shows were committed before their first run
    (``preflab_bench._registration``); the others read "exploratory"."""
    import sys

    from preflab_bench._registration import registration

    sys.path.insert(0, str(ROOT / "docs"))
    import gen_claims

    plan = load_plan(ROOT / "benchmarks" / "plan.toml")
    by = gen_claims.rows_by_entry()
    claims = PAGES["docs/concepts/claims.md"]
    table = [r[:3] for r in _verdict_rows()] + [
        [r[0], r[3], r[5]]
        for r in (
            [c.strip() for c in line.strip().strip("|").split("|")]
            for line in claims.splitlines()
            if line.startswith("| 00")
        )
    ]
    checked = 0
    for result, entry, verdict in table:
        if not re.search(r"\*\*(met|missed|not shown)\*\*|^(met|missed|not shown)\b", verdict):
            continue
        for e in re.findall(r"`([a-z0-9][a-z0-9-]+)`", entry):
            if plan.entry(e).void:
                continue
            got = by.get(e)
            reg = registration(
                plan.entry(e),
                got.rows if got else [],
                plan_file=gen_claims.PLAN,
                logs=sorted(got.logs) if got else (),
                queue=gen_claims.QUEUE,
            )
            assert reg.status == "pre-registered", f"{result[:50]}: {e} is {reg.wording()}"
            checked += 1
    assert checked >= 10
