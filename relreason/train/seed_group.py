"""Seed groups: K seeds of one configuration trained in one process, each exactly its own run.

    results = run_group(cfg, seeds=[0, 1, 2, 3], out=Path("runs"), names=["a-s0", ..., "a-s3"])

Each seed is a full single run (relreason.train.session's `Session`): its own workload, so its own
initialisation (`torch.manual_seed(seed)` at build), data order and noise (`derive_seed(seed, ...)`),
Adam state, gradient clipping, validation, best checkpoint and run directory with the files a single
run writes. Only the step's forward and backward are shared, in one of two ways (`Strategy`):

- `vmap`: the K models' parameters are stacked on a leading seed axis (differentiably: each slice's
  gradient lands in its own model's `.grad`), the K batches stacked likewise (hint trajectories padded
  to the group's longest, graphs to its largest), and one `torch.vmap` of the shape-static forward
  (relreason.models.net: finished samples masked, not dropped) and loss over the seed axis gives the
  K losses; one backward. The noise of seed k is its own (`SeedNoise`: every draw is made by each
  seed's own stream, as alone, and seed k's slice picked under vmap). Models run their plain autograd
  kernels there (relreason.models.kernels.plain_autograd). Then each seed clips its own gradients
  (the global norm is per seed) and steps its own Adam.
- `loop`: the K steps one after the other, each the single run's own code (for what vmap cannot
  run: multi-task workloads, text models, sparse graphs, several processes), bit for bit its single run.

With `train.cuda_graph` either is replayed from CUDA graphs (relreason.train.cuda_graphs): the vmapped step
as one graph per padded batch shape for the K seeds, the loop each member's own captured step, on its own
CUDA stream (so the K members' kernels overlap; relreason.train.pack packs cells of different tasks so).

`auto` (the default) is vmap on an accelerator where every member allows it, and the loop on CPU, where
the vmapped step measured slower than K single runs (scripts/bench_seeds.py; ratios in
relreason/studies/costs.json).

Numbers: a seed's initial weights equal its single run's bit for bit; its first loss and gradients to
float rounding (batched kernels round otherwise); a short run's weights to what Adam makes of that
rounding (tests/train/test_seed_batch.py). Every file of the run directory is written by the same code
as a single run's; with `vmap` the member's config records `train.static_step: true`, the step it ran
(its single-run twin sets it too).

Resume: each member resumes from its own `last/`. A kill may land between two members' checkpoints,
leaving them at different steps: the group then steps only the members at the earliest step until
all agree (each member's numbers do not depend on which others share its step).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.func import functional_call

from relreason.config import Config
from relreason.errors import RelreasonError
from relreason.models.batch import Batch
from relreason.models.config import SparseMode
from relreason.models.kernels import plain_autograd
from relreason.models.noise import Noise
from relreason.models.precision import set_tf32
from relreason.protocol import setting_identity
from relreason.runtime import RunLock, keep_freed_memory, progress
from relreason.tracking import check_trackers
from relreason.train import cuda_graphs  # called through the module: tests replace CapturedStep there
from relreason.train.claim import claim
from relreason.train.distributed import Distributed
from relreason.train.loop import check_run_name, default_run_name
from relreason.train.session import Session
from relreason.train.stop_requests import StopRequests
from relreason.train.workloads import NarWorkload, build_workload


class Strategy(str, enum.Enum):
    AUTO = "auto"  # vmap on an accelerator where it applies, else loop (on CPU vmap measured slower)
    VMAP = "vmap"  # one batched forward and backward over the seed axis
    LOOP = "loop"  # the members' steps one after the other, in one process


@dataclass(frozen=True)
class SeedNoise(Noise):
    """The noise of K seeds under `torch.vmap`: `members[k]` is seed k's own `Noise` (drawn for its whole
    batch, as in its single run); `index` is the seed axis' position (a (K,) tensor entered into vmap, so
    inside it is each seed's own 0-d index). A draw makes every member's draw and keeps seed k's."""

    members: tuple = ()
    index: torch.Tensor | None = None

    def at(self, site, *keys: int) -> "SeedNoise":
        return dataclasses.replace(self, members=tuple(m.at(site, *keys) for m in self.members))

    def select(self, index: torch.Tensor | None) -> "SeedNoise":
        if index is not None:
            raise ValueError("a seed group runs the shape-static step: no sample is selected out")
        return self

    def uniform(self, shape, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        draws = torch.stack([m.uniform(shape, device, dtype) for m in self.members])  # (K, *shape)
        return torch.index_select(draws, 0, self.index.reshape(1).to(device)).squeeze(0)  # seed k's, under vmap


def group_names(base: str, seeds: list[int]) -> list[str]:
    """Run names of a group's members: `base-s{seed}` each."""
    return [f"{base}-s{s}" for s in seeds]


def seed_configs(cfg: Config, seeds: list[int]) -> list[Config]:
    """The members' configs: `cfg` with `train.seed` set to each seed (its source says so)."""
    if not seeds:
        raise RelreasonError("--seeds needs at least one seed", "e.g. --seeds 0,1,2,3")
    if len(set(seeds)) != len(seeds):
        raise RelreasonError(f"--seeds repeats a seed: {seeds}", "give each seed once")
    if any(s < 0 for s in seeds):
        raise RelreasonError(f"--seeds must be non-negative, got {seeds}", "e.g. --seeds 0,1,2")
    out = []
    for s in seeds:
        c = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, seed=s), sources=dict(cfg.sources))
        c.deviation = cfg.deviation
        c.sources["train.seed"] = "--seeds"
        out.append(c)
    return out


