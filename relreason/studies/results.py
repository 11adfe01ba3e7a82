"""Result files: what `relreason results` copies from finished `relreason reproduce` cells into the results
directory the repository commits, what `reproduce --verify` re-trains against them, and reading them back.

    written = collect_results(Path("reproduce"), Path("results"))   # reproduce/cells/** -> results/
    files = cell_files(Path("results"))                              # ((model, setting, task, seed), RunResults)

`collect_results` copies each finished cell of `relreason reproduce` (its run's results.json: scores,
resolved config, command, hardware, wall time) to `results/cells/<model>/<setting>/<task>/seed<k>.json`,
the files the repository commits (with its validation curve under `results/curves/` and, when the cell's run
directory holds a size sweep (`relreason eval RUN --ood LIST --save RUN`), that sweep under `results/sweeps/`),
and records how far every unfinished cell got under
`results/progress/` (same layout). For every finished cell it also writes `results/selection/` (same layout):
how the protocol's best-on-validation checkpoint was chosen (validations run, how many reached the best
score, first and last time) and, as a diagnostic that is not the protocol, the test score of the run's
last checkpoint, evaluated once by `relreason results` on the same test split. RESULTS.md and the HTML page
are written from those files alone (relreason.studies.results_report).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
from pathlib import Path

from relreason.config import config_from_dict
from relreason.errors import RelreasonError
from relreason.eval.grid import SWEEP_FILE, read_sweep
from relreason.files import maybe_json_object
from relreason.rundir import (CELL_RUN, RunDir, RunResults, read_object, read_run_record, read_trainer_state,
                              seed_of_dir)
from relreason.data.algorithms import ALGORITHMS, canonical_split
from relreason.data.store import atomic_path
from relreason.rundir import ValidationRow, read_metrics, read_results
from relreason.runtime import KERNEL_LEVELS, code_record, cpu_kernels
from relreason.studies.cells import nar_cells, plan_cells, result_identity
from relreason.studies.retrain import retrain
from relreason.studies.tables import TABLES
from relreason.tasks import expand_tasks

CELLS, PROGRESS, SELECTION, CURVES, VERIFY, SWEEPS = "cells", "progress", "selection", "curves", "verify", "sweeps"
VERIFY_LOSS_RTOL = 1e-4  # a training loss re-computed on another machine may differ in its last bits; scores may not
# A cell made on a CUDA GPU, verified where none is present, is re-trained on the CPU: every kernel rounds otherwise
# (other reduction orders, fused kernels), and training carries that rounding into the weights, so its first
# validations are compared within these tolerances instead of exactly. The size is set by a stand-in that rounds
# otherwise at every operation on the same device (a vmapped seed group's batched kernels against the single
# run's: tests/test_verify_devices.py measures its divergence and checks it is inside them) with a margin of ten;
# a change of the code that computes otherwise (a score moved by a point or more) still shows.
CROSS_DEVICE_SCORE_ATOL = 0.01  # absolute, on scores in [0, 1]: one percentage point
CROSS_DEVICE_LOSS_RTOL = 0.01  # relative, on the training loss beside each validation


def _write(path: Path, data: dict) -> bool:
    """Writes `data` as JSON atomically; False when the file already holds exactly that."""
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if maybe_json_object(path) is not None and path.read_text() == text:  # a regular file, read guarded first
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return True


def _nar_settings() -> set[tuple[str, str]]:
    """(model, setting) of the NAR cells that studies pre-train (relreason.studies.variants.Variant.nar)."""
    return {(v.nar.model, v.nar.recipe) for _, t in TABLES.items() for v in t.variants if v.nar is not None}


def collect_results(source: Path, results: Path) -> list[Path]:
    """Copies the finished cells under `source`/cells into `results`/cells and the state of the
    unfinished ones into `results`/progress; returns the files written (unchanged ones are not)."""
    root = Path(source) / CELLS
    if not root.is_dir():
        raise RelreasonError(f"{root} holds no cells", "run `relreason reproduce TABLE` first (or give --from)")
    written = []
    nar_only = _nar_settings()  # a study's NAR cells: inputs of its cells, in no table; no model-selection diagnostics
    for run in sorted(root.glob(f"*/*/*/seed*/{CELL_RUN}")):
        rel = run.parent.relative_to(root)  # <model>/<setting>/<task>/seed<k>
        files = RunDir(run)
        if files.results.is_file():
            data = read_object(files.results)
            RunResults.from_dict(data, str(files.results))  # validated; copied as written (its schema version kept)
            if _write(Path(results) / CELLS / f"{rel}.json", data):
                written.append(Path(results) / CELLS / f"{rel}.json")
            curve, points = Path(results) / CURVES / f"{rel}.json", validation_curve(run)
            if points is not None and _write(curve, points):
                written.append(curve)
            sweep = Path(results) / SWEEPS / f"{rel}.json"
            if (run / SWEEP_FILE).is_file() and _write(sweep, read_sweep(run)):  # `eval RUN --ood LIST --save RUN`
                written.append(sweep)
            selection = Path(results) / SELECTION / f"{rel}.json"
            record = None if rel.parts[:2] in nar_only else model_selection(run, selection)
            if record is not None and _write(selection, record):
                written.append(selection)
            (Path(results) / PROGRESS / f"{rel}.json").unlink(missing_ok=True)
            continue
        if not files.last.trainer_state.is_file():
            continue
        st = read_trainer_state(files.last.path)
        cfg = read_run_record(run)
        committed = Path(results) / CELLS / f"{rel}.json"
        if committed.is_file() and result_identity(read_object(committed).get("config") or {}) == \
                result_identity(cfg.config):
            # the cell is finished and committed under this config (a fresh work tree retrained part of it
            # before `reproduce --committed` kept it): not in progress
            (Path(results) / PROGRESS / f"{rel}.json").unlink(missing_ok=True)
            continue
        record = {"examples": st.examples, "train_examples": cfg.config["train"]["train_examples"],
                  "best_val": st.best_val, "seconds": round(st.seconds, 1), "hardware": st.hardware,
                  "command": cfg.command, "config": cfg.config}
        if _write(Path(results) / PROGRESS / f"{rel}.json", record):
            written.append(Path(results) / PROGRESS / f"{rel}.json")
    return written


# The larger diagnostic test beside the protocol's (never a verdict): 10 x the protocol's test samples (320
# graphs at n = 64 for most algorithms), at most DIAGNOSTIC_TEST_MAX, drawn with a seed none of the benchmark's
# splits uses (1-3: train, val, test), scored on the protocol's selected checkpoint. The protocol's 32 graphs
# carry about ±0.4-1 point of test-set noise per seed; ten times the samples cut it by about 3. The tasks whose
# protocol tests 1,024 or 2,048 samples (few signals per graph) get four or two times that: ten times would cost
# hours of a CPU core for a diagnostic (naive_string_matcher's 20,480 graphs of 80 nodes: about 5 hours).
DIAGNOSTIC_TEST_FACTOR = 10
DIAGNOSTIC_TEST_MAX = 4096
DIAGNOSTIC_TEST_SEED = 4


def diagnostic_test_num(protocol_num: int) -> int:
    """The larger diagnostic test's samples for a protocol test of `protocol_num` samples."""
    return max(protocol_num, min(DIAGNOSTIC_TEST_FACTOR * protocol_num, DIAGNOSTIC_TEST_MAX))


