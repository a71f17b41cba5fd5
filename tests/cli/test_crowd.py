import csv
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

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
    write_csv(f, [("q1", "a", 1), ("q1", "a", -1), ("q1", "b", 1), ("q1", "c", 1)])
    assert main(["aggregate", str(f)]) == 1
    assert "more than once" in capsys.readouterr().err
    write_csv(f, [("q1", "a", 1), ("q1", "b", 1)])
    assert main(["aggregate", str(f), "--method", "sml"]) == 1
    assert "at least 3" in capsys.readouterr().err
    assert main(["aggregate", str(tmp_path / "missing.csv")]) == 1