def vmap_problems(cfg: Config, workload, world: int = 1) -> list[str]:
    """Why a member cannot take part in the vmapped step ([] when it can)."""
    out = []
    if not isinstance(workload, NarWorkload):
        out.append(f"{cfg.model_name} is not a graph (NAR) model")
    elif workload.built.multi:
        out.append("multi-task runs take one update per task")
    elif cfg.model.sparse is SparseMode.ALWAYS:
        out.append("model.sparse: always (the shape-static step is dense)")
    if world > 1:
        out.append("several processes")
    if getattr(cfg.processor, "dropout", 0):
        out.append(f"{cfg.model_name}'s processor.dropout draws from torch's global generator")
    return out


def run_group(cfg: Config, seeds: list[int], out: Path = Path("runs"), names: list[str] | None = None,
              resume: bool = False, show_progress: bool = True, command: str | None = None, log=None,
              strategy: Strategy | str = Strategy.AUTO, locks: list[RunLock] | None = None) -> list:
    """Trains `cfg` once per seed in one process (module docstring); returns each seed's RunResult.

    Args:
        names: the members' run names (default: `group_names` of the default run name).
        strategy: `Strategy` (auto: vmap where every member allows it, on an accelerator).
        locks: the members' run-directory locks, already held by the caller.

    Raises:
        RelreasonError: bad seeds or names, a run directory that exists (without resume), vmap asked
            where it does not apply (its reasons named)."""
    members = seed_configs(cfg, list(seeds))
    if names is None:
        names = group_names(default_run_name(cfg).replace(f"-s{cfg.train.seed}-", "-"), list(seeds))
    if len(names) != len(members) or len(set(names)) != len(names):
        raise RelreasonError("a seed group needs one distinct run name per seed", f"got {names}")
    for n in names:
        check_run_name(n)
    return train_members(members, [Path(out) / n for n in names], [resume] * len(members), show_progress,
                         command, log, strategy, locks)


