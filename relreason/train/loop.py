"""The training loop: `run(config) -> RunResult`, called by `relreason train`, `ablate` and the tests.

    res = run(build_config("mpnn", "bellman_ford", "quick"), out=Path("runs"), name="demo")

Three phases, each a function below: `_open` (the run directory, its lock, resuming), `_train`
(the step loop: Adam at the rate `train.lr_schedule` gives for the examples trained so far
(relreason.schedules), optional global-norm clipping, validation every `eval_every_examples` examples
with the best weights kept) and `_final_test` (the best checkpoint on the OOD test). What
is trained and how it is scored comes from a `Workload` (relreason.train.workloads), so graph
tasks, multi-task runs and text models share this loop.

Determinism: every random draw of step k comes from generators seeded by (seed, k), and the
checkpoint holds the optimizer and the loop counters, so a run resumed from `last/` ends with the
same weights as one never interrupted (on CPU). A validation record is appended to `metrics.jsonl`
before `last/` moves forward, so a kill never loses a line (resuming drops lines written after the
checkpoint it resumes from, and they are written again).

Ctrl-C and SIGTERM stop the loop at the end of the current step (where weights, optimizer and
counters agree) and save `last/` there; a second Ctrl-C stops at once without saving.

Several processes (torchrun, relreason.train.distributed): every process calls `run`; each trains
its rows of every global batch with DistributedDataParallel and evaluates its share of validation
and test; rank 0 alone holds the lock and writes (checkpoints, metrics, results, console). The noise
and the loss normalization make N processes train as one with the same global batch (to float
rounding), so a run may resume with another number of processes.

Run directory `runs/<name>/` (its layout and the records of its files: relreason.rundir): `best/` and
`last/` checkpoints, `config.json` (RunRecord: the resolved config), `metrics.jsonl` (a row per
validation, resume and the final test), `results.json` (RunResults: the summary that `runs`, `compare`
and `export` read) and `.lock` (held while a process trains); with
`train.log=tensorboard` also TensorBoard event files, with `wandb` a W&B run whose id is kept in `wandb.json`
(relreason.tracking: training loss and learning rate every step, the validation and test scores; metrics.jsonl
stays the record).
"""

from __future__ import annotations

import math
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from relreason import __version__
from relreason.config import Config, run_deviation
from relreason.errors import RelreasonError
from relreason.files import check_name, open_for_update
from relreason.models.precision import autocast
from relreason.rundir import (DivergedRow, ResumeRow, RunDir, RunRecord, RunResults, TestRow, TestScores,
                              ValidationRow, check_no_links, read_run_record, row_json, scan_metrics)
from relreason.runtime import RunLock, bars_enabled, code_record, hardware, keep_freed_memory, progress
from relreason.schedules import learning_rate
from relreason.tracking import NullTracker, RunAbout, check_trackers, open_trackers, scalar_tags
from relreason.train import checkpoint as ckpt

# Keys a resumed run may change: they do not alter what already ran (a longer budget continues it; under a
# decaying train.lr_schedule it stretches the decay over the new budget from there on).
RESUMABLE_KEYS = ("train.train_examples", "train.device", "train.threads", "train.eval_batch_size", "train.log",
                  "train.static_step", "train.cuda_graph")
# ... and train.lr may be lowered (a diverged run continues from its last checkpoint), recorded as a deviation
LOWERABLE_KEYS = ("train.lr",)


def resume_refusals(changed: dict[str, tuple]) -> dict[str, tuple]:
    """The changes of `changed` ({key: (old, new)}) that a resume may not make."""
    return {k: (old, new) for k, (old, new) in changed.items() if k not in RESUMABLE_KEYS
            and not (k in LOWERABLE_KEYS and isinstance(old, (int, float)) and isinstance(new, (int, float))
                     and new < old)}


