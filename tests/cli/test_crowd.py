import csv
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflab.aggregate import majority, sml
from preflab.cli.crowd import main


def crowd_rows(seed=0, n_ann=6, n_q=60):
    rng = np.random.default_rng(seed)
    acc = np.array([0.95, 0.9, 0.9, 0.85, 0.6, 0.55])[:n_ann]
    y = rng.choice([-1, 1], n_q)
    votes = np.where(rng.random((n_ann, n_q)) < acc[:, None], y, -y)
    votes[rng.random(votes.shape) < 0.2] = 0
    rows = [
        (f"q{k:02d}", f"ann{i}", int(votes[i, k]))
        for k in range(n_q)
        for i in range(n_ann)
        if votes[i, k] != 0
    ]
    return votes, y, rows


def write_csv(path, rows, header=("query", "annotator", "answer")):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def read_csv(path):
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_cli_sml_on_small_csv(tmp_path, capsys):
    votes, _y, rows = crowd_rows()
    f = tmp_path / "crowd.csv"
    write_csv(f, rows)
    assert main(["aggregate", str(f), "--method", "sml", "--out", str(tmp_path / "out")]) == 0
    labels = read_csv(tmp_path / "out" / "labels.csv")
    expected = sml(votes).labels
    assert [int(r["label"]) for r in labels] == expected.tolist()
    ann = read_csv(tmp_path / "out" / "annotators.csv")
    assert [r["annotator"] for r in ann] == [f"ann{i}" for i in range(6)]
    np.testing.assert_allclose([float(r["sml_weight"]) for r in ann], sml(votes).weights, atol=1e-5)
    vp = json.loads((tmp_path / "out" / "viewpoints.json").read_text())
    assert vp["n_groups"] >= 1
    assert "est. accuracy" in capsys.readouterr().out


def test_cli_majority_on_parquet_with_probabilities(tmp_path):
    votes, _, rows = crowd_rows(seed=1)
    f = tmp_path / "crowd.parquet"
    pq.write_table(
        pa.table(
            {
                "query": [r[0] for r in rows],
                "annotator": [r[1] for r in rows],
                "answer": [1.0 if r[2] > 0 else 0.0 for r in rows],
            }
        ),
        f,
    )
    assert main(["aggregate", str(f), "--method", "majority", "--answers", "p"]) == 0
    labels = read_csv(tmp_path / "crowd-aggregate" / "labels.csv")
    assert [int(r["label"]) for r in labels] == majority(votes).tolist()


def test_cli_bad_files(tmp_path, capsys):
    f = tmp_path / "bad.csv"
    write_csv(f, [("q1", "a", 2)])
    assert main(["aggregate", str(f)]) == 1
    assert "not a vote" in capsys.readouterr().err
    write_csv(f, [("q1", "a", 1)], header=("query", "who", "answer"))
    assert main(["aggregate", str(f)]) == 1
    assert "lacks column" in capsys.readouterr().err
    write_csv(f, [("q1", "a", 1), ("q1", "b", 1)])
    assert main(["aggregate", str(f), "--method", "sml"]) == 1
    assert "at least 3" in capsys.readouterr().err
    assert main(["aggregate", str(tmp_path / "missing.csv")]) == 1


def test_cli_repeated_answers_the_later_row_counts(tmp_path):
    # a answers q1 with +1 then −1: if the first row counted the majority would be +1 (a, c
    # against b); the later row counts, so it is −1 (a, b against c). On q2 a later 0
    # withdraws a's vote, leaving b alone: −1 with one answer.
    f = tmp_path / "rep.csv"
    rows = [("q1", "a", 1), ("q1", "b", -1), ("q1", "c", 1), ("q1", "a", -1)]
    rows += [("q2", "a", 1), ("q2", "b", -1), ("q2", "a", 0)]
    write_csv(f, rows)
    assert main(["aggregate", str(f), "--method", "majority", "--out", str(tmp_path / "o")]) == 0
    labels = {r["query"]: r for r in read_csv(tmp_path / "o" / "labels.csv")}
    assert labels["q1"]["label"] == "-1" and labels["q1"]["n_answers"] == "3"
    assert labels["q2"]["label"] == "-1" and labels["q2"]["n_answers"] == "1"
    ann = {r["annotator"]: r for r in read_csv(tmp_path / "o" / "annotators.csv")}
    assert ann["a"]["n_answers"] == "1"  # one counted answer (q1); its q2 vote was withdrawn


def test_cli_help_documents_the_repeated_answer_rule(capsys):
    with pytest.raises(SystemExit):
        main(["aggregate", "--help"])
    assert "later row counts" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("p", "shown"),
    [
        ([[0.9], [0.2], [0.1]], "row 1: answer '[0.9]' is not a probability"),
        (["0.9", "0.4", "abc"], "row 3: answer 'abc' is not a probability"),
    ],
    ids=["lists", "strings"],
)
def test_cli_judgements_parquet_with_a_bad_p_names_the_file_and_the_row(tmp_path, capsys, p, shown):
    # PrefLab's judgements.parquet layout (query_id, annotator_id, p) without its manifest
    f = tmp_path / "judgements.parquet"
    table = {"query_id": ["q1", "q2", "q3"], "annotator_id": ["a", "b", "c"], "p": p}
    pq.write_table(pa.table(table), f)
    assert main(["aggregate", str(f), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"{f} {shown} in [0, 1]" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()
