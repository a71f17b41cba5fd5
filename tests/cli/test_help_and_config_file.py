"""`preflab train --help` (short, fast, true), `--config FILE.toml` / `--print-config`, and the
command options refused together; `preflab bench` listing."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tyro

from preflab.cli import bench as bench_cli
from preflab.cli import train as train_cli
from preflab.cli.main import main as preflab_main
from preflab.cli.train_help import CONFIG_OPTIONS, short_help
from preflab.config import TrainConfig
from preflab.config.file import apply_config_data, config_to_toml, load_config
from preflab.errors import ConfigError
from preflab.fielddocs import docs_of, first_sentence
from preflab.sources.teacher import TeacherConfig
from preflab_bench import BENCHMARKS
from tests import warm_python

INTERNAL = re.compile(r"[Pp]aper 00\d|[Ii]ssue #?\d|#\d\d\b")


def _help_text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert train_cli.main(list(argv)) == 0
    return capsys.readouterr().out


def test_short_help_is_short_and_names_the_command_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help_text(capsys, "--help")
    assert len(text.splitlines()) < 70
    for flag in ("--run-dir", "--resume", "--studio", "--studio-host", "--studio-port"):
        assert f"  {flag} " in text
    for flag in ("--config", "--print-config", "--help-all", "--env-id", "--total-labels"):
        assert flag in text
    assert not INTERNAL.search(text)
    # --help anywhere on the line gives the same short help
    assert _help_text(capsys, "--studio", "--env-id", "Hopper-v5", "-h") == text


def test_short_help_descriptions_are_the_config_docstrings() -> None:
    text = " ".join(short_help().split())
    docs = docs_of(TrainConfig)
    teacher = docs_of(TeacherConfig)
    for _title, names in CONFIG_OPTIONS:
        for name in names:
            doc = teacher[name.split(".")[1]] if name.startswith("teacher.") else None
            if doc is None and "." not in name:
                doc = docs[name]
            if doc is not None:
                assert first_sentence(doc.doc).rstrip(".") in text, name


def test_every_short_help_flag_is_an_option_of_the_full_parser() -> None:
    """Each config flag of the short help parses in tyro (so the short list cannot go stale)."""
    values = {"algo": "ppo", "source": "crowd", "env_id": "CartPole-v1", "llm.base_url": "u"}
    values |= {"total_steps": "30000", "llm.model": "m", "backend": "sbx"}
    for _title, names in CONFIG_OPTIONS:
        for name in names:
            flag = "--" + name.replace("_", "-")
            value = values.get(name, "0.5" if name.startswith("teacher.") else "7")
            config = tyro.cli(TrainConfig, args=[flag, value])
            obj: object = config
            for part in name.split("."):
                obj = getattr(obj, part)
            assert str(obj) == value or float(str(obj)) == float(value), name


def test_help_is_fast_it_imports_neither_torch_nor_the_trainer() -> None:
    code = (
        "import sys; from preflab.cli.main import main; main(['train', '--help']); "
        "bad = [m for m in ('torch', 'stable_baselines3', 'tyro', 'preflab.config', "
        "'preflab.cli.train') if m in sys.modules]; sys.exit(bool(bad) and print(bad) or bad != [])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "--help-all" in r.stdout


def test_help_all_is_the_full_list_without_internal_references() -> None:
    r = warm_python.run(
        [sys.executable, "-m", "preflab.cli.main", "train", "--help-all"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "--reward.members" in r.stdout and "--fit.epochs" in r.stdout
    assert not INTERNAL.search(r.stdout), INTERNAL.search(r.stdout)


def test_config_file_round_trip_equals_the_config(tmp_path: Path) -> None:
    for config in (
        TrainConfig(),
        TrainConfig.atari(),
        TrainConfig.smoke(task='go "left"\n\x7f', max_minutes=3.0, net_arch=()),
    ):
        text = config_to_toml(config)
        path = tmp_path / "c.toml"
        path.write_text(text)
        assert load_config(path) == config


def test_a_run_from_a_file_equals_the_same_run_from_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--algo", "ppo", "--seed", "3", "--total-labels", "40", "--teacher.epsilon", "0.1"]
    flags += ["--reward.hidden", "32", "32", "--fit.no-adapt-l2", "--max-minutes", "9"]
    from_flags = tmp_path / "flags.toml"
    assert train_cli.main([*flags, "--print-config", str(from_flags)]) == 0
    # the same run written by hand, as a user would: a few keys, tables for sub-configs
    (tmp_path / "mine.toml").write_text(
        'algo = "ppo"\nseed = 3\ntotal_labels = 40\nmax_minutes = 9\n'
        "[teacher]\nepsilon = 0.1\n[reward]\nhidden = [32, 32]\n[fit]\nadapt_l2 = false\n"
    )
    from_file = tmp_path / "file.toml"
    assert (
        train_cli.main(["--config", str(tmp_path / "mine.toml"), "--print-config", str(from_file)])
        == 0
    )
    assert from_file.read_text() == from_flags.read_text()
    expected = TrainConfig(
        algo="ppo",
        seed=3,
        total_labels=40,
        max_minutes=9.0,
        teacher=TeacherConfig(epsilon=0.1),
        reward=dataclasses.replace(TrainConfig().reward, hidden=(32, 32)),
        fit=dataclasses.replace(TrainConfig().fit, adapt_l2=False),
    )
    assert load_config(from_file) == expected
    # flags override the file; nothing but the printed file was written
    capsys.readouterr()
    assert (
        train_cli.main(["--config", str(tmp_path / "mine.toml"), "--seed", "5", "--print-config"])
        == 0
    )
    printed = tomllib.loads(capsys.readouterr().out)
    assert printed["seed"] == 5 and printed["teacher"]["epsilon"] == 0.1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.toml", "flags.toml", "mine.toml"]


def test_env_defaults_come_from_the_files_env_id(tmp_path: Path) -> None:
    (tmp_path / "pong.toml").write_text('env_id = "ALE/Pong-v5"\nseed = 2\n')
    out = tmp_path / "out.toml"
    assert (
        train_cli.main(["--config", str(tmp_path / "pong.toml"), "--print-config", str(out)]) == 0
    )
    assert load_config(out) == TrainConfig.atari("ALE/Pong-v5", seed=2)


def test_bad_files_are_refused_in_one_message_with_suggestions(tmp_path: Path) -> None:
    bad = {
        "totl_steps": 3,
        "beta": 2.0,
        "teacher": {"beta": "x"},
        "net_arch": [1, "a"],
        "algo": "sacc",
        "total-labels": 3,
    }
    with pytest.raises(ConfigError) as err:
        apply_config_data(TrainConfig(), bad, where="--config f.toml")
    msg = str(err.value)
    assert msg.startswith("--config f.toml: ")
    for part in (
        "unknown key 'totl_steps' (did you mean 'total_steps'",
        "unknown key 'beta' (it belongs in the table [teacher])",
        "teacher.beta must be a number, got a string 'x'",
        "net_arch[1] must be an integer",
        "algo must be one of",
        "unknown key 'total-labels' (did you mean 'total_labels'?)",
    ):
        assert part in msg, part
    with pytest.raises(ConfigError, match=r"teacher\.beta must be > 0"):
        apply_config_data(TrainConfig(), {"teacher": {"beta": -1}}, where="x")
    (tmp_path / "broken.toml").write_text("seed = = 1\n")
    with pytest.raises(ConfigError, match="not a TOML file"):
        train_cli.main(["--config", str(tmp_path / "broken.toml")])
    with pytest.raises(ConfigError, match="no such file; write one with `preflab train --print"):
        train_cli.main(["--config", str(tmp_path / "missing.toml")])


def test_command_options_that_cannot_go_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        train_cli.main(["--resume", str(tmp_path), "--run-dir", "x", "--config", "c.toml"])
    msg = str(err.value)
    assert "--resume continues the run in its own directory" in msg and "drop --run-dir" in msg
    assert "drop --config" in msg
    (tmp_path / "t.toml").write_text('source = "teacher"\n')
    with pytest.raises(ConfigError, match="--studio means people answer"):
        train_cli.main(["--studio", "--config", str(tmp_path / "t.toml")])
    assert list(tmp_path.iterdir()) == [tmp_path / "t.toml"]


def test_bench_lists_every_benchmark_with_a_description_and_a_run_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert set(BENCHMARKS) == set(bench_cli.available())
    assert bench_cli.main([]) == 0
    out = capsys.readouterr().out
    for name, (runtime, text) in BENCHMARKS.items():
        assert runtime.startswith("~") and text and not INTERNAL.search(text)
        assert re.search(rf"^  {name} +{re.escape(runtime)} +{re.escape(text)}$", out, re.M)
    with pytest.raises(ConfigError, match=r"did you mean atari\?"):
        bench_cli.main(["atar"])


def test_bench_without_the_benchmarks_says_how_to_install_them(tmp_path: Path) -> None:
    """A preflab installed from its wheel has no benchmarks: the CLI says where they are."""
    hide = tmp_path / "sitecustomize.py"  # the benchmarks package cannot be found
    hide.write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'preflab_bench':\n"
        "            raise ModuleNotFoundError(\"No module named 'preflab_bench'\", name=name)\n"
        "sys.meta_path.insert(0, _Hide())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "preflab.cli.main", "bench", "--help"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "pip install -e benchmarks" in done.stderr and "setup.sh --dev" in done.stderr


def test_third_party_request_loggers_are_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    assert preflab_main(["bench", "--help"]) == 0
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    assert logging.getLogger("httpx").isEnabledFor(logging.WARNING)


def test_source_flags_without_their_source_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = tmp_path / "run"
    with pytest.raises(ConfigError) as err:
        train_cli.main(["--crowd.n-users", "3", "--llm.model=x", "--run-dir", str(run)])
    assert str(err.value) == (
        "--crowd.n-users 3, --llm.model x would be ignored: --source teacher does not read "
        "--crowd.* or --llm.*; add --source crowd or --source llm, or drop them"
    )
    assert not run.exists()  # refused before anything is written
    assert train_cli.main(["--source", "crowd", "--crowd.n-users", "3", "--print-config"]) == 0
    assert tomllib.loads(capsys.readouterr().out)["crowd"]["n_users"] == 3


def test_a_bpref_teacher_by_name(tmp_path: Path) -> None:
    from preflab.config.file import read_config_file

    out = tmp_path / "mistake.toml"
    args = ["--teacher", "bpref-mistake", "--teacher.gamma", "0.95", "--print-config", str(out)]
    assert train_cli.main(args) == 0
    teacher = read_config_file(str(out))["teacher"]
    assert teacher["epsilon"] == 0.1 and teacher["gamma"] == 0.95  # a flag still overrides
    with pytest.raises(ConfigError, match="bpref-myopic"):
        train_cli.main(["--teacher", "bpref-myopia", "--print-config", str(out)])
    with pytest.raises(ConfigError, match="drop --teacher"):
        train_cli.main(["--resume", str(tmp_path), "--teacher", "bpref-skip"])