def lowered_deviation(changed: dict[str, tuple], examples: int) -> list[str]:
    """The deviation a resume's lowered keys make: "train.lr lowered from 0.1 to 0.001 at 320 examples"."""
    return [f"{k} lowered from {old} to {new} at {examples} examples (on resume)"
            for k, (old, new) in sorted(changed.items()) if k in LOWERABLE_KEYS]


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


def default_run_name(cfg: Config) -> str:
    task = cfg.task.replace(",", "+").replace(":", "-")
    return f"{cfg.model_name}-{task}-s{cfg.train.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_run_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\\" in name or name.startswith("."):
        raise RelreasonError(f"invalid run name {name!r}", "use a plain name without '/', '..' or a leading '.'")
    check_name(name, "run name")


def config_diff(a: Config, b: Config) -> dict[str, tuple]:
    """{"section.key": (a's value, b's value)} for every key that differs."""
    da, db = a.to_dict(), b.to_dict()
    out = {}
    for key in ("model_name", "task"):
        if da[key] != db[key]:
            out[key] = (da[key], db[key])
    for section in set(da) | set(db):
        if not isinstance(da.get(section), dict) and not isinstance(db.get(section), dict):
            continue
        sa, sb = da.get(section) or {}, db.get(section) or {}
        for k in set(sa) | set(sb):
            if sa.get(k) != sb.get(k):
                out[f"{section}.{k}"] = (sa.get(k), sb.get(k))
    return out


def stored_config(run_dir: Path, warn: bool = True) -> Config:
    """The configuration a run was started with (from its last checkpoint); `warn`: name a plugin installed
    at another version than the run's (checkpoint.load_config)."""
    last = RunDir(run_dir).last
    ckpt.recover(last.path)
    if not last.trainer_state.exists():
        raise RelreasonError(f"nothing to resume in {run_dir}", "start it without --resume")
    return ckpt.load_config(last.path, warn)


def resume_config(run_dir: Path, overrides: list[str], recipe: str | None = None) -> Config:
    """The config to resume a run with: its stored config (the truth: the run's recipe is never looked
    up again by its label, so a recipe file moved or deleted since does not matter), with what the
    command asks applied only where it may change on resume (RESUMABLE_KEYS).

    Without `recipe`, `overrides` (`--set` items) apply over the stored config. With `recipe` (a name
    or a YAML path), the command's configuration is resolved afresh (recipe, then `overrides`) and
    compared with the stored one, so re-running a run's own command with --resume is accepted.

    Raises:
        RelreasonError: the command asks for another value of a key outside RESUMABLE_KEYS (all such
            keys named), or there is nothing to resume.
    """
    from relreason.config import Layer, build_config, parse_overrides, resolve

    stored = stored_config(run_dir)
    plain = stored.to_dict()
    base = [Layer("stored", {s: plain[s] for s in stored.sections()})]
    if recipe is None:
        asked = resolve(stored.model_name, stored.task, base + [Layer("--set", parse_overrides(overrides))],
                        stored.recipe)
    else:
        asked = build_config(stored.model_name, stored.task, recipe, overrides)
    changed = config_diff(stored, asked)
    bad = resume_refusals(changed)
    if bad:
        shown = ", ".join(f"{k}={new!r} (the run has {old!r})" for k, (old, new) in sorted(bad.items()))
        what = "drop --recipe (the run keeps its own) or those --set options" if recipe is not None else \
            "drop those options"
        raise RelreasonError(f"--resume continues the run as it was configured; it cannot change {shown}",
                             f"{what}, or start a new run; only {', '.join(RESUMABLE_KEYS)} may change, and "
                             f"{', '.join(LOWERABLE_KEYS)} may be lowered")
    delta: dict = {}
    for key, (_, new) in changed.items():
        section, name = key.split(".")
        delta.setdefault(section, {})[name] = new
    cfg = resolve(stored.model_name, stored.task, base + [Layer("on resume", delta)], stored.recipe)
    record = _stored_record(run_dir)
    cfg.sources = dict(record.sources) if record is not None and record.sources is not None else stored.sources
    for key in changed:
        cfg.sources[key] = f"{asked.sources.get(key, 'default')} (on resume)"
    recorded = record is not None and "deviation" in record.recorded
    cfg.deviation = record.deviation if recorded else _legacy_deviation(stored)
    return cfg


