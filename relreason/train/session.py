"""One process training one run directory (`Session`): the state `relreason.train.run` threads through
its three phases, and what the run returns (`RunResult`).

    session = Session(cfg, run_dir, workload, command, log, show_progress, dd)
    session.open(resume)                 # phase 1: the run directory, resuming, trackers
    interrupted = session.train()        # phase 2: the step loop, validations, checkpoints
    result = session.result(interrupted)
    session.final_test(result)           # phase 3: the best checkpoint on the OOD test

Phase 2 is Adam (relreason.train.optimizer) at the rate `train.lr_schedule` gives for the examples trained
so far (relreason.schedules), optional global-norm clipping, and validation every `eval_every_examples`
examples with the best weights kept. The pieces of one step (`set_rate`, `update`, `finish_step`: `count_step`
then `validate_due`) are public: a seed group (relreason.train.seed_group) runs K sessions through its own
shared step.

The session writes the run directory's files (relreason.rundir's records; metrics.jsonl through
relreason.train.metrics_file) and, with several processes, rank 0 alone writes while every rank trains.
Claiming the directory first is relreason.train.claim's, a resume's configuration relreason.train.resume's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from relreason import __version__
from relreason.config import Config, run_deviation
from relreason.data.store import atomic_path
from relreason.errors import RelreasonError
from relreason.models.precision import autocast
from relreason.rundir import (DivergedRow, ResumeRow, RunDir, RunRecord, RunResults, TestRow, TestScores,
                              ValidationRow)
from relreason.data.specs import spec_hash
from relreason.runtime import bars_enabled, code_record, hardware, progress
from relreason.schedules import learning_rate
from relreason.tracking import NullTracker, RunAbout, open_trackers, scalar_tags
from relreason.train import checkpoint as ckpt
from relreason.train.cuda_graphs import CapturedStep, captured_loss, check_capturable
from relreason.train.metrics_file import append_row, truncate_metrics
from relreason.train.optimizer import adam, clip_grad_norm
from relreason.train.resume import config_diff, lowered_deviation, resume_refusals, stored_config
from relreason.train.stop_requests import StopRequests
from relreason.train.workloads import Shard


@dataclass
class RunResult:
    run_dir: Path
    steps: int
    examples: int
    best_val: float | None
    best_examples: int | None
    test: dict = field(default_factory=dict)  # score, outputs, hints (, per_task) of the best checkpoint at the OOD size
    seconds: float = 0.0  # training, validations and the final test
    interrupted: bool = False
    test_size: int = 0  # nodes of the OOD test graphs (padded size for variable-size tasks)
    test_label: str = ""  # "test, n=64, 32 samples"
    metric: str = "clrs"
    lower_is_better: bool = False
    deviation: str | None = None  # the recipe's own statement of how it departs from the papers


class Session:
    """One process training one run directory (the state relreason.train.run threads through its phases); with
    several processes, `dd` (relreason.train.distributed) is its place in the group."""

    def __init__(self, cfg: Config, run_dir: Path, workload, command: str | None, log, show_progress: bool, dd):
        self.cfg, self.run_dir, self.wl, self.command, self.log = cfg, run_dir, workload, command, log
        self.show_progress, self.dd = show_progress, dd
        self.files = RunDir(run_dir)
        self.last_dir, self.best_dir = self.files.last.path, self.files.best.path
        self.metrics = self.files.metrics
        self.opt = adam(workload.model.parameters(), cfg.train.lr)
        self.state = {"step": 0, "examples": 0, "best_val": None, "best_examples": None, "seconds": 0.0,
                      "last_loss": None}
        self.extra = {"task": cfg.task, "model": cfg.model_name, "command": command}
        self.deviation = run_deviation(cfg)
        self.tracker = NullTracker()  # rank 0 opens train.log's trackers with the run directory
        self.about: RunAbout | None = None  # the name, group and job type trackers show (run's `about`)
        self.resumed = False  # from a checkpoint: its validation (the step-0 one too) is in metrics.jsonl
        self.resume_hint = f"--name {run_dir.name} --resume"  # what continues the run, said when interrupted

    # -- phase 1: the run directory ------------------------------------------------------------

    def open(self, resume: bool) -> None:
        self.dd.on_main(lambda: self._open_directory(resume))
        if self.dd.main:
            about = self.about or RunAbout(self.run_dir.name)
            about = RunAbout(about.name, self.cfg.to_dict(), self.command, tuple(self.state.get("hardware", ())),
                             about.group, about.job_type)
            self.tracker = open_trackers(self.cfg.train.log, self.run_dir, self.state["examples"] if resume else None,
                                         about)
        if resume and self.dd.world > 1:
            self._share(with_optimizer=True)
        elif self.cfg.train.init is not None and self.dd.world > 1:  # rank 0 read the --init weights
            self._share(with_optimizer=False)

    def _share(self, with_optimizer: bool) -> None:
        """Rank 0's weights (and optimizer and counters) on every rank, which need not see its files."""
        dd, model = self.dd, self.wl.model
        mine = (_cpu(model.state_dict()), _cpu(self.opt.state_dict()) if with_optimizer else None,
                dict(self.state)) if dd.main else None
        weights, optimizer, state = dd.broadcast(mine)
        if not dd.main:
            model.load_state_dict(weights)
            if with_optimizer:
                self.opt.load_state_dict(optimizer)
                self.state.update(state)

    def _open_directory(self, resume: bool) -> None:
        cfg, t = self.cfg, self.cfg.train
        if resume:
            stored = stored_config(self.run_dir)
            changed = config_diff(stored, cfg)
            bad = resume_refusals(changed)
            if bad:
                raise RelreasonError(f"cannot resume {self.run_dir} with a different configuration "
                                     f"({', '.join(sorted(bad))} differ)",
                                     "resume with the run's own options (relreason train ... --name NAME --resume)")
            ckpt.load_weights(self.last_dir, self.wl.model)
            ckpt.load_optimizer(self.last_dir, self.opt)
            self.state.update(ckpt.load_trainer_state(self.last_dir))
            if self.state["examples"] > t.train_examples:
                raise RelreasonError(f"the run has trained {self.state['examples']} examples, more than "
                                     f"train.train_examples={t.train_examples}", "give a budget at least that large")
            self.resumed = True
            lowered = [note for note in lowered_deviation(changed, self.state["examples"])
                       if note not in (cfg.deviation or "")]
            if lowered:  # the run's record keeps it (config.json below, results.json at the end)
                cfg.deviation = "; ".join([*([cfg.deviation] if cfg.deviation else []), *lowered])
                self.deviation = run_deviation(cfg)
            truncate_metrics(self.metrics, self.state["examples"])
            append_row(self.metrics, ResumeRow(examples=self.state["examples"],
                                               changed={k: list(v) for k, v in changed.items()},
                                               processes=self.dd.world))
            self.log(f"resumed {self.run_dir} at {self.state['examples']} examples"
                     + (f" (changed: {', '.join(sorted(changed))})" if changed else ""))
        else:
            problem = self.wl.fresh_start_problem() if t.init is None else None
            if problem is not None:
                raise RelreasonError(problem, "train that NAR again (its recorded config) where model.nar points, or "
                                              "--set model.nar=RUN to a trained NAR run")
            self.metrics.unlink(missing_ok=True)  # leftovers of a run killed before its first checkpoint
            if t.init is not None:  # fine-tuning: the source's weights replace the fresh ones (resume has its own)
                source = ckpt.load_init(t.init, cfg, self.wl.model)
                self.log(f"initialised from {source}")
            # what it starts from, kept through every resume: `reproduce --verify` compares a re-training's with it
            self.state["init_weights"] = ckpt.tensors_digest(self.wl.model.state_dict())
        here = hardware(str(self.dd.device)) + (f", {self.dd.world} processes" if self.dd.world > 1 else "")
        if here not in self.state.setdefault("hardware", []):  # every machine a session of the run trained on
            self.state["hardware"].append(here)
        code = code_record()
        if code not in self.state.setdefault("code", []):  # every code a session of the run trained with
            self.state["code"].append(code)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        _write_json(self.files.config, RunRecord(relreason=__version__, config=cfg.to_dict(), sources=cfg.sources,
                                                 deviation=cfg.deviation, command=self.command,
                                                 plugins=ckpt.plugin_record(cfg), code=code).to_json())

    def checkpoint(self, which: Path, with_optimizer: bool) -> None:
        if not self.dd.main:
            return
        ckpt.save_checkpoint(which, self.wl.model, self.cfg, self._spec_hash(), self.extra,
                             self.opt if with_optimizer else None, dict(self.state) if with_optimizer else None)

    def _spec_hash(self) -> str:
        specs = getattr(getattr(self.wl, "built", None), "specs", None)
        if not specs:
            return getattr(self.wl, "spec_hash", "")
        return spec_hash({f"{t}/{k}": f for t, s in specs.items() for k, f in s.items()})

    # -- phase 2: training ---------------------------------------------------------------------

    def evaluate(self, split: str, desc: str, draw: int | None = None) -> dict:
        """The workload's scores on `split`; with several processes each scores its share and all get
        the merged scores (equal to one process's). `draw`: the validation's own draw (Workload.evaluate)."""
        dd = self.dd
        with progress(self.wl.eval_total(split), desc, unit="ex", disable=not self.show_progress) as bar:
            if dd.world == 1:
                return self.wl.evaluate(split, on_examples=bar.update, draw=draw)

            return self.wl.evaluate(split, on_examples=lambda k: bar.update(k * dd.world),  # rank 0's share
                                    shard=Shard(dd.rank, dd.world, dd.gather), draw=draw)

    def validate(self) -> float:
        st = self.state
        res = self.evaluate("val", "validation", draw=st["examples"])
        per_task = {k: {"score": v["score"], "outputs": v["outputs"]} for k, v in res["per_task"].items()} \
            if res.get("per_task") else None
        rec = ValidationRow(step=st["step"], examples=st["examples"], loss=st["last_loss"], score=res["score"],
                            outputs=res["outputs"], hints=res["hints"], time=round(st["seconds"], 2), per_task=per_task)
        score = float(res["score"])
        improved = self.cfg.train.select == "last" or st["best_val"] is None or \
            (score < st["best_val"] if self.wl.lower_is_better else score > st["best_val"])
        if self.dd.main:
            append_row(self.metrics, rec)  # first: a kill after this line re-validates on resume, never loses it
            self.tracker.scalars(st["examples"], scalar_tags("val", {k: getattr(rec, k) for k in
                                                                     ("score", "outputs", "hints", "per_task")}))
        if improved:
            st["best_val"], st["best_examples"] = score, st["examples"]
            self.checkpoint(self.best_dir, with_optimizer=False)
        self.checkpoint(self.last_dir, with_optimizer=True)
        if self.show_progress and not bars_enabled():
            self.log(f"{st['examples']} examples: loss {_fmt(st['last_loss'])}, validation {score:.4f}, "
                     f"best {st['best_val']:.4f}")
        return score

    def train(self) -> bool:
        """Runs steps until the budget; returns True when interrupted (Ctrl-C / SIGTERM)."""
        cfg, t, st, dd = self.cfg, self.cfg.train, self.state, self.dd
        model = self.wl.model
        module = dd.wrap(model)
        bar = progress(t.train_examples, _desc(cfg), unit="ex", disable=not self.show_progress,
                       initial=st["examples"])
        started = time.time() - st["seconds"]
        self.next_eval = (st["examples"] // t.eval_every_examples + 1) * t.eval_every_examples
        model.train()
        captured = self.captured_step() if t.cuda_graph else None
        stop = False
        try:
            with StopRequests(self.log) as requests:
                if st["step"] == 0 and not self.resumed:
                    self.validate()
                while st["examples"] < t.train_examples and not stop:
                    step = st["step"]
                    rate = self.set_rate()
                    losses = []
                    for part in self.wl.step_batches(step, dd.rank, dd.world):
                        if captured is not None:  # forward and backward replayed; the .grad are set
                            loss = captured(part.batch, part.noise)
                        else:
                            with autocast(t.precision, dd.device):  # bf16: the forward only
                                loss, _terms = self.wl.loss(module, part, step)
                        # one exchange per update: the global batch's loss (the mean of the ranks') and
                        # whether any rank was asked to stop, so that all stop after the same step
                        total, asked = dd.sum([float(loss.detach()), float(requests.requested)])
                        value, stop = total / dd.world, stop or asked > 0
                        if not math.isfinite(value):
                            raise self.diverged(step, value)
                        if captured is None:
                            self.opt.zero_grad(set_to_none=True)
                            loss.backward()
                        self.update()
                        losses.append(value)
                    self.finish_step(losses, rate, started, bar)
        except KeyboardInterrupt:  # a second Ctrl-C: the step may be half done, so nothing is saved
            self.log(f"\nstopped without saving; {self.resume_hint} continues from the last checkpoint")
            return True
        finally:
            bar.close()
        if stop:
            st["seconds"] = time.time() - started
            self.checkpoint(self.last_dir, with_optimizer=True)
            self.log(f"\ninterrupted: saved {self.last_dir}; continue with {self.resume_hint}")
            return True
        return False

    def captured_step(self, replay: str = "cuda"):
        """The step as CUDA graphs (train.cuda_graph; relreason.train.cuda_graphs), refused where it cannot be."""
        if replay == "cuda":
            check_capturable(self.cfg, self.dd.device, self.dd.world, self.wl)
        model = self.wl.model
        return CapturedStep(captured_loss(self.wl, model, self.cfg.train.precision, self.dd.device),
                            list(model.parameters()), self.dd.device, replay)

    def diverged(self, step: int, loss: float) -> RelreasonError:
        """Records that the loss of `step` was not finite (a DivergedRow: `runs` says "diverged") and
        returns the error to stop with; nothing of that step was applied or saved."""
        st, t = self.state, self.cfg.train
        if self.dd.main:
            append_row(self.metrics, DivergedRow(step=step, examples=st["examples"], loss=str(loss)))
        fixes = "lower train.lr" + (" or set train.grad_clip" if t.grad_clip is None else "")
        return RelreasonError(f"the run diverged: the loss became {loss} at step {step}; {self.last_dir} holds the "
                              "last checkpoint before it",
                              f"{fixes}: a new run, or this one continued with --name {self.run_dir.name} --resume "
                              f"--set train.lr=LOWER (recorded as a deviation)")

    # the pieces of one step, shared with seed groups (relreason.train.seed_group), in the order they run

    def set_rate(self) -> float:
        """Sets and returns the step's learning rate: a function of the examples trained (exact on resume)."""
        rate = learning_rate(self.cfg.train, self.state["examples"])
        for group in self.opt.param_groups:
            group["lr"] = rate
        return rate

    def update(self) -> None:
        """After the backward: this run's own global-norm clipping (if any), then its Adam step."""
        if self.cfg.train.grad_clip is not None:
            clip_grad_norm(self.wl.model, self.cfg.train.grad_clip)
        self.opt.step()

    def finish_step(self, losses: list[float], rate: float, started: float, bar) -> None:
        """Counters, tracker and progress after a step's updates; validates (and checkpoints) when due."""
        bar.update(self.cfg.train.batch_size)
        if self.count_step(losses, rate, started):
            score = self.validate_due()
            bar.set_postfix(loss=_fmt(self.state["last_loss"]), val=f"{score:.3f}", best=f"{self.state['best_val']:.3f}")
        else:
            bar.set_postfix(loss=_fmt(self.state["last_loss"]), best=f"{self.state['best_val']:.3f}", refresh=False)

    def count_step(self, losses: list[float], rate: float, started: float) -> bool:
        """The counters and tracker after a step's updates; returns whether a validation is due now (then
        `validate_due` runs it: a pack runs its cells' due validations side by side, relreason.train.seed_group)."""
        t, st = self.cfg.train, self.state
        st["step"] += 1
        st["examples"] += t.batch_size
        st["last_loss"] = sum(losses) / len(losses)
        st["seconds"] = time.time() - started
        self.tracker.scalars(st["examples"], {"train/loss": st["last_loss"], "train/lr": rate})
        return st["examples"] >= self.next_eval or st["examples"] >= t.train_examples

    def validate_due(self) -> float:
        """The validation `count_step` found due (and its checkpoints); returns its score."""
        score = self.validate()
        self.next_eval += self.cfg.train.eval_every_examples
        return score

    def result(self, interrupted: bool) -> RunResult:
        st = self.state
        return RunResult(self.run_dir, st["step"], st["examples"], st["best_val"], st["best_examples"],
                         seconds=st["seconds"], interrupted=interrupted, metric=self.wl.metric,
                         lower_is_better=self.wl.lower_is_better, deviation=self.deviation)

    # -- phase 3: the final test ---------------------------------------------------------------

    def final_test(self, result: RunResult) -> None:
        cfg, st = self.cfg, self.state
        t0 = time.time()
        self.dd.on_main(lambda: ckpt.load_weights(self.best_dir, self.wl.model))
        if self.dd.world > 1:
            self._share(with_optimizer=False)
        res = self.evaluate("test", "final test")
        result.test = {k: res[k] for k in ("score", "outputs", "hints")}
        if res.get("per_task"):
            result.test["per_task"] = res["per_task"]
        result.test_size, result.test_label = res["size"], res["label"]
        result.seconds = st["seconds"] + (time.time() - t0)
        if not self.dd.main:
            return
        test = TestScores(score=res["score"], outputs=res["outputs"], hints=res["hints"],
                          per_task=res["per_task"] if res.get("per_task") else None)
        append_row(self.metrics, TestRow(size=res["size"], num=res["num"], label=res["label"],
                                         best_examples=st["best_examples"], **vars(test)))
        self.tracker.scalars(st["examples"], scalar_tags("test", result.test))
        summary = RunResults(relreason=__version__, model=cfg.model_name, task=cfg.task, tasks=cfg.tasks,
                             seed=cfg.train.seed, recipe=cfg.recipe, deviation=self.deviation, command=self.command,
                             metric=self.wl.metric, lower_is_better=self.wl.lower_is_better,
                             steps=st["step"], examples=st["examples"], processes=self.dd.world,
                             seconds=round(result.seconds, 1),
                             hardware=st.get("hardware") or [hardware(str(self.dd.device))],
                             train_seconds=round(st["seconds"], 1), best_val=st["best_val"],
                             best_examples=st["best_examples"], test_size=res["size"], test_label=res["label"],
                             test=test, per_task=res.get("per_task") or {}, config=cfg.to_dict(),
                             plugins=ckpt.plugin_record(cfg), code=st.get("code") or [code_record()],
                             init_weights=st.get("init_weights"))
        _write_json(self.files.results, summary.to_json())


def _desc(cfg: Config) -> str:
    return f"{cfg.model_name} {cfg.task}"


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _cpu(obj):
    """A state dict with every tensor on the CPU (for broadcasting between ranks on other devices)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cpu(v) for v in obj)
    return obj


def _write_json(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


__all__ = ["RunResult", "Session"]