def model_selection(run: Path, cached: Path | None = None) -> dict | None:
    """How a finished run's tested checkpoint was chosen, from its metrics.jsonl: validations run, the
    best score, how many validations reached it and the first and last of them (the protocol tests the
    first), with the test score of the selected checkpoint and two diagnostics that are not the protocol:
    the test score of the last checkpoint (`last/`, on the run's own test split) and the selected
    checkpoint's score on a larger independent test set at the same size (DIAGNOSTIC_TEST_*; single
    CLRS tasks only). None when the run has no validations or no last checkpoint, or selects none (train.select
    last: the final checkpoint is the one tested). `cached`: a record written before for this same run is reused
    instead of evaluating again."""
    files = RunDir(run)
    res = read_results(files.results)
    vals = [r for r in read_metrics(files.metrics) if isinstance(r, ValidationRow)]
    if not vals or not files.last.weights.is_file() or res.best_val is None or \
            (res.config.get("train") or {}).get("select", "best") == "last":
        return None
    at_best = [r.examples for r in vals if r.score == res.best_val]
    record = {"validations": len(vals), "best_val": res.best_val, "at_best": len(at_best),
              "first_best_examples": min(at_best, default=None), "last_best_examples": max(at_best, default=None),
              "selected_examples": res.best_examples, "selected_test": res.test.score,
              "last_examples": res.examples, "test_label": res.test_label}
    old = read_object(cached) if cached is not None and cached.is_file() else {}
    if {k: old.get(k) for k in record} != record:
        old = {}
    from relreason.train.evaluation import evaluate_checkpoint  # CLI start-up: torch loads on use

    if "last_test" not in old:
        last = evaluate_checkpoint(files.last.path)
        if last["label"] != res.test_label:
            raise RelreasonError(f"{run}/last was tested on {last['label']!r}, its run on {res.test_label!r}",
                                 "the run's test split changed; retrain the cell")
        old["last_test"] = last["score"]
    large = {k: old[k] for k in ("large_test", "large_test_label") if k in old}
    if not large:
        large = larger_test(files.best.path, res)
    return {**record, "last_test": old["last_test"], **large}


