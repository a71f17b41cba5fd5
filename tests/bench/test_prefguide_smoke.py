"""The Pref-GUIDE benchmark end to end at a tiny budget: loop runs per method, both tables."""

from __future__ import annotations

from preflab.bench.prefguide import CORR_METHODS, main
from preflab.scalar.guide import METHODS


def _table(text: str, title: str) -> list[list[str]]:
    block = text.split(title, 1)[1].strip().split("\n\n")[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.splitlines()]


def test_prefguide_bench_writes_both_tables(tmp_path) -> None:
    out = tmp_path / "prefguide.md"
    argv = [
        "--populations", "top", "mixed",
        "--rl-populations", "mixed",
        "--evaluators", "2",
        "--human-steps", "128",
        "--post-steps", "128",
        "--steps-per-round", "128",
        "--item-length", "2",
        "--n-envs", "2",
        "--max-pairs", "300",
        "--eval-episodes", "1",
        "--out", str(out),
        "--run-root", str(tmp_path / "runs"),
    ]  # fmt: skip
    assert main(argv) == 0
    text = out.read_text()
    corr = _table(text, "## Learned reward vs true reward (Pearson r on the rated steps)")
    assert corr[0] == ["population", "seed", "raw ratings", *CORR_METHODS]
    assert [r[0] for r in corr[2:]] == ["top", "mixed"]
    rl = _table(text, "## Final true return after the post-human phase (higher is better)")
    assert rl[0] == ["population", "seed", "end of human phase", *METHODS, "true reward"]
    assert len(rl) == 3 and rl[2][0] == "mixed"
    assert "±" in rl[2][3]  # individual: one run per evaluator, mean ± std
    # every loop run kept its store: ratings of the live phase are there
    assert len(list((tmp_path / "runs").glob("mixed-s0-*/feedback.db"))) == 2 + 3
