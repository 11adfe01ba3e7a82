"""The training loop: `run(config) -> RunResult`, called by `relreason train`, `ablate` and the tests.

Schedule (as the reference): Adam, global-norm clipping, a random batch per step, validation every
`eval_every_examples` examples, the best-on-validation weights kept and tested at the OOD size at
the end. Determinism: every random draw of step k (batch indices, random positions, Gumbel noise,
teacher forcing) comes from generators seeded by (seed, k), and the checkpoint holds the optimizer
and the loop counters, so a run resumed from `last/` ends with the same weights as one never
interrupted (on CPU).

Run directory `runs/<name>/`: `best/` and `last/` checkpoints, `metrics.jsonl` (one JSON line per
validation and the final test), `results.json` (the summary that `export` reads).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from relreason import __version__
from relreason.config import Config
from relreason.data.specs import spec_hash
from relreason.errors import RelreasonError
from relreason.eval.evaluate import evaluate_dataset, step_indices, trim
from relreason.runtime import keep_freed_memory, progress
from relreason.tasks import TASKS
from relreason.train import checkpoint as ckpt


@dataclass
class RunResult:
    run_dir: Path
    steps: int
    examples: int
    best_val: float | None
    best_examples: int | None
    test: dict = field(default_factory=dict)  # outputs, score, hints of the best checkpoint at the OOD size
    seconds: float = 0.0
    interrupted: bool = False
    test_size: int = 0  # nodes of the OOD test graphs (padded size for variable-size tasks)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RelreasonError(f"device {name!r} requested but CUDA is not available", "use --device cpu or auto")
    return torch.device(name)


def default_run_name(cfg: Config) -> str:
    return f"{cfg.model_name}-{cfg.task}-s{cfg.train.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def scores_dict(scores) -> dict:
    return {"score": float(scores.score), "outputs": {k: float(v) for k, v in scores.outputs.items()},
            "hints": {k: float(v) for k, v in scores.hints.items()}}


def build(cfg: Config, device: torch.device):
    """The task, the prepared spec and the model for a config (the same in train, eval and ablate)."""
    from relreason.models.batch import prepare_spec
    from relreason.models.net import build_model

    task = TASKS.get(cfg.task)
    spec = prepare_spec(task.spec, cfg.model)
    torch.manual_seed(cfg.train.seed)
    model = build_model(spec, cfg.model, cfg.model_name, cfg.processor).to(device)
    return task, spec, model


def run(cfg: Config, out: Path = Path("runs"), name: str | None = None, resume: bool = False,
        show_progress: bool = True, command: str | None = None, log=None) -> RunResult:
    """Trains `cfg.model_name` on `cfg.task`; returns where the run is and how it scored."""
    from relreason.models.batch import Batch

    log = log or (lambda msg: print(msg, file=sys.stderr))
    keep_freed_memory()
    t = cfg.train
    if t.threads:
        torch.set_num_threads(t.threads)
    device = resolve_device(t.device)
    if resume and name is None:
        raise RelreasonError("--resume needs the run's --name", "e.g. relreason train mpnn bfs --name myrun --resume")
    run_dir = Path(out) / (name or default_run_name(cfg))
    last_dir, best_dir = run_dir / "last", run_dir / "best"
    if resume:
        ckpt.recover(last_dir)
        if not (last_dir / "trainer_state.json").exists():
            raise RelreasonError(f"nothing to resume in {run_dir}", "start it without --resume")
        stored = ckpt.load_config(last_dir)
        if stored.to_dict() != cfg.to_dict():
            cfg = stored  # the run's own configuration wins; overrides on resume would change the run
            log(f"resuming with the run's stored configuration ({last_dir / 'config.json'})")
    elif run_dir.exists() and any(run_dir.iterdir()):
        raise RelreasonError(f"run directory {run_dir} already exists", "pass --resume to continue it or another --name")

    task, spec, model = build(cfg, device)
    train_ds = task.load("train", cfg.data)
    val_ds = task.load("val", cfg.data)
    opt = torch.optim.Adam(model.parameters(), lr=t.lr, foreach=True)
    shash = spec_hash(task.spec)
    extra = {"task": cfg.task, "model": cfg.model_name, "command": command}

    state = {"step": 0, "examples": 0, "best_val": None, "best_examples": None, "seconds": 0.0, "last_loss": None}
    if resume:
        ckpt.load_weights(last_dir, model)
        ckpt.load_optimizer(last_dir, opt)
        state.update(ckpt.load_trainer_state(last_dir))
        _truncate_metrics(run_dir / "metrics.jsonl", state["examples"])
        log(f"resumed {run_dir} at {state['examples']} examples")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps({"relreason": __version__, "config": cfg.to_dict(),
                                                     "command": command}, indent=2))

    def checkpoint(which: Path, with_optimizer: bool) -> None:
        ckpt.save_checkpoint(which, model, cfg, shash, extra, opt if with_optimizer else None,
                             dict(state) if with_optimizer else None)

    def validate() -> float:
        # random positions on validation too, as the reference; the same draw at every validation, so
        # checkpoints are compared on identical inputs (and a resumed run validates as the original)
        gen = torch.Generator().manual_seed(t.seed * 1_000_003 - 1)
        scores = evaluate_dataset(model, val_ds, spec, cfg.model, device, t.eval_batch_size,
                                  scorer=task.scorer(spec), generator=gen)
        rec = {"event": "val", "step": state["step"], "examples": state["examples"], "loss": state["last_loss"],
               **scores_dict(scores), "time": round(state["seconds"], 2)}
        improved = state["best_val"] is None or (scores.score < state["best_val"] if task.lower_is_better
                                                 else scores.score > state["best_val"])
        if improved:
            state["best_val"], state["best_examples"] = float(scores.score), state["examples"]
            checkpoint(best_dir, with_optimizer=False)
        checkpoint(last_dir, with_optimizer=True)
        _append(run_dir / "metrics.jsonl", rec)
        return float(scores.score)

    total = t.train_examples
    bar = progress(total, f"{cfg.model_name} {cfg.task}", unit="ex", disable=not show_progress,
                   initial=state["examples"])
    interrupted = False
    started = time.time() - state["seconds"]
    next_eval = (state["examples"] // t.eval_every_examples + 1) * t.eval_every_examples
    model.train()
    try:
        if state["step"] == 0:
            validate()
        while state["examples"] < total:
            step = state["step"]
            idx = step_indices(t.seed, step, len(train_ds), t.batch_size)
            gen = torch.Generator().manual_seed(t.seed * 1_000_003 + step)
            batch = Batch.from_dataset(trim(train_ds.take(idx)), cfg.model, spec, device, generator=gen)
            out = model(batch, train=True, generator=gen)
            loss, _parts = model.loss(batch, out)
            if not torch.isfinite(loss):
                raise RelreasonError(f"the loss became {loss.item()} at step {step}",
                                     "lower train.lr or train.grad_clip")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip, foreach=True)
            opt.step()
            state["step"] += 1
            state["examples"] += t.batch_size
            state["last_loss"] = float(loss.item())
            state["seconds"] = time.time() - started
            bar.update(t.batch_size)
            if state["examples"] >= next_eval or state["examples"] >= total:
                score = validate()
                next_eval += t.eval_every_examples
                bar.set_postfix(loss=f"{state['last_loss']:.3f}", val=f"{score:.3f}",
                                best=f"{state['best_val']:.3f}")
            else:
                bar.set_postfix(loss=f"{state['last_loss']:.3f}", best=f"{state['best_val']:.3f}", refresh=False)
    except KeyboardInterrupt:
        interrupted = True
        state["seconds"] = time.time() - started
        checkpoint(last_dir, with_optimizer=True)
        log(f"\ninterrupted: saved {last_dir}; continue with --name {run_dir.name} --resume")
    finally:
        bar.close()
    result = RunResult(run_dir, state["step"], state["examples"], state["best_val"], state["best_examples"],
                       seconds=state["seconds"], interrupted=interrupted)
    if interrupted:
        return result
    ckpt.load_weights(best_dir, model)
    test_ds = task.load("test", cfg.data)
    test = evaluate_dataset(model, test_ds, spec, cfg.model, device, t.eval_batch_size, scorer=task.scorer(spec))
    result.test = scores_dict(test)
    result.test_size = test_ds.n
    _append(run_dir / "metrics.jsonl", {"event": "test", "size": test_ds.n, "num": len(test_ds),
                                        "best_examples": state["best_examples"], **result.test})
    summary = {"relreason": __version__, "model": cfg.model_name, "task": cfg.task, "seed": t.seed,
               "recipe": cfg.recipe, "command": command, "steps": state["step"], "examples": state["examples"],
               "seconds": round(state["seconds"], 1), "best_val": state["best_val"],
               "best_examples": state["best_examples"], "test_size": test_ds.n, "test": result.test,
               "config": cfg.to_dict()}
    from relreason.data.store import atomic_path

    with atomic_path(run_dir / "results.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2))
    return result


def _append(path: Path, record: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(record, allow_nan=True) + "\n")


def _truncate_metrics(path: Path, examples: int) -> None:
    """Drops metrics written after the checkpoint we resume from (they will be written again)."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a kill
        if rec.get("event") == "val" and rec.get("examples", 0) <= examples:
            keep.append(line)
    path.write_text("".join(x + "\n" for x in keep))


__all__ = ["RunResult", "run", "build", "resolve_device"]