def larger_test(checkpoint: Path, res: RunResults) -> dict:
    """{"large_test", "large_test_label"}: the checkpoint on `diagnostic_test_num` samples at its test size
    (the config's data.test_size: the sampler's size, which `res.test_size`, the test graphs' nodes, is not for
    optimal_bst or CLRS v1.0.0's string matchers), seed DIAGNOSTIC_TEST_SEED; {} for runs that are not one CLRS
    algorithm."""
    from relreason.train.evaluation import evaluate_checkpoint  # CLI start-up: torch loads on use

    if res.task not in ALGORITHMS.names() or res.per_task:
        return {}
    num = diagnostic_test_num(canonical_split(res.task, "test").num)
    size = res.config["data"]["test_size"]
    got = evaluate_checkpoint(checkpoint, ood=size, num=num, seed=DIAGNOSTIC_TEST_SEED)
    return {"large_test": got["score"], "large_test_label": got["label"]}


def validation_curve(run: Path) -> dict | None:
    """The run's validations as metrics.jsonl holds them ({"examples", "score", "loss"} each), with the code that
    trained it: what `reproduce --verify` re-trains a prefix of and compares. None: no validation recorded."""
    res = read_results(RunDir(run).results)
    rows = [r for r in read_metrics(RunDir(run).metrics) if isinstance(r, ValidationRow)]
    if not rows:
        return None
    return {"code": res.code, "validations": [{"examples": r.examples, "score": r.score, "loss": r.loss}
                                              for r in rows]}


def device_kind(hardware: list[str]) -> str:
    """"cuda" when a session of a run trained on a CUDA device (relreason.runtime.hardware's words: "NVIDIA H200,
    cuda, torch ..."), else "cpu"."""
    return "cuda" if any(re.search(r", cuda(:\d+)?(,|$)", h) for h in hardware) else "cpu"


def verify_device(made_on: str, cuda_here: bool) -> tuple[str, bool]:
    """Where `verify_cell` re-trains a cell made on `made_on` (a device kind), and whether across devices: the
    same kind when this machine has it, else the CPU (compared within the CROSS_DEVICE tolerances)."""
    if made_on == "cuda" and cuda_here:
        return "cuda", False
    return "cpu", made_on != "cpu"


def retrain_keys(device: str) -> dict:
    """The train keys a --verify re-training sets (incidental: the same computation): its device, and on the CPU
    no CUDA graphs."""
    return {"device": device} if device == "cuda" else {"device": "cpu", "cuda_graph": False}


def first_kernels(hardware: list[str]) -> str | None:
    """The CPU kernels the first CPU session of a run recorded (the session that trained the first validations
    --verify re-trains); None where it recorded none (made before they were recorded) or no session was on a CPU."""
    for h in hardware:
        if ", cpu," in h:
            m = re.search(r", (\w+) kernels(,|$)", h)
            return m.group(1) if m else None
    return None


def torch_release(version: str) -> str:
    """A torch version without its build ("2.11.0+cu130" -> "2.11.0"): the weights are drawn on the CPU, where a
    release's builds are taken to draw alike (its CUDA build run on this CPU drew the H200 cell's start exactly;
    a CPU build of 2.11.0 was not tried)."""
    return version.split("+")[0]


