"""Bad input at the command line: each case exits non-zero with a one-line message (no
traceback), and nothing half-made is left behind."""

from __future__ import annotations

import pytest

from preflab.cli.main import main


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    return code, err


def assert_one_line(code: int, err: str, *words: str) -> None:
    """Exit code ≠ 0, no traceback, and the error is one line (progress bars aside)."""
    assert code != 0
    assert "Traceback" not in err
    parts = [p for x in err.splitlines() for p in x.split("\r")]
    lines = [p[p.index("preflab ") :] for p in parts if "error:" in p]
    assert len(lines) == 1, err
    for w in words:
        assert w in lines[0], lines[0]


SWEEP = ("sweep", "--sequential", "--preset", "smoke", "--axis", "seed=0")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (("--set", "env_id=CartPole-v1", "--set", "algo=sac"), ("SAC needs continuous",)),
        (
            (
                "--set",
                "segment_length=300",
                "--set",
                "initial_steps=700",
                "--set",
                "total_steps=900",
            ),
            ("longer than an episode",),
        ),
        (("--set", 'agent_kwargs={"batch_size": "big"}'), ("wrong type", "batch_size")),
        (("--set", 'agent_kwargs={"bogus": 1}'), ("no argument 'bogus'",)),
        (
            ("--set", "env_id=MiniGrid-DoorKey-5x5-v0"),
            ("MiniGrid-DoorKey-5x5-v0", "unsupported observation space", "FlatObsWrapper"),
        ),
        (("--set", "env_id=Pendulum-v9"), ("unknown environment id",)),
        (("--set", "total_labels=-5"), ("total_labels must be ≥ 1",)),
        (("--axis", "seed=-1"), ("seed must be ≥ 0",)),
        (("--set", "n_envs=8", "--set", "initial_steps=100"), ("fewer than one segment",)),
        (("--set", "no_such_field=1"), ("not a TrainConfig field",)),
    ],
)
def test_sweep_refuses_bad_trials_before_starting(capsys, tmp_path, extra, words) -> None:
    out = tmp_path / "sw"
    code, err = run(capsys, *SWEEP, *extra, "--out", str(out))
    assert_one_line(code, err, *words)
    assert not (out / "trials").exists()


def test_sweep_bad_spec_file(capsys, tmp_path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text("name = 'x'\n[axes\nseed = [0]\n")
    assert_one_line(*run(capsys, "sweep", str(spec)), "not a valid sweep spec")
    spec.write_bytes(b"\xff\xfe bad")
    assert_one_line(*run(capsys, "sweep", str(spec)), "cannot read sweep spec")
    assert_one_line(*run(capsys, "sweep", str(tmp_path / "missing.toml")), "cannot read")


def test_not_a_run_directory(capsys, tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    assert_one_line(*run(capsys, "train", "--resume", str(tmp_path / "empty")), "not a PrefLab run")
    (tmp_path / "file").write_text("x")
    assert_one_line(*run(capsys, "train", "--resume", str(tmp_path / "file")), "is a file")


def test_unknown_env_id_in_train(capsys, tmp_path) -> None:
    code, err = run(capsys, "train", "--env-id", "Pendulum-v9", "--run-dir", str(tmp_path / "r"))
    assert_one_line(code, err, "unknown environment id")


def test_unreachable_store_url_hides_the_password(capsys, tmp_path) -> None:
    url = "postgresql+psycopg://alice:s3cret-pw@127.0.0.1:1/preflab"
    code, err = run(capsys, "export", url, "--out", str(tmp_path / "e"))
    assert_one_line(code, err, "cannot reach the store")
    assert "s3cret-pw" not in err and "***" in err


def test_export_check_of_something_else(capsys, tmp_path) -> None:
    assert_one_line(*run(capsys, "export", "--check", str(tmp_path)), "not a PrefLab export")


# ----- crowd files -----------------------------------------------------------------------------
def crowd(capsys, tmp_path, data: bytes) -> tuple[int, str]:
    f = tmp_path / "votes.csv"
    f.write_bytes(data)
    return run(capsys, "crowd", "aggregate", str(f), "--out", str(tmp_path / "out"))


ROWS = "".join(f"q{k},a{i},{1 if (k + i) % 3 else -1}\n" for k in range(6) for i in range(4))


def test_crowd_csv_with_bom_is_accepted(capsys, tmp_path) -> None:
    code, _err = crowd(capsys, tmp_path, ("\ufeffquery,annotator,answer\n" + ROWS).encode("utf-8"))
    assert code == 0 and (tmp_path / "out" / "labels.csv").is_file()


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (("query,annotator,answer\n" + ROWS + "q9,Jürgen,1\n").encode("latin-1"), ("not UTF-8",)),
        (("query,annotator,answer\n" + ROWS + "q9,a1\n").encode(), ("line 26", "2 field(s)")),
        (("query,annotator,answer\n" + ROWS + "q9,a1,1,extra\n").encode(), ("4 field(s)",)),
        (
            ("query,annotator,answer\n" + ROWS + "q9," + "x" * 200_000 + ",1\n").encode(),
            ("characters",),
        ),
        (("query,annotator,answer\n" + 'q1,"a1,1\n').encode(), ("CSV",)),
        (b"", ("empty",)),
        (("q,a,b\n" + ROWS).encode(), ("lacks column",)),
    ],
)
def test_crowd_csv_refused_with_a_message(capsys, tmp_path, data, words) -> None:
    assert_one_line(*crowd(capsys, tmp_path, data), *words)