def train_members(members: list[Config], run_dirs: list[Path], resume: list[bool], show_progress: bool = True,
                  command: str | None = None, log=None, strategy: Strategy | str = Strategy.AUTO,
                  locks: list[RunLock] | None = None, abouts: list | None = None,
                  resume_hint: str = "--resume") -> list:
    """Trains one seed group whose members are given whole: `members[k]` (configs of one setting that differ
    in their seed) into `run_dirs[k]`, resuming its checkpoint where `resume[k]` (`reproduce` and `ablate`
    group their cells so: each cell's own config, directory and state). Returns each member's RunResult.

    `strategy` auto runs vmap on an accelerator where every member allows it, and the loop on CPU, where
    the vmapped step measured slower than the single runs (scripts/bench_seeds.py, recorded in
    relreason/studies/costs.json). `abouts`: each member's RunAbout for its trackers (a cell's label, study
    and variant), as `relreason.train.run`'s `about`. `resume_hint`: what continues the group when it is
    interrupted (a study's: its command)."""
    strategy = Strategy(strategy)
    if len({json.dumps(setting_identity(c.to_dict()), sort_keys=True) for c in members}) > 1:
        raise RelreasonError("a seed group's members must differ in their seed alone",
                             "group the runs of one configuration")

    def before_build(dd) -> None:
        if strategy is Strategy.VMAP or (strategy is Strategy.AUTO and dd.device.type != "cpu"):
            for c in members:  # what the vmapped step runs, recorded (a single-run twin sets it too)
                if not c.train.static_step:
                    c.train = dataclasses.replace(c.train, static_step=True)
                    c.sources["train.static_step"] = "seed group (vmap)"

    with claimed_sessions(members, run_dirs, resume, command, log, locks, abouts, "a seed group",
                          before_build) as (sessions, dd):
        want_vmap = strategy is Strategy.VMAP or (strategy is Strategy.AUTO and dd.device.type != "cpu")
        problems = sorted({p for s in sessions for p in vmap_problems(s.cfg, s.wl, dd.world)})
        if strategy is Strategy.VMAP and problems:
            raise RelreasonError(f"this seed group cannot run vmapped: {'; '.join(problems)}",
                                 "use the loop strategy (--seed-strategy loop)")
        use_vmap = want_vmap and not problems
        if not use_vmap:
            for s, c in zip(sessions, members):  # the loop runs each member's own step: as configured
                if c.sources.get("train.static_step") == "seed group (vmap)":
                    c.train = dataclasses.replace(c.train, static_step=False)
                    del c.sources["train.static_step"]
                    s.cfg, s.wl.cfg = c, c
        for s, again in zip(sessions, resume):
            s.open(again)
        return train_and_test(SeedGroup(sessions, use_vmap, capture=members[0].train.cuda_graph,
                                        resume_hint=resume_hint), show_progress, log or _stderr)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)


@contextmanager
def claimed_sessions(members: list[Config], run_dirs: list[Path], resume: list[bool], command: str | None, log,
                     locks: list[RunLock] | None, abouts: list | None, what: str, before_build=None):
    """Claims each member's run directory (its lock, or `locks[k]` already held), builds its workload and
    `Session` in one process, and yields (sessions, dd); closes their trackers and workloads on the way out.
    `what` names the group in errors ("a seed group", "a pack"); `before_build(dd)` may adjust the configs
    once the device is known. Shared by seed groups and packs (relreason.train.pack)."""
    log = log or _stderr
    for c in members:
        check_trackers(c.train.log)  # a missing tracker package fails before anything is claimed
    keep_freed_memory()
    with Distributed.start(members[0].train.device) as dd, ExitStack() as stack:
        if dd.world > 1:
            raise RelreasonError(f"{what} trains in one process", "run it without torchrun")
        if before_build is not None:
            before_build(dd)
        if len({c.train.tf32 for c in members}) > 1:
            raise RelreasonError(f"{what}'s runs must agree on train.tf32 (a process-wide setting)",
                                 "train the runs with and without TF32 apart")
        set_tf32(members[0].train.tf32, dd.device)  # before any run directory is claimed: it may refuse
        sessions, workloads = [], []
        try:
            for k, (c, run_dir) in enumerate(zip(members, run_dirs)):
                stack.enter_context(claim(Path(run_dir), resume[k], dd, None if locks is None else locks[k]))
                wl = build_workload(c, dd.device)
                workloads.append(wl)
                sessions.append(Session(c, Path(run_dir), wl, command, log, False, dd))
                sessions[-1].about = None if abouts is None else abouts[k]
            dd.set_threads(members[0].train.threads)
            yield sessions, dd
        finally:
            for s in sessions:
                s.tracker.close()
            for wl in workloads:
                wl.close()


def train_and_test(group: "SeedGroup", show_progress: bool, log) -> list:
    """Trains the group's opened sessions to their budgets, then tests each one's best checkpoint (the tests
    side by side: `SeedGroup.side_by_side`); returns each session's RunResult. When interrupted, the sessions
    that had reached their budget before the stop (a pack's cells finish at different steps) are finished and
    tested all the same; the others are interrupted."""
    interrupted = group.train(show_progress, log)
    results = {}
    for s in group.sessions:
        results[id(s)] = s.result(interrupted and s.state["examples"] < s.cfg.train.train_examples)
    group.side_by_side([s for s in group.sessions if not results[id(s)].interrupted],
                       lambda s: s.final_test(results[id(s)]))
    return [results[id(s)] for s in group.sessions]