def first_torch(hardware: list[str]) -> str | None:
    """The torch release the first session of a run recorded (the session that drew its initial weights and
    trained the first validations --verify re-trains); None where it recorded none."""
    for h in hardware[:1]:
        m = re.search(r"torch (\d+\.\d+[\w.+]*)", h)  # not "1 torch thread"
        return torch_release(m.group(1)) if m else None
    return None


def other_torch(made: str | None) -> str | None:
    """Why a cell whose first session ran torch `made` cannot be re-trained here (None: it can): torch's
    initialisation is not the same across releases (2.11.0 and 2.13.0 draw other initial weights from one seed:
    the H200 cell's step-0 validation, scripts/step0_check.py), so a re-training under another release starts
    from other weights and its difference says nothing of the code."""
    import torch  # CLI start-up: torch loads on use

    here = torch_release(torch.__version__)
    if made is None or made == here:
        return None
    return (f"made with torch {made}, here {here}: another release draws other initial weights from the same seed "
            f"(2.11.0 and 2.13.0 do), so a re-training here would start elsewhere")


def score_atol(across: bool) -> float:
    """How far a re-trained score may lie from the stored one: exactly on the device kind that made it, else
    (`across`) within CROSS_DEVICE_SCORE_ATOL."""
    return CROSS_DEVICE_SCORE_ATOL if across else 0.0


def verify_cell(config, curve: dict, validations: int, workdir: Path, log=lambda m: None,
                made_on: str = "cpu", recorded: bool = False, kernels: str | None = None,
                init_weights: str | None = None) -> dict:
    """Re-trains a cell (its resolved `config`, its seed) with today's code up to the `validations`-th
    validation of its stored `curve` (validation_curve) and compares them: the examples exactly, and on the
    device kind it was made on (`made_on`, `verify_device`) the validation scores exactly and the training loss
    beside each within VERIFY_LOSS_RTOL; a cell made on a GPU, where this machine has none, is re-trained on the
    CPU and compared within CROSS_DEVICE_SCORE_ATOL and CROSS_DEVICE_LOSS_RTOL. Returns {"validations",
    "matches", "difference" (the first, in words; None when they match), "code" (today's), "stored_code",
    "made_on", "device" (where it was re-trained), "compared" (how, in words)}. `recorded`: the cell has a
    result record (False: none, nothing is said of kernels); `kernels`: the CPU kernels its first CPU session
    recorded in it (first_kernels; None where that session recorded none), which made the validations compared.
    A CPU re-training runs under `kernels` where this machine can run them (relreason.studies.retrain: in a child
    process where they are not this process's), and "compared" says where it cannot. Where a record exists but
    its first session's kernels were not recorded, a re-training that differs under this machine's kernels is
    tried under each lower level it can run, and "compared" names the level it matched under, or says none did.
    `init_weights`: the digest of the weights the cell started from, where its record has one: a re-training that
    starts elsewhere differs there first, whatever its validations."""
    import torch  # CLI start-up: torch loads on use

    if validations < 2:
        raise RelreasonError(f"--verify-validations {validations}: the first validation is before any training",
                             "give at least 2")
    stored = curve["validations"][:validations]
    t = config.train
    if t.lr_schedule != "constant" or t.warmup_examples:
        raise RelreasonError(f"cannot verify a prefix of a run whose learning rate follows train.lr_schedule "
                             f"{t.lr_schedule} (warm-up {t.warmup_examples}): its rates depend on the whole budget",
                             "verify cells trained at a constant rate (every paper recipe)")
    upto = stored[-1]["examples"]
    device, across = verify_device(made_on, torch.cuda.is_available())
    on = retrain_keys(device)
    cfg = dataclasses.replace(config, train=dataclasses.replace(t, train_examples=max(upto, t.batch_size), **on))
    atol, loss_rtol = score_atol(across), (CROSS_DEVICE_LOSS_RTOL if across else VERIFY_LOSS_RTOL)

    first: list = []  # the re-trained first validation (the untrained model's), of the last attempt

    def attempt(level: str | None) -> tuple[str, str | None]:  # (how the kernels went, the first difference)
        scratch = Path(workdir) / "verify"
        if scratch.is_dir() and (scratch / "config.json").is_file():  # an earlier re-training: start afresh
            shutil.rmtree(scratch)
        how = retrain(cfg, workdir, "verify", level, log)
        now = [r for r in read_metrics(scratch / "metrics.jsonl") if isinstance(r, ValidationRow)]
        first[:] = now[:1]
        moved = start_difference(init_weights, read_object(scratch / "results.json").get("init_weights"))
        return how, moved if moved is not None else _first_difference(stored, now, atol, loss_rtol)

    cpu_here = device == "cpu" and not across
    how, difference = attempt(kernels if cpu_here else None)
    if across and first:  # across devices only the start compares exactly: the same data, weights and forward
        a, b = stored[0], first[0]
        how = ", ".join(x for x in (how, (
            f"the same start (its step-0 validation {a['score']:.6f} on both)" if (a["examples"], a["score"]) == (
                b.examples, b.score) else
            f"another start (its first validation {a['score']:.6f} stored, {b.score:.6f} now)")) if x)
    here = cpu_kernels()
    if cpu_here and recorded and kernels is None:  # its first session's kernels were not recorded
        how = (f"its first session's CPU kernels were not recorded: it {'matches' if difference is None else 'differs'}"
               f" under {here}, this machine's")
        lower = KERNEL_LEVELS[:KERNEL_LEVELS.index(here)] if difference and here in KERNEL_LEVELS else ()
        for level in reversed(lower):  # where it differs here: the lower levels this machine can run, highest first
            if attempt(level)[1] is None:
                how, difference = (f"its first session's CPU kernels were not recorded: under {here}, this machine's, "
                                   f"it differed ({difference}); re-trained under {level} "
                                   f"(ATEN_CPU_CAPABILITY={level.lower()}), it matches: made with {level}"), None
                break
        else:
            if lower:
                how = (f"its first session's CPU kernels were not recorded: it differs under {here}, this machine's, "
                       f"and under {', '.join(reversed(lower))} too")
    compared = (f"re-trained on the CPU against a {made_on} run: scores within ±{100 * atol:g} points, losses "
                f"within {loss_rtol:g} (relative)" if across else
                f"re-trained on {device}, as made: scores exactly, losses within {loss_rtol:g} (relative)")
    if how:
        compared += f"; {how}"
    return {"validations": len(stored), "matches": difference is None, "difference": difference,
            "code": code_record(), "stored_code": curve.get("code"), "made_on": made_on, "device": device,
            "compared": compared, "torch": torch.__version__}


