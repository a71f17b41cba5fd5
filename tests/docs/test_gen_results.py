"""docs/gen_results.py: a plan entry whose result files state no verdict says on the Results pages
where it stands (void, withdrawn, superseded, queued with its runs done, or neither run nor
queued), each case from a small plan of its own."""

from __future__ import annotations

import dataclasses
import sys
import tomllib
from pathlib import Path

from preflab_bench._plan import parse_plan, with_voids
from tests.bench.test_plan import entry

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs"))

import gen_claims  # noqa: E402
import gen_results  # noqa: E402

PLAN = (
    entry("void-one")
    + entry("gone", note='"WITHDRAWN on 2026-11-29: its code did not do what it registers"')
    + entry("old")
    + entry("new", budget='{ labels = 1000, note = "Replaces old, which was never run" }')
    + entry("half")
    + entry("half-stop", note="\"Takes the place of half's PEBBLE arm, which never ran\"")
    + entry("waiting")
    + entry("late")
    + entry("idle")
    + entry("stalled")
    + entry("read")
)  # fmt: skip
"""Every entry: walker, 3 seeds x 2 arms = 6 planned runs, committed 2026-11-28."""
VOIDS = '[void]\n"void-one" = "the teacher answered with the wrong segments"\n'


def _rows(
    entry_id: str, n: int, time: str = "2026-12-01T10:00:00+00:00", started: bool = False
) -> gen_claims.Rows:
    """``n`` rows ended at ``time``; ``started``: each with the recorded start of its run (a
    row's time less its ``wall_s`` is only its latest start)."""
    start = {"invocation": time[:10].replace("-", "") + "T095900"} if started else {}
    return gen_claims.Rows(
        rows=[
            {"plan": entry_id, "seed": 10 + i, "time": time, "wall_s": 60.0, **start}
            for i in range(n)
        ]
    )


def _ledger() -> gen_results.Ledger:
    rows = {
        "half": _rows("half", 3),
        "waiting": _rows("waiting", 2, started=True),  # began after the entry's day: registered
        "late": _rows("late", 1, time="2026-11-20T10:00:00+00:00"),  # before it: after its runs
        "stalled": _rows("stalled", 4),
    }
    plan = with_voids(parse_plan(PLAN), VOIDS)
    return gen_results.Ledger(plan, rows, frozenset({"waiting", "late"}), history=False)


def test_an_entry_without_verdict_says_where_it_stands(tmp_path: Path) -> None:
    result = tmp_path / "bpref.md"
    result.write_text("# B-Pref\n\nPlan entry `read`: IQM ratio 0.9; target above 0.5: **met**\n")
    ledger = _ledger()
    cells = {i: gen_results._verdict_word(i, [result], ledger) for i in ledger.plan.ids()}
    assert cells == {
        "void-one": "void",
        "gone": "withdrawn (its plan note)",
        "old": "not run: superseded by `new`",
        "new": "not run, not queued",
        "half": "not read: superseded by `half-stop` (3 of 6 runs done)",
        "half-stop": "not run, not queued",
        "waiting": "registered, in the queue: 2 of 6 runs done",
        "late": "in the queue: 1 of 6 runs done; recorded after its runs: exploratory",
        "idle": "not run, not queued",
        "stalled": "not read: 4 of 6 runs done, not queued",
        "read": "met",
    }
    assert "none in the result files" not in cells.values()


def test_a_stated_verdict_the_record_cannot_order_reads_exploratory(tmp_path: Path) -> None:
    """A result file's verdict of an entry whose rows carry only their end and wall time (no
    recorded start): the Results pages mark it exploratory by the record, as the verdict table
    does; the same verdict with recorded starts after the entry stands."""
    result = tmp_path / "bpref.md"
    result.write_text("Plan entry `read`: target above 0.5: **met**\n")
    ledger = _ledger()
    for rows, cell in (
        (_rows("read", 6), "exploratory by the record (read as a verdict: met)"),
        (_rows("read", 6, started=True), "met"),
    ):
        ledger = gen_results.Ledger(ledger.plan, {**ledger.rows, "read": rows}, ledger.queued)
        ledger = dataclasses.replace(ledger, history=False)
        assert gen_results._verdict_word("read", [result], ledger) == cell