class SeedGroup:
    """The members' shared step loop (module docstring). `step(step)` is the shape-static step: forward,
    backward, each member's clipping and Adam, with nothing read back to the host.

    `capture` (train.cuda_graph): the vmapped step is replayed from CUDA graphs (relreason.train.cuda_graphs,
    one `CapturedStep` grouped per set of members stepping together, a graph per padded batch shape); the
    loop replays each member's own captured step. On CUDA the loop runs each member on its own stream (a pack
    of cells: relreason.train.pack), so their kernels overlap. `REPLAY` "eager" re-runs the recorded step
    in place of the replay (the CPU suite's stand-in, as for one run).

    Validations and final tests run side by side (`side_by_side`): the members due at one step each in its
    own host thread, on its own CUDA stream, each its single run's own code (so its own numbers). A
    validation reads its scores back to the host, and a pointer hint's or a finished sample's bookkeeping
    does too, so one after another on the main stream they serialise: 201 validations of a Triplet-GMPNN
    cell, 1,001 of an RT cell. Side by side, one member's reads block its own thread only (torch releases
    the GIL while it waits and while it launches) while the others launch. `eval_threads`: how many at once
    (default: every member on CUDA; one on the CPU, where each run already has its cores, `train.threads`)."""

    REPLAY = "cuda"

    def __init__(self, sessions: list, use_vmap: bool, capture: bool = False, label: str | None = None,
                 resume_hint: str = "--resume", eval_threads: int | None = None):
        self.sessions, self.use_vmap, self.capture, self.label = sessions, use_vmap, capture, label
        self.resume_hint = resume_hint  # what continues the group when it is interrupted (a study's: its command)
        self.data_seconds = self.step_seconds = 0.0
        self._captured: dict[tuple, object] = {}  # (member ids) -> its CapturedStep
        self.device = device = next(sessions[0].wl.model.parameters()).device
        if self.REPLAY == "cuda":
            for s in sessions:
                if self._captures(s):
                    cuda_graphs.check_capturable(s.cfg, s.dd.device, s.dd.world, s.wl)
        self.streams = {id(s): torch.cuda.Stream(device) for s in sessions} \
            if device.type == "cuda" and not use_vmap and len(sessions) > 1 else {}
        if eval_threads is not None and eval_threads < 1:
            raise RelreasonError(f"eval_threads must be >= 1, got {eval_threads}", "e.g. 1 (one after another)")
        self.eval_threads = eval_threads if eval_threads is not None else \
            (len(sessions) if device.type == "cuda" else 1)
        self.eval_streams = {id(s): self.streams.get(id(s)) or torch.cuda.Stream(device) for s in sessions} \
            if device.type == "cuda" and self.eval_threads > 1 else {}

    @property
    def graphs(self) -> int:
        """The CUDA graphs captured so far (one per batch shape and set of members stepping together)."""
        return sum(len(c.graphs) for c in self._captured.values())

    def _captures(self, s) -> bool:
        """Whether member `s`'s step is replayed: the group's capture, or (a pack's cells) its own config's."""
        return self.capture or s.cfg.train.cuda_graph

    # -- one step ----------------------------------------------------------------------------------

    def batches(self, members: list, step: int | None = None) -> list:
        """Each member's parts of its next step (`step`, or each member's own), built exactly as its single
        run builds them."""
        return [s.wl.step_batches(s.state["step"] if step is None else step) for s in members]

    def captured(self, members: list, spec=None):
        """The CapturedStep of `members` stepping together (vmapped: one grouped step of batches of `spec`;
        loop: one member's)."""
        key = tuple(id(s) for s in members)
        if key not in self._captured:
            if self.use_vmap:
                models = [s.wl.model for s in members]

                def loss_fn(stacked, noises):
                    return stacked_losses(models, spec, stacked, noises)
                params = [p for m in models for p in m.parameters()]
                self._captured[key] = cuda_graphs.CapturedStep(loss_fn, params, self.device, self.REPLAY, grouped=True)
            else:
                self._captured[key] = members[0].captured_step(self.REPLAY)
        return self._captured[key]

    def step(self, members: list, parts: list, step: int | None = None) -> torch.Tensor:
        """One update of every member in `members` from its `parts`; returns the (K,) losses (on the
        device, not read back)."""
        for s in members:
            s.opt.zero_grad(set_to_none=True)
        if self.use_vmap:
            if self.capture:  # stacked (and padded) outside the graph: its inputs are the stacked tensors
                losses = self.captured(members, parts[0][0].batch.spec)(stack_batches([p[0].batch for p in parts]),
                                                [p[0].noise for p in parts])  # (K,); the .grad are set
            else:
                losses = vmapped_losses([s.wl.model for s in members], [p[0] for p in parts])  # (K,)
                losses.sum().backward()  # the members' losses are independent: each gets its own gradient
            for s in members:
                s.update()
            return losses.detach()
        out = []
        here = torch.cuda.current_stream(self.device) if self.streams else None
        for s, member_parts in zip(members, parts):  # each member's own step, as its single run
            side = self.streams.get(id(s))
            with torch.cuda.stream(side) if side is not None else _same_stream():
                if side is not None:
                    side.wait_stream(here)  # its batch was copied to the device on the main stream
                values = []
                for part in member_parts:
                    s.opt.zero_grad(set_to_none=True)
                    if self._captures(s):  # replayed; the .grad are set
                        loss = self.captured([s])(part.batch, part.noise)
                    else:
                        loss, _ = s.wl.loss(s.wl.model, part, s.state["step"] if step is None else step)
                        loss.backward()
                    s.update()
                    values.append(loss.detach())
                out.append(torch.stack(values).mean())
        for side in self.streams.values():
            here.wait_stream(side)  # the losses are read, and the parts freed, after every member's step
        return torch.stack(out)

    def side_by_side(self, members: list, work) -> list:
        """`work(s)` for each member `s` (a validation, a final test), side by side (class docstring): up to
        `eval_threads` host threads, each member on its own CUDA stream; returns the results in order. A
        failure is raised once every member's work has ended (no thread is left behind)."""
        if len(members) <= 1 or self.eval_threads <= 1:
            return [work(s) for s in members]
        here = torch.cuda.current_stream(self.device) if self.eval_streams else None

        def one(s):
            side = self.eval_streams.get(id(s))
            with torch.cuda.stream(side) if side is not None else _same_stream():  # also the stream's device
                if side is not None:
                    side.wait_stream(here)  # after the member's last step
                return work(s)

        with ThreadPoolExecutor(min(self.eval_threads, len(members)), thread_name_prefix="relreason-eval") as pool:
            futures = [pool.submit(one, s) for s in members]
            wait(futures)
        for s in members:
            if here is not None:
                here.wait_stream(self.eval_streams[id(s)])  # the next steps after the member's checkpoints
        return [f.result() for f in futures]

    # -- the loop ----------------------------------------------------------------------------------

    def train(self, show_progress: bool, log) -> bool:
        """Runs every member to its budget; True when interrupted (Ctrl-C / SIGTERM: every member saves
        `last/` at the end of the step, as a single run does). Members may differ in budget and validation
        period (a pack's cells); `data_seconds` and `step_seconds` add up the time spent building the
        members' batches and stepping them (the device idles in the first: the step reads its losses back)."""
        sessions = self.sessions
        total = sum(s.cfg.train.train_examples for s in sessions)
        done = sum(s.state["examples"] for s in sessions)
        bar = progress(total, self.label or f"{sessions[0].cfg.model_name} {sessions[0].cfg.task} x{len(sessions)} "
                       "seeds", unit="ex", disable=not show_progress, initial=done)
        starts = {id(s): time.time() - s.state["seconds"] for s in sessions}
        for s in sessions:
            every = s.cfg.train.eval_every_examples
            s.next_eval = (s.state["examples"] // every + 1) * every
            s.wl.model.train()
        stop = False
        try:
            with StopRequests(log) as requests:
                # a resumed run's step-0 validation is in its files
                self.side_by_side([s for s in sessions if s.state["step"] == 0 and not s.resumed],
                                  lambda s: s.validate())
                while not stop:
                    waiting = [s for s in sessions if s.state["examples"] < s.cfg.train.train_examples]
                    if not waiting:
                        break
                    members = waiting
                    if self.use_vmap:  # one vmapped step: the members at the earliest step (the others are ahead)
                        step = min(s.state["step"] for s in waiting)
                        members = [s for s in waiting if s.state["step"] == step]
                    rates = [s.set_rate() for s in members]
                    t0 = time.perf_counter()
                    parts = self.batches(members)
                    t1 = time.perf_counter()
                    losses = self.step(members, parts).tolist()  # the loop's one read per step
                    self.data_seconds += t1 - t0
                    self.step_seconds += time.perf_counter() - t1
                    stop = requests.requested
                    for s, value in zip(members, losses):
                        if not math.isfinite(value):  # the member's own run records it and says how to go on
                            raise s.diverged(s.state["step"], value)
                    due = [s for s, rate, value in zip(members, rates, losses)
                           if s.count_step([value], rate, starts[id(s)])]
                    self.side_by_side(due, lambda s: s.validate_due())
                    bar.update(sum(s.cfg.train.batch_size for s in members))
        except KeyboardInterrupt:
            log(f"\nstopped without saving; {self.resume_hint} continues each seed from its last checkpoint")
            return True
        finally:
            bar.close()
        if stop:
            for s in sessions:
                s.state["seconds"] = time.time() - starts[id(s)]
                s.checkpoint(s.last_dir, with_optimizer=True)
            log(f"\ninterrupted: saved last/ of {len(sessions)} runs; continue with {self.resume_hint}")
            return True
        return False


def vmapped_losses(models: list, parts: list) -> torch.Tensor:
    """The (K,) training losses of K models of one architecture, model k on its NarPart `parts[k]` (its
    batch and noise), as one vmapped shape-static forward over parameters stacked on a seed axis. The
    stacking is differentiable: a backward of their sum puts each model's gradient in its own `.grad`."""
    return stacked_losses(models, parts[0].batch.spec, stack_batches([p.batch for p in parts]),
                          [p.noise for p in parts])


def stacked_losses(models: list, spec, batches: dict, noises: list) -> torch.Tensor:
    """`vmapped_losses` of batches already stacked (`stack_batches`) with the members' noises: what a captured
    group step replays (relreason.train.cuda_graphs, `grouped`), its input tensors the stacked ones."""
    template = models[0]
    names = [n for n, _ in template.named_parameters()]
    params = {n: torch.stack([dict(m.named_parameters())[n] for m in models]) for n in names}  # (K, ...)
    buffers = {n: torch.stack([dict(m.named_buffers())[n] for m in models]) for n, _ in template.named_buffers()}
    index = torch.arange(len(models), device=batches["lengths"].device)  # (K,): the seed axis' positions
    noises = tuple(noises)

    def loss_of(params, buffers, b, idx):
        batch = Batch(spec, b["inputs"], b["hints"], b["outputs"], b["lengths"], b["node_mask"])
        noise = SeedNoise(0, noises[0].rows, noises[0].size, members=noises, index=idx)
        out = functional_call(template, {**params, **buffers}, (batch,),
                              {"train": True, "generator": noise, "static": True})
        return template.loss(batch, out, read_terms=False)[0]

    # randomness "same": every draw is made outside the seed axis by the seeds' own generators (SeedNoise);
    # vmap_problems keeps models that draw from torch's global generator (processor dropout) out
    with plain_autograd():
        return torch.vmap(loss_of, randomness="same")(params, buffers, batches, index)


class _same_stream:
    """No stream change (CPU, or one member): the step runs where it is."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


def stack_batches(batches: list) -> dict:
    """The members' batches as one dict of (K, B, ...) tensors: hint trajectories padded (zeros, masked by
    `lengths`) to the longest, graphs padded (masked nodes) to the largest."""
    n = max(b.n for b in batches)
    batches = [b if b.n == n else b.pad_nodes(n) for b in batches]
    T = max(b.max_length for b in batches)

    def pad_time(x: torch.Tensor) -> torch.Tensor:  # (B, t, ...) -> (B, T, ...)
        if x.shape[1] == T:
            return x
        return torch.cat([x, x.new_zeros((x.shape[0], T - x.shape[1]) + tuple(x.shape[2:]))], 1)

    first = batches[0]
    return {"inputs": {k: torch.stack([b.inputs[k] for b in batches]) for k in first.inputs},
            "hints": {k: torch.stack([pad_time(b.hints[k]) for b in batches]) for k in first.hints},
            "outputs": {k: torch.stack([b.outputs[k] for b in batches]) for k in first.outputs},
            "lengths": torch.stack([b.lengths for b in batches]),
            "node_mask": torch.stack([b.node_mask for b in batches])}


__all__ = ["Strategy", "SeedNoise", "SeedGroup", "run_group", "train_members", "vmapped_losses", "stacked_losses",
           "claimed_sessions", "train_and_test", "seed_configs",
           "group_names", "stack_batches"]