def _stored_record(run_dir: Path) -> RunRecord | None:
    """The run's config.json as written when it started (sources, recipe deviation, command); None if
    unreadable (the checkpoint's config is the truth; this adds only what it lacks)."""
    try:
        return read_run_record(run_dir)
    except RelreasonError:
        return None


def _legacy_deviation(stored: Config) -> str | None:
    """The recipe's deviation for a run whose config.json predates recording it: read from the recipe
    its label names, when that is still a recipe of this installation (such runs could only have
    trained with a recipe name); None otherwise."""
    from relreason.config import PAPER, paper_recipe, recipe_deviation, recipe_names

    name = paper_recipe(stored.model_name, stored.task) if stored.recipe == PAPER else stored.recipe
    return recipe_deviation(name) if name in recipe_names() else None


def has_progress(run_dir: Path) -> bool:
    """True when a run directory holds a checkpoint or results (a run killed during its very first
    validation left only config.json / metrics.jsonl: nothing to resume, so it may start afresh)."""
    return RunDir(run_dir).has_progress()


def run(cfg: Config, out: Path = Path("runs"), name: str | None = None, resume: bool = False,
        show_progress: bool = True, command: str | None = None, log=None, lock: RunLock | None = None,
        about: RunAbout | None = None) -> RunResult:
    """Trains `cfg.model_name` on `cfg.task`; returns where the run is and how it scored.

    Under torchrun every process calls it (see the module docstring). `lock`: the run directory's lock,
    already held by the caller (`ablate` claims a cell before training it); by default `run` takes it.
    `about`: the run's name, group and job type as trackers show them (a cell's; by default the run's name)."""
    from relreason.train.distributed import Distributed
    from relreason.train.workloads import build_workload

    log = log or (lambda msg: print(msg, file=sys.stderr))
    check_trackers(cfg.train.log)  # a missing tracker package fails before anything is claimed
    if name is not None:
        check_run_name(name)
    if resume and name is None:
        raise RelreasonError("--resume needs the run's --name", "e.g. relreason train mpnn bfs --name myrun --resume")
    keep_freed_memory()
    with Distributed.start(cfg.train.device) as dd:
        if not dd.main:
            log, show_progress = _quiet, False
        # the default name holds rank 0's clock
        run_dir = Path(out) / dd.broadcast(default_run_name(cfg) if name is None else name)
        with _claim(run_dir, resume, dd, lock):
            dd.set_threads(cfg.train.threads)
            workload = build_workload(cfg, dd.device)
            session = None
            try:
                if dd.world > 1 and not workload.supports_distributed:
                    raise RelreasonError(f"{cfg.model_name} does not train on several processes yet",
                                         "run it in one process (without torchrun)")
                session = _Session(cfg, run_dir, workload, command, log, show_progress, dd)
                session.about = about
                session.open(resume)
                interrupted = session.train()
                result = session.result(interrupted)
                if not interrupted:
                    session.final_test(result)
                return result
            finally:
                if session is not None:
                    session.tracker.close()
                workload.close()


def _quiet(msg: str) -> None:
    """The log of ranks other than 0: rank 0 speaks for all."""


def _exists(run_dir: Path) -> RelreasonError:
    return RelreasonError(f"run directory {run_dir} already exists", "pass --resume to continue it or another --name")