def test_the_bench_page_shows_the_standing_in_its_cell_and_entry_block(tmp_path: Path) -> None:
    ledger = _ledger()
    plan = tomllib.loads(PLAN)["experiment"]
    voids = tomllib.loads(VOIDS)["void"]
    _page, text = gen_results.bench_page(gen_results.Bench("bpref"), plan, voids, ledger)
    assert (
        "| [`old`](#old) | dm_control/walker-walk-v0 | env steps 100000, labels 1000 | not run: superseded "
        in text
    )
    block = text.split("### `waiting`", 1)[1].split("\n### ", 1)[0]
    assert "Where it stands: registered, in the queue: 2 of 6 runs done." in block
    assert "none in the result files" not in text


def test_the_real_pages_have_no_bare_none() -> None:
    pages = gen_results.generate()
    paper = pages["results/paper-bpref.md"]
    assert isinstance(paper, str)
    row = next(line for line in paper.splitlines() if "[`bpref-walker-oracle`]" in line)
    assert row.endswith("| not run: superseded by `bpref-walker-sbx100k` |")
    for text in pages.values():
        assert not isinstance(text, str) or "none in the result files" not in text


def test_a_verdict_word_is_read_inside_one_bold_span(tmp_path: Path) -> None:
    """llm_fig7_uniform_acc60.md's case: a word between one bold span's closing ``**`` and the
    next span's opening one (here a quoted sentence, "not pre-registered") is plain text, not a
    verdict; the cell reads the bold **missed** alone."""
    result = tmp_path / "llm_fig7.md"
    result.write_text(
        "# Restated\n\n## Restated under the protocol\n\n"
        "> **Read once, as registered.** This entry was pre-registered: `read` was committed\n"
        "> before its first run; the tool first wrote\n"
        '> "Recorded after the runs, not pre-registered" here.\n'
        "> IQM(potential) / IQM(default) 0.3 [0.2, 0.7], **missed**.\n"
    )
    ledger = _ledger()
    rows = {**ledger.rows, "read": _rows("read", 6, started=True)}
    ledger = dataclasses.replace(ledger, rows=rows)
    assert gen_results._verdict_word("read", [result], ledger) == "missed"
    assert gen_results.verdict_marks("**a.** not pre-registered, **b**") == []


def test_a_paragraph_in_another_entrys_section_is_not_quoted(tmp_path: Path) -> None:
    """bpref.md's case: a paragraph of the section about `walker-margin` that names
    `walker-sac` (whose SAC runs it reuses) and `walker-equal` (found void) is quoted for
    `walker-margin` only; a paragraph that names an entry outside any entry's section, and a
    section whose heading names several entries, are quoted for each entry they name."""
    result = tmp_path / "bpref.md"
    result.write_text(
        "# B-Pref\n\n"
        "## Reading of `walker-sac` (its one look)\n\n"
        "**Verdict: met.** IQM ratio 0.95 [0.72, 1.3].\n\n"
        "## Reading of `walker-equal`: void\n\n"
        "**No verdict: the entry is void.** Its runs repeat `walker-sac`'s.\n\n"
        "## Reading of `walker-margin` (its one look)\n\n"
        "Registered before its runs, after `walker-equal` was found void; SAC on the true\n"
        "reward reused from `walker-sac`.\n\n"
        "**Verdict: met.** IQM ratio 0.88 [0.53, 1.3].\n\n"
        "## Registration read again: `walker-sac`, `walker-margin` exploratory by the record\n\n"
        "The verdicts above for `walker-sac`, `walker-margin` are exploratory (read as a\n"
        "verdict: met).\n\n"
        "## Notes\n\n"
        "`walker-sac` is void of nothing: its verdict stands.\n"
    )
    quoted = {
        i: [text for _p, text in gen_results.verdict_lines(i, [result])]
        for i in ("walker-sac", "walker-equal", "walker-margin")
    }
    assert quoted == {
        "walker-sac": [
            "**Verdict: met.** IQM ratio 0.95 [0.72, 1.3].",
            "The verdicts above for `walker-sac`, `walker-margin` are exploratory (read as a "
            "verdict: met).",
            "`walker-sac` is void of nothing: its verdict stands.",
        ],
        "walker-equal": ["**No verdict: the entry is void.** Its runs repeat `walker-sac`'s."],
        "walker-margin": [
            "Registered before its runs, after `walker-equal` was found void; SAC on the true "
            "reward reused from `walker-sac`.",
            "**Verdict: met.** IQM ratio 0.88 [0.53, 1.3].",
            "The verdicts above for `walker-sac`, `walker-margin` are exploratory (read as a "
            "verdict: met).",
        ],
    }
