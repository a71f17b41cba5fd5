"""``preflab bench bpref``: a PEBBLE run stopped mid-way continues exactly when run again."""

from __future__ import annotations

import dataclasses

import pytest

from preflab.bench import bpref
from preflab.errors import ConfigError
from preflab.runs import start_loop

ENV = "dm_control/walker-walk-v0"
TINY = [
    "--seeds", "3", "--steps", "400", "--labels", "6", "--initial-steps", "100",
    "--unsup-steps", "100", "--steps-per-round", "100", "--net-arch", "16",
    "--batch-size", "32", "--threads", "1", "--eval-episodes", "1",
]  # fmt: skip


def test_a_stopped_pebble_run_continues_where_it_stopped_and_ends_as_if_never_stopped(
    tmp_path,
) -> None:
    whole = bpref.parser().parse_args([*TINY, "--run-root", str(tmp_path / "whole")])
    split = bpref.parser().parse_args([*TINY, "--run-root", str(tmp_path / "split")])
    ref = bpref.run_pebble(whole, ENV, 3)

    def stop_after_round_1(row: dict) -> None:
        if row["round"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cfg = bpref.pebble_config(split, ENV, 3)
        start_loop(cfg, tmp_path / "split" / "dm_control_walker-walk-v0-pebble-s3",
                   progress=stop_after_round_1).run()  # fmt: skip
    res = bpref.run_pebble(split, ENV, 3)  # the same command again
    assert res["steps"] == ref["steps"] == 400 and res["labels"] == ref["labels"] == 6
    assert res["return"] == ref["return"]
    assert res["reward_corr"] == ref["reward_corr"]


def test_a_stopped_run_is_not_continued_with_other_nets_nor_a_finished_one_run_twice(
    tmp_path,
) -> None:
    args = bpref.parser().parse_args([*TINY, "--run-root", str(tmp_path)])
    run = tmp_path / "dm_control_walker-walk-v0-pebble-s3"

    def stop(row: dict) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        start_loop(bpref.pebble_config(args, ENV, 3), run, progress=stop).run()
    other = dataclasses.replace(bpref.pebble_config(args, ENV, 3), net_arch=(8,))
    with pytest.raises(ConfigError, match="would change it"):
        bpref.train_row(other, run)
    bpref.run_pebble(args, ENV, 3)
    with pytest.raises(ConfigError, match="holds a finished run"):
        bpref.run_pebble(args, ENV, 3)  # a second row of the same run would count it twice