@contextmanager
def _claim(run_dir: Path, resume: bool, dd, lock: RunLock | None):
    """Rank 0 takes the run directory's lock (unless `lock` is already held) and checks that a new run
    overwrites nothing; the other ranks wait for the outcome and raise its error too."""
    taken: list[RunLock] = []

    def take() -> None:
        check_no_links(run_dir)
        if not resume and has_progress(run_dir):
            raise _exists(run_dir)
        if lock is None:
            taken.append(RunLock(run_dir).acquire())
        if not resume and has_progress(run_dir):  # another process got here first
            raise _exists(run_dir)

    try:
        dd.on_main(take)
        yield
    finally:
        for held in taken:
            held.release()


class _Session:
    """One process training one run directory (the state `run` threads through its phases); with
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
            _truncate_metrics(self.metrics, self.state["examples"])
            _append(self.metrics, ResumeRow(examples=self.state["examples"],
                                            changed={k: list(v) for k, v in changed.items()}, processes=self.dd.world))
            self.log(f"resumed {self.run_dir} at {self.state['examples']} examples"
                     + (f" (changed: {', '.join(sorted(changed))})" if changed else ""))
        else:
            self.metrics.unlink(missing_ok=True)  # leftovers of a run killed before its first checkpoint
            if t.init is not None:  # fine-tuning: the source's weights replace the fresh ones (resume has its own)
                source = ckpt.load_init(t.init, cfg, self.wl.model)
                self.log(f"initialised from {source}")
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
        from relreason.data.specs import spec_hash

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
            from relreason.train.workloads import Shard

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
        improved = st["best_val"] is None or (score < st["best_val"] if self.wl.lower_is_better else score > st["best_val"])
        if self.dd.main:
            _append(self.metrics, rec)  # first: a kill after this line re-validates on resume, never loses it
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
            with _StopRequests(self.log) as requests:
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
            self.log(f"\nstopped without saving; --name {self.run_dir.name} --resume continues from the last "
                     f"checkpoint")
            return True
        finally:
            bar.close()
        if stop:
            st["seconds"] = time.time() - started
            self.checkpoint(self.last_dir, with_optimizer=True)
            self.log(f"\ninterrupted: saved {self.last_dir}; continue with --name {self.run_dir.name} --resume")
            return True
        return False

    def captured_step(self, replay: str = "cuda"):
        """The step as CUDA graphs (train.cuda_graph; relreason.train.cuda_graphs), refused where it cannot be."""
        from relreason.train.cuda_graphs import CapturedStep, captured_loss, check_capturable

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
            _append(self.metrics, DivergedRow(step=step, examples=st["examples"], loss=str(loss)))
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
        t, st = self.cfg.train, self.state
        st["step"] += 1
        st["examples"] += t.batch_size
        st["last_loss"] = sum(losses) / len(losses)
        st["seconds"] = time.time() - started
        self.tracker.scalars(st["examples"], {"train/loss": st["last_loss"], "train/lr": rate})
        bar.update(t.batch_size)
        if st["examples"] >= self.next_eval or st["examples"] >= t.train_examples:
            score = self.validate()
            self.next_eval += t.eval_every_examples
            bar.set_postfix(loss=_fmt(st["last_loss"]), val=f"{score:.3f}", best=f"{st['best_val']:.3f}")
        else:
            bar.set_postfix(loss=_fmt(st["last_loss"]), best=f"{st['best_val']:.3f}", refresh=False)

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
        _append(self.metrics, TestRow(size=res["size"], num=res["num"], label=res["label"],
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
                             plugins=ckpt.plugin_record(cfg), code=st.get("code") or [code_record()])
        _write_json(self.files.results, summary.to_json())


def adam(params, lr: float) -> torch.optim.Adam:
    """The loop's optimizer: Adam with torch's defaults (betas 0.9, 0.999, eps 1e-8, as the reference's
    optax.adam), its fused kernel updating every parameter in one pass (CPU and CUDA): 4-5 -> 1.5 ms
    per step for the RT's 107 tensors on one CPU thread, the same update to float rounding."""
    return torch.optim.Adam(params, lr=lr, fused=True)