def _first_difference(stored: list[dict], now: list, atol: float, loss_rtol: float) -> str | None:
    """The first way re-trained validations `now` (ValidationRow) differ from the `stored` ones, in words (None:
    they do not): their examples, scores within `atol`, training losses within `loss_rtol` (relative), count."""
    for old, new in zip(stored, now):
        if old["examples"] != new.examples or not abs(old["score"] - new.score) <= atol:
            return (f"validation at {old['examples']:,} examples: {old['score']:.6f} stored, {new.score:.6f} now "
                    f"(at {new.examples:,})")
        if (old["loss"] is None) != (new.loss is None) or (
                old["loss"] is not None and not math.isclose(old["loss"], new.loss, rel_tol=loss_rtol)):
            return f"training loss at {old['examples']:,} examples: {old['loss']} stored, {new.loss} now"
    return f"{len(now)} validations re-trained, {len(stored)} stored" if len(now) < len(stored) else None


def verify_table(table: str, tasks: str | None, seeds: tuple[int, ...], models: str | None, results: Path,
                 validations: int, workdir: Path, log=lambda m: None) -> list[dict]:
    """`reproduce TABLE --verify`: verify_cell for every planned cell of the table that has a committed curve
    under `results`, re-trained under the config its result file stored (threads too) on the device kind its
    hardware record names where this machine has it, else on the CPU within tolerances (verify_cell); each verdict
    is written to results/verify/ (RESULTS.md reads it). Returns the rows."""
    study = TABLES.get(table)
    cells = plan_cells(study, expand_tasks(tasks if tasks is not None else study.tasks), seeds, None, workdir / "plan",
                       models=models.split(",") if models else None)
    rows = []
    for cell in [*nar_cells(cells), *cells]:  # a TransNAR column's NAR cells are cells with curves too
        rel = cell.directory.relative_to(workdir / "plan" / CELLS)
        curve_file = Path(results) / CURVES / f"{rel}.json"
        if not curve_file.is_file():
            continue
        record = Path(results) / CELLS / f"{rel}.json"
        stored = read_object(record) if record.is_file() else None
        hardware = (stored.get("hardware") or []) if stored is not None else None
        nar_record = None if cell.nar is None else \
            Path(results) / CELLS / f"{cell.nar.directory.relative_to(workdir / 'plan' / CELLS)}.json"
        # a TransNAR's NAR, re-made first, drew its weights too; by release where a record lacks its initial
        # weights' digest (made before they were recorded); with one, the re-training's start is compared instead
        own = [stored] + ([read_object(nar_record)] if nar_record is not None and nar_record.is_file() else [])
        made = [first_torch(r.get("hardware") or []) for r in own if r is not None and r.get("init_weights") is None]
        other = next(((m, w) for m in made if (w := other_torch(m)) is not None), None)
        if other is not None:  # not re-trained, nothing written: the verdict would say nothing of the code
            log(f"not verifying {rel}: {other[1]}")
            rows.append({"cell": str(rel), "skipped": other[1], "made_with_torch": other[0]})
            continue
        log(f"verifying {rel}")
        config, made_on = stored_cell_config(cell, results, rel)
        nar = None
        if cell.nar is not None:  # the NAR it reads: here (the lanes' reproduce/), or re-trained from its record
            config, nar = nar_at_hand(config, cell.nar.directory.relative_to(workdir / "plan" / CELLS), results,
                                      workdir / str(rel), log)
        if nar is not None and not nar["matches"]:
            got = {"validations": 0, "matches": False, "code": code_record(), "made_on": made_on, "nar": nar,
                   "difference": f"its NAR cell re-trained otherwise: {nar['difference']}",
                   "stored_code": read_object(curve_file).get("code"), "device": nar["device"],
                   "compared": nar["compared"]}
        else:
            got = verify_cell(config, read_object(curve_file), validations, workdir / str(rel), log, made_on,
                              hardware is not None, None if hardware is None else first_kernels(hardware),
                              stored.get("init_weights") if stored is not None else None)
            if nar is not None:
                got["nar"], got["compared"] = nar, f"{got['compared']}; its NAR cell {nar['compared']}"
        _write(Path(results) / VERIFY / f"{rel}.json", got)
        rows.append({"cell": str(rel), **got})
    if not rows:
        raise RelreasonError(f"no cell of {table} (these tasks, models and seeds) has a committed validation curve "
                             f"under {results}/{CURVES}", "run `relreason results` after its cells finish")
    return rows


