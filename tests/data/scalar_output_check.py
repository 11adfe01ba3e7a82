"""Run by test_catalog.py in a fresh interpreter (`python scalar_output_check.py OUT_DIR`), so that no other
test sees a 31st algorithm: `running_peak`, whose one output is a scalar (the largest key), is registered as a
plugin would register it, then trained a few steps; prints what the run recorded as JSON: its metric and
direction, each validation score and the examples of the checkpoint it kept."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from relreason.config import build_config
from relreason.data import samplers
from relreason.data.algorithms import register
from relreason.data.probes import Recorder, positions
from relreason.eval.report import score_rows
from relreason.rundir import ValidationRow, read_metrics, read_results
from relreason.tasks import TASKS, feature_measure
from relreason.train import run


@register("running_peak", family="scans", inputs="pos N sc, key N sc", outputs="peak G sc", hints="peak_h G sc",
          sample=lambda rng, n: (samplers.random_sequence(rng, n),))
def running_peak(A: np.ndarray):
    A = np.array(A, dtype=np.float64)  # [B, N]
    rec = Recorder("running_peak", A.shape[1], batch=A.shape[0])
    rec.input(pos=positions(A.shape[1], A.shape[0]), key=A)
    for i in range(A.shape[1]):
        rec.hint(peak_h=A[:, : i + 1].max(1))
    rec.output(peak=A.max(1))
    return rec.finish()


if __name__ == "__main__":
    out = Path(sys.argv[1])
    cfg = build_config("mpnn", "running_peak", "default", [
        "model.hidden=8", "train.batch_size=8", "train.train_examples=96", "train.eval_every_examples=16",
        "data.train_num=32", "data.train_size=5", "data.val_size=5", "data.test_size=6", "data.val_num=8",
        "data.test_num=8", "train.lr=0.01", "train.threads=1", f"data.data_dir={out / 'data'}"])
    res = run(cfg, out=out, name="r", show_progress=False, log=lambda m: None)
    stored = read_results(res.run_dir)
    vals = [(r.examples, r.score) for r in read_metrics(res.run_dir) if isinstance(r, ValidationRow)]
    print(json.dumps({"task_metric": TASKS.get("running_peak").metric, "metric": stored.metric,
                      "lower_is_better": stored.lower_is_better, "validations": vals,
                      "best_examples": stored.best_examples, "best_val": stored.best_val,
                      "measures": {r["feature"]: r["measure"] for r in score_rows(stored.test.to_dict(),
                                                                                   "running_peak", feature_measure)}}))