def clip_grad_norm(model: torch.nn.Module, max_norm: float) -> torch.Tensor:
    """Global-norm clipping as torch's clip_grad_norm_ (same coefficient), but out of place: autograd
    may give several parameters views of one gradient buffer (the encoders' biases, summed in the
    forward), and scaling in place would scale that buffer once per parameter. Returns the norm."""
    params = [p for p in model.parameters() if p.grad is not None]
    grads = [p.grad for p in params]
    norm = torch.nn.utils.get_total_norm(grads, foreach=True)
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for p, g in zip(params, grads):
        p.grad = g * coef
    return norm


def _desc(cfg: Config) -> str:
    return f"{cfg.model_name} {cfg.task}"


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"


class _StopRequests:
    """Ctrl-C and SIGTERM (a scheduler's stop, `kill`, torchrun passing either on) set `requested`: the
    loop stops after the current step, where weights, optimizer and counters agree, and saves there.
    A second Ctrl-C, PATIENCE seconds or more after the first, stops at once without saving. Only the
    main thread can catch signals (elsewhere nothing is installed), and an ignored SIGINT (a job
    started in the background) stays ignored."""

    PATIENCE = 2.0  # s: torchrun passes on the Ctrl-C the terminal already delivered: that is not a second one

    def __init__(self, log):
        self.log, self.requested, self._first = log, False, 0.0
        self._old: dict = {}

    def __enter__(self) -> "_StopRequests":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum, frame) -> None:
        import signal

        now = time.monotonic()
        if not self.requested:
            self.requested, self._first = True, now
            self.log("\nstopping after this step (it saves a checkpoint to resume from); Ctrl-C again stops at once")
        elif signum == signal.SIGINT and now - self._first >= self.PATIENCE:
            raise KeyboardInterrupt


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
    from relreason.data.store import atomic_path

    with atomic_path(path) as tmp:
        tmp.write_text(text)


def _append(path: Path, row) -> None:
    """Appends one row (relreason.rundir) to metrics.jsonl, flushed: a kill loses at most this line."""
    with open(path, "a", opener=open_for_update) as f:  # the run's own file: no link, no hard link, no FIFO
        f.write(row_json(row) + "\n")
        f.flush()


def _truncate_metrics(path: Path, examples: int) -> None:
    """Drops the validation, resume and test rows written after the checkpoint we resume from (they will
    be written again), and a last line cut by a kill while it wrote a row after that checkpoint. Rows
    of divergences and of events this version does not know are kept.

    Raises:
        RelreasonError: another line is damaged (edited, or a row of this checkpoint cut): the file is
            the run's record and is left as it is."""
    if not path.exists():
        return
    rows, damaged = scan_metrics(path)
    text = path.read_text(errors="replace")
    lines = text.splitlines()
    intact = [row for _, _, row in rows if isinstance(row, (ValidationRow, ResumeRow))]
    kill_cut = (not text.endswith("\n") and intact and intact[-1].examples == examples and damaged
                and damaged[-1][0] == len(lines))
    damaged = damaged[:-1] if kill_cut else damaged
    if damaged:
        more = f" (and {len(damaged) - 1} more damaged line(s))" if len(damaged) > 1 else ""
        raise RelreasonError(f"cannot resume: {damaged[0][1]}{more}",
                             f"{path} is the run's record, so it is not rewritten while a line is damaged: "
                             "repair or delete that line, then resume")
    drop = {i for i, _, row in rows if isinstance(row, TestRow)
            or (isinstance(row, (ValidationRow, ResumeRow)) and row.examples > examples)}
    keep = [line for i, line in enumerate(lines, 1) if i not in drop and line.strip() and not
            (kill_cut and i == len(lines))]
    from relreason.data.store import atomic_path

    with atomic_path(path) as tmp:
        tmp.write_text("".join(x + "\n" for x in keep))


__all__ = ["RunResult", "run", "resume_config", "stored_config", "config_diff", "check_run_name"]
