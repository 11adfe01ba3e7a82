"""Run as a script by test_one_place.py, in a fresh interpreter: `python one_place_check.py OUT_DIR`.

It imports relreason's consumers first, then the one file that declares `running_max`
(extra_algorithm.py), as a plugin is loaded after relreason; then it asks every consumer about the
new algorithm through the functions the CLI calls, and writes what each one saw to OUT_DIR/seen.json
(a check that raised records its traceback instead, so the test shows it). The checks run under
`__main__` only: the training stream's spawned worker imports this file again, and must find the
algorithm by itself.
"""

from __future__ import annotations

import json
import math
import sys
import traceback
from pathlib import Path

import torch
from typer.testing import CliRunner

from relreason.studies.ablations import ABLATIONS
from relreason.studies.cells import plan_cells
from relreason.cli.main import app
from relreason.config import build_config
from relreason.data import ALGORITHM_INFO, ALGORITHMS, SPECS, generate
from relreason.data.stream import Prefetcher, TrainingStream
from relreason.data.text import answer_arrays, parse_answer, text_batch, text_split
from relreason.tasks import TASKS, expand_tasks, task_groups
from relreason.train import run
from relreason.train.evaluation import evaluate_checkpoint

NAME = "running_max"
OUT = Path()  # set by main
extra_algorithm = None  # the module, imported by main
seen: dict[str, object] = {}
checks = []
cli = CliRunner()


def cli_json(*args: str):
    res = cli.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def check(fn):
    """A check: main records fn()'s result under its name, or the traceback it raised."""
    checks.append(fn)
    return fn


@check
def facts():
    a = ALGORITHM_INFO[NAME]
    return {"family": a.family, "groups": list(a.groups), "spec": list(SPECS[NAME]), "builtin": a.builtin,
            "module": a.module}


@check
def generated():
    ds = generate(NAME, split="val")
    written = cli.invoke(app, ["generate", NAME, "--split", "test", "--out", str(OUT / "data")])
    assert written.exit_code == 0, written.output
    return {"num": len(ds), "n": ds.n, "hints": sorted(ds.hints), "outputs": sorted(ds.outputs),
            "steps": int(ds.lengths.max()), "file": (OUT / "data" / NAME / "test.safetensors").is_file()}


@check
def trained():
    cfg = build_config("mpnn", NAME, "default", [
        "train.batch_size=4", "train.train_examples=8", "train.eval_every_examples=8", "model.hidden=8",
        "data.train_num=8", "data.train_size=5", "data.val_size=5", "data.test_size=6",
        f"data.data_dir={OUT / 'data'}"])
    res = run(cfg, out=OUT / "runs", name="r", show_progress=False, log=lambda m: None)
    scores = evaluate_checkpoint(res.run_dir, ood=7, num=4, overrides=[f"data.data_dir={OUT / 'data'}"])
    listed = cli_json("runs", str(OUT / "runs"), "--json")["runs"]
    return {"steps": res.steps, "test_finite": math.isfinite(res.test["score"]), "test_outputs": sorted(res.test["outputs"]),
            "eval_task": scores["task"], "eval_outputs": sorted(scores["outputs"]),
            "runs_tasks": [r["task"] for r in listed]}


@check
def grouped():
    groups = task_groups()
    cells = plan_cells(ABLATIONS.get("single-layer"), expand_tasks(extra_algorithm.FAMILY), (0,), out=OUT / "ablations")
    return {"groups": {g: groups.get(g) for g in (extra_algorithm.FAMILY, extra_algorithm.GROUP, "clrs30",
                                                    "text:" + extra_algorithm.FAMILY)},
            "tasks": [t for t in TASKS.names() if NAME in t],
            "ablation_cells": sorted({c.task for c in cells})}


@check
def listed():
    rows = {r["name"]: r for r in cli_json("list", "algorithms", "--json")["algorithms"]}
    tasks = {r["name"]: r["tasks"] for r in cli_json("list", "tasks", "--json")["tasks"]}
    return {"row": rows.get(NAME), "task_rows": {t: m for t, m in tasks.items() if NAME in t or extra_algorithm.FAMILY in t
                                                 or extra_algorithm.GROUP in t}}


@check
def text():
    out = {}
    for hints in (False, True):
        batch = text_batch(NAME, 5, 0, 3, hints=hints)
        parsed = [parse_answer(a, NAME, hints).equals(answer_arrays(t, hints))
                  for a, t in zip(batch.answers, (batch.dataset.trajectory(i) for i in range(len(batch))))]
        out[str(hints)] = {"question": batch.questions[0], "answer": batch.answers[0], "parsed": parsed}
    out["clrs_text_train"] = [p.length for p in text_split("clrs_text", "train", NAME)]
    return out


@check
def streamed():
    stream = TrainingStream(NAME, seed=0, batch_size=4)
    with Prefetcher(stream, stop_step=1) as batches:  # a spawned worker: it must import extra_algorithm
        step, ds = next(batches)
    return {"step": step, "num": len(ds), "algorithm": ds.algorithm}


def main(out: Path) -> None:
    global OUT, extra_algorithm
    OUT = out
    seen["before"] = {"algorithm": NAME in ALGORITHMS, "task": NAME in TASKS}
    import extra_algorithm  # after relreason, as a plugin is: that is the point

    torch.set_num_threads(1)
    for fn in checks:
        try:
            seen[fn.__name__] = fn()
        except BaseException:  # noqa: BLE001 - every failure goes to the test, which prints it
            seen[fn.__name__] = {"error": traceback.format_exc()}
    (OUT / "seen.json").write_text(json.dumps(seen, indent=1, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