def stored_cell_config(cell, results: Path, rel: Path):
    """(config, device kind it was made on) of a committed cell: its own stored config, machine keys included
    (another thread count reorders float sums, and a trajectory that differs by rounding would hide whether the
    code computes otherwise); the planned config where no result file is committed yet."""
    stored = Path(results) / CELLS / f"{rel}.json"
    record = read_object(stored) if stored.is_file() else {}
    config = config_from_dict(record["config"]) if record else cell.config
    return config, device_kind(record.get("hardware") or [])


def nar_at_hand(config, nar_rel: Path, results: Path, workdir: Path, log=lambda m: None):
    """(config, how its NAR was checked) of a TransNAR cell for --verify. Where the NAR checkpoint the cell
    recorded is here (the lanes' reproduce/), the config as it is and None. Elsewhere (a fresh checkout: NAR
    weights are not committed) the NAR cell `nar_rel` is re-trained in full from its committed result file into
    `workdir`/nar: its best validation, the examples it was reached at and its test score must be the committed
    ones (exactly on the device kind that made it, else within CROSS_DEVICE_SCORE_ATOL); the config then reads
    the re-trained NAR. The check: {"cell", "matches", "difference", "device", "compared"}.

    Raises:
        RelreasonError: the NAR cell is neither here nor committed under `results`."""
    import torch  # CLI start-up: torch loads on use

    from relreason.train.text.transnar import nar_checkpoint_matches  # CLI start-up: torch loads on use

    m = config.model
    if m.nar_config is None or nar_checkpoint_matches(m.nar_config):
        return config, None
    stored = Path(results) / CELLS / f"{nar_rel}.json"
    if not stored.is_file():
        raise RelreasonError(f"{m.nar} (the NAR this TransNAR cell read) is not here, and its cell {nar_rel} is not "
                             f"committed under {results}/{CELLS}", "finish and commit the NAR cell first")
    record = read_object(stored)
    made_on = device_kind(record.get("hardware") or [])
    device, across = verify_device(made_on, torch.cuda.is_available())
    nar_cfg = config_from_dict(record["config"])
    t = nar_cfg.train
    on = retrain_keys(device)
    nar_cfg = dataclasses.replace(nar_cfg, train=dataclasses.replace(t, **on))
    if (Path(workdir) / "nar").is_dir():  # an earlier --verify's re-training: start afresh
        shutil.rmtree(Path(workdir) / "nar")
    log(f"re-training its NAR cell {nar_rel} in full ({t.train_examples:,} examples): its weights are not committed")
    how = retrain(nar_cfg, Path(workdir), "nar",
                  first_kernels(record.get("hardware") or []) if device == "cpu" and not across else None, log)
    difference = remade_difference(record, read_object(Path(workdir) / "nar" / "results.json"), across)
    compared = (f"re-trained in full on the CPU against a {made_on} run: scores within ±{100 * score_atol(across):g} "
                f"points" if across else f"re-trained in full on {device}, as made: scores and their examples exactly")
    compared += f"; {how}" if how else ""
    nar = {"cell": str(nar_rel), "matches": difference is None, "difference": difference, "device": device,
           "compared": compared}
    model = dataclasses.replace(m, nar=str(Path(workdir) / "nar"), nar_config=None)  # re-read from the re-trained run
    return dataclasses.replace(config, model=model), nar


