"""Probe: one warm reward fit on a finished run's labels, with and without B-Pref's 97% stop.

B-Pref's train_PEBBLE.py ends a reward fit after the first epoch whose training accuracy,
averaged over the members, is above 97% (``FitConfig.stop_accuracy``). This probe loads a
finished run's labels, segments and final reward model (a copy of its store, so the run is not
touched), fits that model once more on every label with the run's own fit settings, first
without the stop and then, from the same model, with it, and prints per fit: gradient steps,
epochs, wall and CPU seconds, and each member's share of label pairs ranked as labelled.

Usage: PYTHONPATH=src python benchmarks/probes/fit_stop_replay.py RUN_DIR [--threads 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from preflab.config import TrainConfig
from preflab.records import Label
from preflab.reward import LabelBatch, RewardTrainer, SegmentBatch
from preflab.reward.modelfiles import load_reward_model
from preflab.store import FeedbackStore


def labelled(run_dir: Path, work: Path) -> tuple[SegmentBatch, LabelBatch]:
    """The run's answered pairs as a label batch over the segments they compare."""
    shutil.copy2(run_dir / "feedback.db", work / "feedback.db")
    shutil.copytree(run_dir / "segments", work / "segments")
    store = FeedbackStore(f"sqlite:///{work / 'feedback.db'}")
    queries = {q.id: q for q in store.queries.all()}
    labels = [
        Label(a=queries[j.query_id].a[0], b=queries[j.query_id].b[0], p=j.p)
        for _seq, j in store.answers.judgements()
        if j.p is not None
    ]
    ids = sorted({x for lab in labels for x in (lab.a, lab.b)})
    segments = SegmentBatch.from_segments(store.segments.get(ids))
    store.close()
    return segments, LabelBatch.from_labels(labels, segments.index())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = TrainConfig.from_json((args.run_dir / "config.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        segments, labels = labelled(args.run_dir, Path(tmp))
    a, b, p = labels.a.numpy(), labels.b.numpy(), labels.p.numpy()
    print(json.dumps({"labels": len(labels), "segments": len(segments)}))
    for stop in (None, 0.97):
        ens = load_reward_model(args.run_dir)
        trainer = RewardTrainer(ens, dataclasses.replace(cfg.fit, stop_accuracy=stop))
        t0, c0 = time.perf_counter(), time.process_time()
        rep = trainer.fit(segments, labels, np.random.default_rng(cfg.seed), warm=True)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        with torch.no_grad():
            r = ens.segment_returns_t(segments).numpy()
        agree = ((r[:, a] > r[:, b]) == (p > 0.5)).mean(1)
        row = {"stop_accuracy": stop, "steps": rep.steps, "epochs": rep.epochs}
        row |= {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
        print(json.dumps(row | {"ranked_as_labelled": agree.round(4).tolist()}))


if __name__ == "__main__":
    main()
