"""Result files and RESULTS.md: our numbers beside the papers', generated from finished cells, never typed.

    relreason results            # collect reproduce/cells/**/run/results.json, then write RESULTS.md

`collect_results` copies each finished cell of `relreason reproduce` (its run's results.json: scores,
resolved config, command, hardware, wall time) to `results/cells/<model>/<setting>/<task>/seed<k>.json`,
the files the repository commits (with its validation curve under `results/curves/` and, when the cell's run
directory holds a size sweep (`relreason eval RUN --ood LIST --save RUN`), that sweep under `results/sweeps/`),
and records how far every unfinished cell got under
`results/progress/` (same layout). For every finished cell it also writes `results/selection/` (same layout):
how the protocol's best-on-validation checkpoint was chosen (validations run, how many reached the best
score, first and last time) and, as a diagnostic that is not the protocol, the test score of the run's
last checkpoint, evaluated once by `relreason results` on the same test split. `write_report` reads only
those files: for every published table (relreason.studies.tables) that has results, the table as
`relreason reproduce` prints it (ours as mean ± sample std with seed counts, the published figure, the
difference with Welch's 95% interval and the verdict against the table's equivalence margin, cells that
are not the paper's protocol marked so), then each cell's command, hardware and wall time, the
cells still in progress with how far they got, and, where `results/plan.txt` exists, how far each of its
planned `reproduce` commands got (relreason.studies.plan).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from relreason.config import build_config, config_from_dict, to_plain
from relreason.errors import RelreasonError
from relreason.files import maybe_json_object
from relreason.eval.grid import SWEEP_FILE, read_sweep
from relreason.runtime import source_digest
from relreason.rundir import (CELL_RUN, RunDir, RunResults, read_object, read_run_record, read_trainer_state,
                              seed_of_dir)
from relreason.studies.cells import result_identity
from relreason.studies.plan import PLAN_COLUMNS, PLAN_FILE, plan_status, read_plan
from relreason.studies.report import study_table
from relreason.studies.variants import Study

CELLS, PROGRESS, SELECTION, CURVES, VERIFY, SWEEPS = "cells", "progress", "selection", "curves", "verify", "sweeps"
VERIFY_LOSS_RTOL = 1e-4  # a training loss re-computed on another machine may differ in its last bits; scores may not


def _write(path: Path, data: dict) -> bool:
    """Writes `data` as JSON atomically; False when the file already holds exactly that."""
    from relreason.data.store import atomic_path

    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if maybe_json_object(path) is not None and path.read_text() == text:  # a regular file, read guarded first
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return True


def collect_results(source: Path, results: Path) -> list[Path]:
    """Copies the finished cells under `source`/cells into `results`/cells and the state of the
    unfinished ones into `results`/progress; returns the files written (unchanged ones are not)."""
    root = Path(source) / CELLS
    if not root.is_dir():
        raise RelreasonError(f"{root} holds no cells", "run `relreason reproduce TABLE` first (or give --from)")
    written = []
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
            record = model_selection(run, selection)
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
# graphs at n = 64 for most algorithms), drawn with a seed none of the benchmark's splits uses (1-3: train,
# val, test), scored on the protocol's selected checkpoint. The protocol's 32 graphs carry about ±0.4-1
# point of test-set noise per seed; ten times the samples cut it by about 3.
DIAGNOSTIC_TEST_FACTOR = 10
DIAGNOSTIC_TEST_SEED = 4


def model_selection(run: Path, cached: Path | None = None) -> dict | None:
    """How a finished run's tested checkpoint was chosen, from its metrics.jsonl: validations run, the
    best score, how many validations reached it and the first and last of them (the protocol tests the
    first), with the test score of the selected checkpoint and two diagnostics that are not the protocol:
    the test score of the last checkpoint (`last/`, on the run's own test split) and the selected
    checkpoint's score on a larger independent test set at the same size (DIAGNOSTIC_TEST_*; single
    CLRS tasks only). None when the run has no validations or no last checkpoint. `cached`: a record
    written before for this same run is reused instead of evaluating again."""
    from relreason.rundir import ValidationRow, read_metrics, read_results

    files = RunDir(run)
    res = read_results(files.results)
    vals = [r for r in read_metrics(files.metrics) if isinstance(r, ValidationRow)]
    if not vals or not files.last.weights.is_file() or res.best_val is None:
        return None
    at_best = [r.examples for r in vals if r.score == res.best_val]
    record = {"validations": len(vals), "best_val": res.best_val, "at_best": len(at_best),
              "first_best_examples": min(at_best, default=None), "last_best_examples": max(at_best, default=None),
              "selected_examples": res.best_examples, "selected_test": res.test.score,
              "last_examples": res.examples, "test_label": res.test_label}
    old = read_object(cached) if cached is not None and cached.is_file() else {}
    if {k: old.get(k) for k in record} != record:
        old = {}
    from relreason.train.evaluation import evaluate_checkpoint

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
    """{"large_test", "large_test_label"}: the checkpoint on DIAGNOSTIC_TEST_FACTOR x the protocol's test
    samples at its test size, seed DIAGNOSTIC_TEST_SEED; {} for runs that are not one CLRS algorithm."""
    from relreason.data.algorithms import ALGORITHMS, canonical_split
    from relreason.train.evaluation import evaluate_checkpoint

    if res.task not in ALGORITHMS.names() or res.per_task:
        return {}
    num = DIAGNOSTIC_TEST_FACTOR * canonical_split(res.task, "test").num
    got = evaluate_checkpoint(checkpoint, ood=res.test_size, num=num, seed=DIAGNOSTIC_TEST_SEED)
    return {"large_test": got["score"], "large_test_label": got["label"]}


def validation_curve(run: Path) -> dict | None:
    """The run's validations as metrics.jsonl holds them ({"examples", "score", "loss"} each), with the code that
    trained it: what `reproduce --verify` re-trains a prefix of and compares. None: no validation recorded."""
    from relreason.rundir import ValidationRow, read_metrics, read_results

    res = read_results(RunDir(run).results)
    rows = [r for r in read_metrics(RunDir(run).metrics) if isinstance(r, ValidationRow)]
    if not rows:
        return None
    return {"code": res.code, "validations": [{"examples": r.examples, "score": r.score, "loss": r.loss}
                                              for r in rows]}


def verify_cell(config, curve: dict, validations: int, workdir: Path, log=lambda m: None) -> dict:
    """Re-trains a cell (its resolved `config`, its seed) with today's code up to the `validations`-th
    validation of its stored `curve` (validation_curve) and compares them: the examples and validation
    scores exactly, the training loss beside each within VERIFY_LOSS_RTOL. Returns {"validations",
    "matches", "difference" (the first, in words; None when they match), "code" (today's), "stored_code"}."""
    import dataclasses
    import math

    from relreason.rundir import ValidationRow, read_metrics
    from relreason.runtime import code_record
    from relreason.train import run

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
    cfg = dataclasses.replace(config, train=dataclasses.replace(t, train_examples=max(upto, t.batch_size)))
    scratch = Path(workdir) / "verify"
    if scratch.is_dir() and (scratch / "config.json").is_file():  # an earlier --verify's re-training: start afresh
        import shutil

        shutil.rmtree(scratch)
    run(cfg, out=workdir, name="verify", show_progress=False, log=log)
    now = [r for r in read_metrics(workdir / "verify" / "metrics.jsonl") if isinstance(r, ValidationRow)]
    difference = None
    for old, new in zip(stored, now):
        if (old["examples"], old["score"]) != (new.examples, new.score):
            difference = (f"validation at {old['examples']:,} examples: {old['score']:.6f} stored, "
                          f"{new.score:.6f} now (at {new.examples:,})")
        elif (old["loss"] is None) != (new.loss is None) or (
                old["loss"] is not None and not math.isclose(old["loss"], new.loss, rel_tol=VERIFY_LOSS_RTOL)):
            difference = f"training loss at {old['examples']:,} examples: {old['loss']} stored, {new.loss} now"
        if difference:
            break
    if difference is None and len(now) < len(stored):
        difference = f"{len(now)} validations re-trained, {len(stored)} stored"
    return {"validations": len(stored), "matches": difference is None, "difference": difference,
            "code": code_record(), "stored_code": curve.get("code")}


def verify_table(table: str, tasks: str | None, seeds: int, models: str | None, results: Path, validations: int,
                 workdir: Path, log=lambda m: None) -> list[dict]:
    """`reproduce TABLE --verify`: verify_cell for every planned cell of the table that has a committed curve
    under `results`, re-trained under the config its result file stored (threads and device too); each verdict
    is written to results/verify/ (RESULTS.md reads it). Returns the rows."""
    from relreason.studies.cells import plan_cells
    from relreason.studies.tables import TABLES
    from relreason.tasks import expand_tasks

    study = TABLES.get(table)
    cells = plan_cells(study, expand_tasks(tasks if tasks is not None else study.tasks), seeds, None, workdir / "plan",
                       models=models.split(",") if models else None)
    rows = []
    for cell in cells:
        rel = cell.directory.relative_to(workdir / "plan" / CELLS)
        curve_file = Path(results) / CURVES / f"{rel}.json"
        if not curve_file.is_file():
            continue
        log(f"verifying {rel}")
        # the cell's own stored config, machine keys included: another thread count reorders float sums, and a
        # trajectory that differs by rounding would hide whether the code computes otherwise
        stored = Path(results) / CELLS / f"{rel}.json"
        config = config_from_dict(read_object(stored)["config"]) if stored.is_file() else cell.config
        got = verify_cell(config, read_object(curve_file), validations, workdir / str(rel), log)
        _write(Path(results) / VERIFY / f"{rel}.json", got)
        rows.append({"cell": str(rel), **got})
    if not rows:
        raise RelreasonError(f"no cell of {table} (these tasks, models and seeds) has a committed validation curve "
                             f"under {results}/{CURVES}", "run `relreason results` after its cells finish")
    return rows


def code_label(code: dict | None) -> str:
    """A code record in a few characters: the commit's first 9 hex digits (+dirty), else the source digest."""
    if not code:
        return "not recorded"
    if code.get("commit"):
        return code["commit"][:9] + ("+dirty" if code.get("dirty") else "")
    return f"source {code['source']}"


def verification(code: list[dict] | None, verified: dict | None, today: str) -> str:
    """What RESULTS.md says of a cell's code: re-trained by `reproduce --verify` (with which code, and whether
    its first validations came out the same), or not, flagged where the cell's code is not today's."""
    if verified is not None:
        if verified["matches"]:
            return f"same first {verified['validations']} validations with {code_label(verified['code'])}"
        return f"**differs** with {code_label(verified['code'])}: {verified['difference']}"
    if not code:
        return "not yet; **its code is not recorded**"
    if any(c.get("source") != today for c in code):
        return "not yet; **its code differs from today's**"
    return "not yet (today's code)"


def _files(results: Path, kind: str) -> list[tuple[tuple[str, str, str, int], Path]]:
    """((model, setting, task, seed), path) of every result file of `kind` (cells or progress)."""
    out = []
    for path in sorted((Path(results) / kind).glob("*/*/*/seed*.json")):
        model, setting, task = path.parts[-4:-1]
        out.append(((model, setting, task, seed_of_dir(path.stem)), path))
    return out


def cell_files(results: Path) -> list[tuple[tuple[str, str, str, int], RunResults]]:
    """((model, setting, task, seed), its results) of every finished cell under `results`, validated."""
    return [(key, RunResults.from_dict(read_object(path), str(path))) for key, path in _files(results, CELLS)]


def progress_files(results: Path) -> list[tuple[tuple[str, str, str, int], dict]]:
    """((model, setting, task, seed), how far it got) of every unfinished cell under `results`."""
    return [(key, read_object(path)) for key, path in _files(results, PROGRESS)]


def _protocol_identity(study: Study, variant, task: str, seed: int) -> dict:
    cfg = build_config(variant.model, task, variant.recipe, {"train": {"seed": seed}},
                       ablation=(study.name, variant.delta))
    return result_identity(cfg.to_dict())


def _protocols(model: str, task: str) -> set[str]:
    """The recipe labels that some table's column takes as its protocol for (model, task)."""
    from relreason.studies.tables import TABLES

    return {build_config(v.model, task, v.recipe).recipe for _, t in TABLES.items() for v in t.variants
            if v.model == model}


def table_result(study: Study, files: list[tuple[tuple, RunResults]]) -> dict | None:
    """The study's result (as relreason.studies.sweep.run_study returns it) from collected result files:
    the cells of its columns (model and delta) on its tasks, under the column's protocol recipe or a
    recipe that is no table's protocol (e.g. `quick`: kept, marked not comparable); the cells of
    another table's protocol (clrs30's MPNN in rt-table19) stay in that table. None when it has none."""
    from relreason.studies.cells import delta_slug
    from relreason.tasks import expand_tasks

    tasks = expand_tasks(study.tasks)
    records = []
    for v in study.variants:
        slug = f"+{delta_slug(v.delta)}" if v.delta else ""
        for (model, setting, task, seed), data in files:
            if model != v.model or task not in tasks or not (setting.endswith(slug) if slug else "+" not in setting):
                continue
            recipe = setting[: len(setting) - len(slug)] if slug else setting
            own = build_config(v.model, task, v.recipe).recipe
            if recipe != own and recipe in _protocols(model, task):
                continue
            why = [v.caveat] if v.caveat else []
            got, want = result_identity(data.config), _protocol_identity(study, v, task, seed)
            if got != want:
                why.append(protocol_difference(data.recipe, own, got, want))
            if task in study.not_comparable:
                why.append(study.not_comparable[task])
            records.append({"variant": v.label, "model": model, "setting": setting, "task": task, "seed": seed,
                            "score": data.test.score, "comparable": not why, "why_not": "; ".join(why),
                            "seconds": data.seconds, "hardware": data.hardware or [],
                            "command": data.command, "examples": data.examples,
                            "reproduce": f"relreason reproduce {study.name} --models {model} --tasks {task} "
                                         f"--seeds {seed + 1}" + _same_threads(data.config),
                            "recipe": data.recipe, "relreason": data.relreason, "code": data.code})
    if not records:
        return None
    used_tasks = [t for t in tasks if any(r["task"] == t for r in records)]
    used = [v.label for v in study.variants if any(r["variant"] == v.label for r in records)]
    return {"study": study.name, "variants": used, "tasks": used_tasks, "cells": records, "missing": [],
            "seeds": max(len([r for r in records if r["variant"] == v and r["task"] == t])
                         for v in used for t in used_tasks),
            "figures": [{"variant": v, "task": t, **to_plain(p)}
                        for (v, t), p in study.figures.items() if v in used and t in used_tasks],
            "averages": [{"variant": v, **to_plain(p)} for v, p in study.averages.items()
                         if v in used and used_tasks == tasks],
            "lower_is_better": False, "margin": study.margin}


def protocol_difference(recipe: str | None, protocol: str, got: dict, want: dict) -> str:
    """Why a cell is not its column's protocol, in words: the keys whose values differ (a cell trained before a
    protocol setting changed names that setting), or the recipe when it is another."""
    from relreason.studies.cells import config_differences

    keys = config_differences(got, want)
    if recipe != protocol or not keys:
        return f"recipe {recipe}, not the paper's protocol"
    shown = [f"{k} {_dotted(got, k)} where the protocol has {_dotted(want, k)}" for k in keys[:3]]
    return f"trained with {', '.join(shown)}{', ...' if len(keys) > 3 else ''}"


def _dotted(plain: dict, key: str):
    section, _, name = key.partition(".")
    value = plain.get(section, {}).get(name) if name else plain.get(section)
    return json.dumps(value)


def _same_threads(config: dict) -> str:
    """The --set that re-trains a cell on the torch thread count it ran with ("" for torch's default): another
    count reorders float sums, so the command RESULTS.md prints would follow another trajectory without it."""
    threads = (config.get("train") or {}).get("threads")
    return f" --set train.threads={threads}" if threads else ""


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


INTRODUCTION = "\n".join([
    "Generated by `relreason results` from the result files under `results/` (one per finished cell of",
    "`relreason reproduce`); never edited by hand. Columns: *ours*, the OOD test score (%) as mean ± sample",
    "std (ddof 1) over our seeds; *seeds*, \"k of n\" where the paper ran n; *paper*, the published mean ±",
    "its printed spread, a std unless marked \"se\" (a standard error) or \"± undefined\" (the paper does",
    "not say); *diff*, ours minus the paper; *95% CI of diff*, Welch's 95% interval of that difference from",
    "both means, stds and seed counts (Welch-Satterthwaite df, Student's t), a standard error turned into a",
    "std as se x √n, an undefined ± read both ways and the wider interval kept, and our side alone where",
    "the paper's has no spread (a ± of 0, one seed, none printed), as the cell says; *verdict*, against",
    "the table's equivalence margin (stated under its title): *agrees* when the interval lies inside",
    "± margin, *lower* / *higher* when it lies entirely below / above 0, otherwise *inconclusive*. One seed",
    "of ours gets the difference but no interval and no verdict, and a cell that is not the paper's",
    "protocol is shown but marked not comparable, never compared. The *average* row of a column averages",
    "only the tasks where a comparison means something (a published figure, comparable cells, two or more",
    "seeds of ours), names them and those left out, and compares with the paper's mean over the same",
    "tasks (the variance of a mean over k tasks: the sum of the tasks' variances over k²). Wall time: as",
    "the run measured it (training, validations and the final test, summed over its sessions), on the",
    "hardware named, which other work may have shared."])


@dataclass(frozen=True)
class Block:
    """One block of a report section: a paragraph (`text`, Markdown inline: `code`, **bold**, *italic*) or
    a table (`rows` of strings under `columns`, the same inline Markdown in its cells)."""

    text: str | None = None
    rows: list[dict] | None = None
    columns: list[str] | None = None


@dataclass(frozen=True)
class Section:
    """One section of the report: `title` (None: none), its blocks in order, and the result cells it
    shows (table_result's records: model, setting, task, seed, variant...) for the figures beside them.
    `kind`: "table" (a published table with our cells), "pointer" (its cells are shown under another
    table), "progress" (unfinished cells) or "empty"."""

    kind: str
    name: str
    title: str | None
    blocks: list[Block]
    cells: list[dict] = field(default_factory=list)


CELL_COLUMNS = ["model", "task", "seed", "score", "wall time", "hardware", "reproduce it with",
                "its last session ran", "code", "re-trained by `reproduce --verify`"]
SELECTION_COLUMNS = ["model", "task", "seed", "validations", "best validation", "reached by", "first at", "last at",
                     "test, selected", "test, last checkpoint", "selected, larger test"]
PROGRESS_COLUMNS = ["model", "setting", "task", "seed", "examples", "best validation", "wall time so far",
                    "hardware"]


def report_sections(results: Path, margin: float | None = None, tables: list[str] | None = None) -> list[Section]:
    """The report of the result files under `results`, as sections: what RESULTS.md (`write_report`) and
    the HTML page (relreason.studies.html_report) both show, computed once here. `margin`: the equivalence
    margin of every verdict instead of each table's own; `tables`: only these published tables (and no
    progress section); None: every table with results, then the cells in progress."""
    from relreason.studies.report import table_margin
    from relreason.studies.tables import TABLES

    files, progress = cell_files(results), progress_files(results)
    selection = {key: read_object(path) for key, path in _files(results, SELECTION)}
    verified = {key: read_object(path) for key, path in _files(results, VERIFY)}
    today = source_digest()
    sections: list[Section] = []
    seen: dict[tuple, str] = {}  # a cell's (model, setting, task, seed) -> the first table that showed it
    for name, study in TABLES.items():
        if tables is not None and name not in tables:
            continue
        result = table_result(study, files)
        if result is None:
            continue
        title = f"{name}: {study.description}"
        keys = [(r["model"], r["setting"], r["task"], r["seed"]) for r in result["cells"]]
        if tables is None and all(k in seen for k in keys):  # a table whose columns share cells (the RT in
            where = sorted({seen[k] for k in keys})          # the ablation tables)
            cells = sorted({f"{r['variant']} on {r['task']}" for r in result["cells"]})
            sections.append(Section("pointer", name, title, [Block(
                f"Its finished cells so far ({', '.join(cells)}) are shown under {', '.join(where)}; its other "
                f"columns have none yet (`relreason reproduce {name}`).")]))
            continue
        seen.update({k: name for k in keys if k not in seen})
        rows, columns = study_table(result, margin)
        verdict_margin = table_margin(result, margin)
        ordered = sorted(result["cells"], key=lambda r: (r["task"], r["variant"], r["seed"]))
        cell_rows = []
        for r in ordered:
            key = (r["model"], r["setting"], r["task"], r["seed"])
            cell_rows.append(dict(zip(CELL_COLUMNS, [
                r["variant"], r["task"], str(r["seed"]), f"{100 * r['score']:.2f}", _duration(r["seconds"]),
                "; ".join(r["hardware"]) or "not recorded", f"`{r['reproduce']}`", f"`{r['command'] or '?'}`",
                ", ".join(code_label(c) for c in r["code"]) if r["code"] else "not recorded",
                verification(r["code"], verified.get(key), today)])))
        blocks = [Block(f"Paper: {study.source}." +
                        (f" {study.note[:1].upper()}{study.note[1:]}." if study.note else "") +
                        (" No verdicts: this unit declares no equivalence margin." if verdict_margin is None else
                         f" Verdict margin: ±{verdict_margin:g} percentage point{'s' * (verdict_margin != 1)}.")),
                  Block(rows=rows, columns=columns), Block(rows=cell_rows, columns=CELL_COLUMNS)]
        chosen = [(r, selection.get((r["model"], r["setting"], r["task"], r["seed"]))) for r in ordered]
        if any(sel for _, sel in chosen):
            picked = []
            for r, sel in chosen:
                if sel:
                    large = f"{100 * sel['large_test']:.2f} ({sel['large_test_label']})" if "large_test" in sel \
                        else "not measured"
                    picked.append(dict(zip(SELECTION_COLUMNS, [
                        r["variant"], r["task"], str(r["seed"]), f"{sel['validations']:,}", f"{100 * sel['best_val']:.2f}",
                        str(sel["at_best"]), f"{sel['first_best_examples']:,}", f"{sel['last_best_examples']:,}",
                        f"{100 * sel['selected_test']:.2f}", f"{100 * sel['last_test']:.2f}", large])))
            blocks += [Block("Model selection (the protocol tests the first checkpoint that reached the best validation "
                             "score). Two diagnostics, never the protocol and never in a verdict: the last checkpoint "
                             "on the protocol's test set, and the selected checkpoint on a larger independent test set "
                             f"({DIAGNOSTIC_TEST_FACTOR} x the protocol's test samples at its size, seed "
                             f"{DIAGNOSTIC_TEST_SEED}; the protocol's 32 graphs carry about ±0.4-1 point of test-set "
                             "noise):"), Block(rows=picked, columns=SELECTION_COLUMNS)]
        sections.append(Section("table", name, title, blocks, ordered))
    if tables is None and progress:
        rows = []
        for (model, setting, task, seed), p in progress:
            best = "-" if p.get("best_val") is None else f"{100 * p['best_val']:.2f}"
            rows.append(dict(zip(PROGRESS_COLUMNS, [
                model, setting, task, str(seed), f"{p['examples']:,} of {p['train_examples']:,}", best,
                _duration(p.get("seconds")), "; ".join(p.get("hardware") or []) or "?"])))
        sections.append(Section("progress", "progress", "In progress", [
            Block("Cells started but not finished (resumed by the same `relreason reproduce` command): how far each "
                  "got."), Block(rows=rows, columns=PROGRESS_COLUMNS)]))
    plan = Path(results) / PLAN_FILE
    if tables is None and plan.is_file():
        sections.append(Section("plan", "plan", "Planned: the results lanes", [
            Block(f"What `scripts/reproduce_results.sh` trains, read from `{plan.name}` beside the result files: each "
                  "lane runs its lines one after another, the lanes side by side (one torch thread each). A finished "
                  "cell is committed under `cells/` and never trained again; a cell in progress resumes from its last "
                  "checkpoint (a session's unfinished cells are parked under `parked/` and restored first). Each "
                  "command resumes its own line; `bash scripts/reproduce_results.sh` resumes them all."),
            Block(rows=plan_status(read_plan(plan), results), columns=PLAN_COLUMNS)]))
    if not sections:
        sections.append(Section("empty", "empty", None, [
            Block("No results yet: run `relreason reproduce TABLE`, then `relreason results`.")]))
    return sections


def markdown_report(sections: list[Section]) -> str:
    """RESULTS.md's text: the title, INTRODUCTION, then every section's heading and blocks."""
    from relreason.eval.report import render

    lines = ["# Results", "", INTRODUCTION, ""]
    for s in sections:
        if s.title is not None:
            lines += [f"## {s.title}", ""]
        for b in s.blocks:
            lines += [b.text if b.text is not None else render(b.rows, b.columns, "md").rstrip("\n"), ""]
    return "\n".join(lines)


def write_report(results: Path, markdown: Path, margin: float | None = None) -> int:
    """Writes RESULTS.md from the result files under `results`; returns how many tables it shows.
    `margin`: the equivalence margin of every verdict instead of each table's own."""
    from relreason.data.store import atomic_path

    sections = report_sections(results, margin)
    with atomic_path(Path(markdown)) as tmp:
        tmp.write_text(markdown_report(sections))
    return sum(s.kind == "table" for s in sections)