# ----- train: checked before anything is written; a failed start leaves no run directory -------
def test_train_sac_on_discrete_env(capsys, tmp_path) -> None:
    d = tmp_path / "r"
    code, err = run(
        capsys, "train", "--env-id", "CartPole-v1", "--algo", "sac", "--run-dir", str(d)
    )
    assert_one_line(code, err, "SAC needs continuous")
    assert not d.exists()


def test_failed_train_leaves_no_run_directory(capsys, tmp_path) -> None:
    d = tmp_path / "r"
    url = "postgresql+psycopg://alice:pw@127.0.0.1:1/preflab"
    code, err = run(capsys, "train", "--store-url", url, "--run-dir", str(d))
    assert_one_line(code, err, "cannot reach the store")
    assert not d.exists()


# ----- a file where an output folder is expected: said so, the file kept, nothing written -------
NOTE = "my notes, not a folder\n"

OUTPUT_FOLDERS = {
    "train --run-dir": lambda run, t, f: ["train", "--run-dir", f],
    "train --run-dir inside a file": lambda run, t, f: ["train", "--run-dir", f"{f}/run"],
    "export --out": lambda run, t, f: ["export", run, "--out", f],
    "export --into": lambda run, t, f: ["export", "--import", f"{t}/export", "--into", f],
    "label --run-dir": lambda run, t, f: ["label", f"{t}/traj.npz", "--run-dir", f],
    "crowd aggregate --out": lambda run, t, f: [
        *("crowd", "aggregate", f"{t}/votes.csv", "--method", "majority", "--out", f)
    ],
    "sweep --out": lambda run, t, f: [*SWEEP, "--out", f],
    "record --out inside a file": lambda run, t, f: ["record", run, "--out", f"{f}/clip.mp4"],
    "studio study --export": lambda run, t, f: ["studio", "study", run, "--export", f],
    "bench --run-root": lambda run, t, f: [
        *("bench", "bpref", "--arms", "pebble", "--run-root", f, "--jsonl", f"{t}/runs.jsonl"),
        *("--out", f"{t}/bpref.md", "--steps", "2000", "--initial-steps", "200"),
        *("--unsup-steps", "200", "--steps-per-round", "500", "--labels", "10"),
        *("--net-arch", "16", "--batch-size", "16", "--threads", "1", "--eval-episodes", "1"),
    ],
}


@pytest.mark.parametrize("case", list(OUTPUT_FOLDERS))
def test_a_file_given_as_an_output_folder_is_refused(capsys, tmp_path, finished, case) -> None:
    import numpy as np

    from tests.run_support import copy_run, digest_run

    if case.startswith("bench"):
        pytest.importorskip("preflab_bench")
    run_dir = copy_run(finished, tmp_path)  # studio study would change the run's store
    before = digest_run(run_dir)
    work = tmp_path / "work"
    work.mkdir()
    np.savez(
        work / "traj.npz", obs=np.zeros((2, 30, 3)), acts=np.zeros((2, 30, 1)), lengths=[30, 30]
    )
    (work / "votes.csv").write_text("query,annotator,answer\n" + ROWS)
    note = work / "notes.txt"
    note.write_text(NOTE)
    argv = OUTPUT_FOLDERS[case](str(run_dir), str(work), str(note))
    code, err = run(capsys, *argv)
    assert_one_line(code, err, f"{note} is a file", "folder")
    assert "Errno" not in err
    assert note.read_text() == NOTE
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt", "traj.npz", "votes.csv"]
    assert digest_run(run_dir) == before


# ----- ports: a link or command with port 0 (or past 65535) leads nowhere ----------------------
@pytest.mark.parametrize("port", ["0", "65536"])
def test_add_annotator_refuses_a_port_out_of_range(capsys, tmp_path, finished, port) -> None:
    from tests.run_support import copy_run, digest_run

    run_dir = copy_run(finished, tmp_path)
    before = digest_run(run_dir)
    code, err = run(capsys, "studio", "add-annotator", "Ada", str(run_dir), "--port", port)
    assert_one_line(code, err, f"--port must be in 1..65535, got {port}")
    assert digest_run(run_dir) == before  # no annotator (with a token) was added
