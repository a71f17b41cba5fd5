"""The Pref-GUIDE benchmark end to end at a tiny budget: one agent per evaluator, every
post-human method from its checkpoint, records appended to the jsonl, the report rebuilt."""

from __future__ import annotations

import json

from preflab_bench._prefguide_runs import POST_METHODS
from preflab_bench.prefguide import main
from tests.bench.test_smoke_all import check_run_logs, check_tables


def _table(text: str, title: str) -> list[list[str]]:
    block = text.split(title, 1)[1].strip().split("\n\n")
    block = next(b for b in block if b.startswith("|"))
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()]


def test_prefguide_bench_appends_runs_and_rebuilds_the_report(tmp_path) -> None:
    out, jsonl = tmp_path / "prefguide.md", tmp_path / "runs.jsonl"
    common = ["--jsonl", str(jsonl), "--out", str(out)]
    argv = [
        "--evaluators", "2",
        "--human-steps", "90",
        "--post-steps", "30",
        "--steps-per-round", "90",
        "--item-length", "3",
        "--max-pairs", "200",
        "--eval-episodes", "1",
        "--run-root", str(tmp_path / "runs"),
    ]  # fmt: skip
    assert main([*argv, "--seeds", "0", *common]) == 0
    assert main([*argv, "--seeds", "1", "--no-reference", *common]) == 0
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert all(r["command"].startswith("preflab bench prefguide --evaluators 2") for r in records)
    kinds = [(r["kind"], r["seed"], r.get("method")) for r in records]
    assert kinds.count(("reference", 0, None)) == 1 and ("reference", 1, None) not in kinds
    assert kinds.count(("human", 1, None)) == 2  # one agent per evaluator
    assert all(kinds.count(("post", s, m)) == 2 for s in (0, 1) for m in POST_METHODS)
    # every post-human agent continued its own evaluator's human-phase run
    dirs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert "s1-evaluator-1-human" in dirs and "s1-evaluator-1-voting" in dirs
    text = out.read_text()
    ret = _table(text, "## Final true return after the post-human phase")
    assert ret[0][-3:] == list(POST_METHODS)
    assert [r[0] for r in ret[2:]] == ["0", "1", "mean ± 95% CI"]
    diff = _table(text, "## Paired differences in final true return")
    assert [r[0] for r in diff[2:]] == [
        "voting − individual",
        "individual − regression",
        "voting − regression",
    ]
    protocol = _table(text, "## Under the reporting protocol")
    assert [r[0] for r in protocol[2:]] == list(POST_METHODS)  # an IQM row per method
    assert "not pre-registered (no plan entry): exploratory, no verdict" in text
    assert "- `preflab bench prefguide --evaluators 2" in text  # invocations from the rows
    before = text.split("Date:", 1)[0]
    assert main(["--report", *common]) == 0  # rebuilt from the jsonl alone
    rebuilt = out.read_text()
    assert _table(rebuilt, "## Paired differences in final true return") == diff
    check_tables(out)
    check_run_logs(tmp_path, "prefguide")
    assert before.startswith("# Pref-GUIDE")
