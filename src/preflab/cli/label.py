"""``preflab label TRAJECTORIES --run-dir DIR`` (a labelling run from your own trajectories,
served with ``preflab studio DIR``) and ``preflab fit DIR`` (the reward ensemble from the answers,
no policy training). See :mod:`preflab.runs.labelling`."""

from __future__ import annotations

import argparse
import math

from preflab.config import TrainConfig
from preflab.config.ports import check_port
from preflab.rundir.folders import check_output_dir
from preflab.runs.labelling import fit_labelled, start_labelling


def label(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="preflab label", description=__doc__)
    ap.add_argument(
        "trajectories",
        help="an .npz in the export's segment layout, an export directory, or a Minari dataset",
    )
    ap.add_argument("--run-dir", required=True, help="the labelling run to make (a new directory)")
    ap.add_argument("--pairs", type=int, default=100, help="pairs to ask (default 100)")
    ap.add_argument(
        "--segment-length", type=int, default=50, help="steps per compared clip (default 50)"
    )
    ap.add_argument(
        "--env-id",
        default="",
        help="the env the trajectories come from, to render clips from their states (a "
        "Minari dataset and an export name their own; a different --env-id is refused)",
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of the pair draw and the fit")
    ap.add_argument("--studio-port", type=int, default=8765, help="port in the printed command")
    ap.add_argument(
        "--device",
        default="auto",
        help="where torch fits the reward model: auto (a CUDA GPU when torch sees one, else "
        "the CPU), cpu, cuda or cuda:N (default: auto; saved for `preflab fit`)",
    )
    args = ap.parse_args(argv)
    if args.pairs < 1:
        ap.error(f"--pairs must be at least 1, got {args.pairs}")
    check_output_dir(args.run_dir, what="--run-dir")
    check_port(
        args.studio_port,
        flag="--studio-port",
        fix="give the port `preflab studio` will serve on (default 8765)",
    )
    config = TrainConfig(
        env_id=args.env_id or "Pendulum-v1",
        segment_length=args.segment_length,
        seed=args.seed,
        device=args.device,
    )
    made = start_labelling(
        args.trajectories, args.run_dir, config, pairs=args.pairs, env_id=args.env_id
    )
    print(
        f"labelling run {made.run_dir}: {made.n_segments} segments of {args.segment_length} "
        f"steps from {made.n_trajectories} trajectories, {made.n_pairs} pairs to answer"
    )
    if not made.renders:
        print(
            "note: the trajectories carry no simulator states (or no env is named), so the "
            "studio cannot render clips of them"
        )
    print(f"people answer in the studio: preflab studio {made.run_dir} --port {args.studio_port}")
    print(f"then fit the reward model: preflab fit {made.run_dir}")
    return 0


def fit(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="preflab fit", description=__doc__)
    ap.add_argument("run_dir", help="a labelling run made by `preflab label`")
    ap.add_argument(
        "--epochs", type=int, default=None, help="fit epochs, at least 1 (default: the run's)"
    )
    ap.add_argument(
        "--device",
        default=None,
        help="where torch fits the reward model: auto (a CUDA GPU when torch sees one, else "
        "the CPU), cpu, cuda or cuda:N (default: the run's, as `preflab label` saved it)",
    )
    ap.add_argument(
        "--by-viewpoint",
        action="store_true",
        help="one reward per viewpoint of the crowd (Crowd-PrefRL): SML weighs the annotators, "
        "their weights fall into groups, each group's answers give its own reward, in "
        "RUN_DIR/viewpoints/group-G (who is where: RUN_DIR/viewpoints/viewpoints.json)",
    )
    ap.add_argument(
        "--max-groups",
        type=int,
        default=3,
        help="with --by-viewpoint: the most viewpoints to look for (default 3)",
    )
    args = ap.parse_args(argv)
    if args.epochs is not None and args.epochs < 1:
        ap.error(f"--epochs must be at least 1, got {args.epochs} (leave it out for the run's own)")
    if args.max_groups < 1:
        ap.error(f"--max-groups must be at least 1, got {args.max_groups}")
    if args.by_viewpoint:
        return _fit_viewpoints(args)
    res = fit_labelled(args.run_dir, epochs=args.epochs, device=args.device)
    acc = "" if math.isnan(res.reward_accuracy) else f", accuracy {res.reward_accuracy:.3f}"
    print(
        f"reward model fitted on {res.n_labels} labels (validation loss {res.val_loss:.3f}{acc}) "
        f"-> {res.reward_dir}"
    )
    return 0


def _fit_viewpoints(args: argparse.Namespace) -> int:
    from preflab.runs.viewpoint_fit import fit_viewpoints

    results = fit_viewpoints(
        args.run_dir, epochs=args.epochs, device=args.device, max_groups=args.max_groups
    )
    print(f"{len(results)} viewpoint(s) among the annotators of {args.run_dir}:")
    for g, res in enumerate(results):
        if res is None:
            print(f"  group {g}: no labels, no reward")
            continue
        acc = "" if math.isnan(res.reward_accuracy) else f", accuracy {res.reward_accuracy:.3f}"
        print(
            f"  group {g}: reward fitted on {res.n_labels} labels (validation loss "
            f"{res.val_loss:.3f}{acc}) -> {res.reward_dir}"
        )
    return 0


main = label
