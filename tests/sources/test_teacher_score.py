"""Your own preference function for the synthetic teacher (issue #29): `--teacher.score
module:function`, per-step or one score per segment, and metrics measured against it."""

from pathlib import Path

import numpy as np
import pytest

from preflab.config import TrainConfig
from preflab.config.constraints import start_notes
from preflab.errors import ConfigError, DataError
from preflab.runs import train
from preflab.sources.teacher import SyntheticTeacher, TeacherConfig, load_score, segment_rewards
from preflab.testing.factories import make_segment

PREFS = """
import numpy as np

def opposite(seg):
    return -np.asarray(seg.true_rewards)

def total(seg):
    return float(np.sum(seg.true_rewards))

def broken(seg):
    return np.ones(3)
"""


@pytest.fixture
def prefs(tmp_path: Path) -> Path:
    path = tmp_path / "prefs.py"
    path.write_text(PREFS)
    return path


def test_a_function_is_loaded_from_a_file_or_a_module(prefs: Path) -> None:
    seg = make_segment(true_rewards=np.array([1.0, -2.0, 4.0]))
    np.testing.assert_allclose(load_score(f"{prefs}:opposite")(seg), [-1.0, 2.0, -4.0])
    assert load_score("numpy:sum")(np.array([1, 2])) == 3


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("no_colon", "expected 'module:function'"),
        (":fn", "expected 'module:function'"),
        ("{dir}/missing.py:fn", "no file"),
        ("{prefs}:nothing", "has no function 'nothing'"),
        ("preflab_no_such_module:fn", "importing preflab_no_such_module failed"),
    ],
)
def test_bad_specs_say_what_was_expected(prefs: Path, spec: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        load_score(spec.format(dir=prefs.parent, prefs=prefs))


def test_one_score_per_segment_counts_as_its_return(prefs: Path) -> None:
    """A scalar answer is the segment's return (on its last step); a per-step answer is kept;
    a wrong shape or a NaN is refused with the segment's length."""
    seg = make_segment(true_rewards=np.array([1.0, 2.0, 3.0, 4.0]))
    r = segment_rewards(load_score(f"{prefs}:total"), seg)
    np.testing.assert_allclose(r, [0.0, 0.0, 0.0, 10.0])
    with pytest.raises(DataError, match=r"one score or \(4,\) per-step rewards"):
        segment_rewards(load_score(f"{prefs}:broken"), seg)
    with pytest.raises(DataError, match="NaN"):
        segment_rewards(lambda s: float("nan"), seg)
    teacher = SyntheticTeacher(reward_fn=load_score(f"{prefs}:total"))
    low = make_segment(true_rewards=np.array([1.0, 1.0, 1.0, 1.0]))
    assert teacher.judge(seg, low) == 1.0 and teacher.judge(low, seg) == 0.0


def test_a_run_learns_and_is_measured_against_your_function(prefs: Path, tmp_path: Path) -> None:
    """The teacher prefers by the opposite of the env's reward: the learned reward agrees with
    that function (positive correlation), which it could not if the metrics used the env's
    reward (they would be strongly negative); the start note says the returns stay the env's."""
    cfg = TrainConfig.smoke(teacher=TeacherConfig(score=f"{prefs}:opposite"))
    (note,) = start_notes(cfg, "run", studio=False)
    assert "--teacher.score" in note and "still the env's own reward" in note
    result = train(cfg, run_dir=tmp_path / "run")
    assert result.n_labels == cfg.total_labels
    assert result.reward_corr > 0.3
    # the final table's target return is the policy's score by that function: here the
    # negated env return of the same evaluation episodes
    assert result.target_return == pytest.approx(-result.true_return, rel=1e-5)
    assert result.target_return_std == pytest.approx(result.true_return_std, rel=1e-5)


def test_an_evaluation_target_of_its_own_scores_the_episodes(prefs: Path, tmp_path: Path) -> None:
    """--eval-target steps(seg) = 1 per step: every Pendulum episode's target return is its
    length, 200 (an analytic case); metrics.csv carries it from the evaluating rounds."""
    prefs.write_text(PREFS + "\ndef steps(seg):\n    return np.ones(len(seg.true_rewards))\n")
    cfg = TrainConfig.smoke(eval_target=f"{prefs}:steps", eval_every_rounds=1)
    result = train(cfg, run_dir=tmp_path / "run")
    assert result.target_return == 200.0 and result.target_return_std == 0.0
    rows = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    col = header.index("eval_target_return")
    assert [r.split(",")[col] for r in rows[2:]] == ["200.0"] * (len(rows) - 2)
    assert (tmp_path / "run" / "learning_curves.png").stat().st_size > 0


def test_a_bad_evaluation_target_is_refused_before_the_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--eval-target 'nowhere:fn'"):
        train(TrainConfig.smoke(eval_target="nowhere:fn"), run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
