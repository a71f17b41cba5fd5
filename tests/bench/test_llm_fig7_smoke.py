"""The LLM Fig. 7 benchmark end to end at a tiny budget: loop runs, JSON lines, --report."""

from __future__ import annotations

import json

from preflab.bench.llm_fig7 import main
from preflab.store import FeedbackStore


def test_llm_fig7_bench_appends_runs_and_reports(tmp_path) -> None:
    runs, out = tmp_path / "runs.jsonl", tmp_path / "fig7.md"
    argv = [
        "--env", "PrefLab/NoLock-v0",
        "--accuracies", "0.8",
        "--queries", "3",
        "--seeds", "0",
        "--pairs", "60",
        "--steps", "256",
        "--eval-episodes", "2",
        "--runs", str(runs),
        "--out", str(out),
        "--run-root", str(tmp_path / "loops"),
    ]  # fmt: skip
    assert main(argv) == 0
    recs = [json.loads(line) for line in runs.read_text().splitlines()]
    assert [r["mode"] for r in recs] == ["potential", "direct"]
    assert all(r["n_labels"] == 60 and 0 <= r["success"] <= 1 for r in recs)
    lines = [ln for ln in out.read_text().splitlines() if ln.startswith("|")]
    assert lines[0].count("|") == 8 and len(lines) == 3  # header, rule, one row
    assert lines[2].startswith("| NoLock-v0 | 80% | 3 |")
    # the run went through the loop's store: 60 pair queries, 3 answers each
    run_dir = recs[0]["run_dir"]
    store = FeedbackStore(f"{run_dir}/feedback.db", array_dir=f"{run_dir}/segments")
    assert store.count("queries") == 60 and store.count("judgements") == 180
    store.close()
    # --report alone rebuilds the same table from the recorded runs
    before = lines
    assert main(["--report", "--runs", str(runs), "--out", str(out)]) == 0
    assert [ln for ln in out.read_text().splitlines() if ln.startswith("|")] == before