def start_difference(stored: str | None, started: str | None) -> str | None:
    """How a re-training's start differs from a cell's, in words (None: the same, or either digest unrecorded):
    the digests of the initial weights the cell's record and the re-training's name (`init_weights`)."""
    if stored is None or started is None or stored == started:
        return None
    return f"initial weights {stored} stored, {started} now"


def remade_difference(record: dict, now: dict, across: bool) -> str | None:
    """How a cell trained again in full (`now`, its results.json) differs from its committed result `record`, in
    words (None: it does not): the weights it started from where both record their digest, then its best
    validation, the examples it was reached at and its test score, exactly on the device kind that made it, else
    (`across`) the scores within CROSS_DEVICE_SCORE_ATOL."""
    moved = start_difference(record.get("init_weights"), now.get("init_weights"))
    if moved is not None:  # another start: nothing after it compares
        return moved
    atol = score_atol(across)
    for what, old, new in (("best validation", record["best_val"], now["best_val"]),
                           ("test score", record["test"]["score"], now["test"]["score"])):
        if not abs(old - new) <= atol:
            return f"{what} {old:.6f} stored, {new:.6f} now"
    if not across and record["best_examples"] != now["best_examples"]:
        return f"best validation at {record['best_examples']:,} examples stored, {now['best_examples']:,} now"
    return None


def result_files(results: Path, kind: str) -> list[tuple[tuple[str, str, str, int], Path]]:
    """((model, setting, task, seed), path) of every result file under `results`/`kind` (CELLS, PROGRESS, SELECTION or VERIFY)."""
    out = []
    for path in sorted((Path(results) / kind).glob("*/*/*/seed*.json")):
        model, setting, task = path.parts[-4:-1]
        out.append(((model, setting, task, seed_of_dir(path.stem)), path))
    return out


def cell_files(results: Path) -> list[tuple[tuple[str, str, str, int], RunResults]]:
    """((model, setting, task, seed), its results) of every finished cell under `results`, validated."""
    return [(key, RunResults.from_dict(read_object(path), str(path))) for key, path in result_files(results, CELLS)]


def progress_files(results: Path) -> list[tuple[tuple[str, str, str, int], dict]]:
    """((model, setting, task, seed), how far it got) of every unfinished cell under `results`."""
    return [(key, read_object(path)) for key, path in result_files(results, PROGRESS)]
