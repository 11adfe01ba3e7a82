"""RESULTS.md: our numbers beside the papers', generated from the result files (relreason.studies.results),
never typed.

    relreason results            # collect reproduce/cells/**/run/results.json, then write RESULTS.md

`write_report` reads only the result files: first a summary (per table and column: cells done, our average
against the paper's with its verdict, the devices and the compute; also written into README.md between
README_MARKERS), then for every published table (relreason.studies.tables) that has
results, the table as `relreason reproduce` prints it (ours as mean ± sample std with seed counts, the published
figure, the difference with Welch's 95% interval and the verdict against the table's equivalence margin, cells
that are not the paper's protocol marked so), then each cell's command, hardware and wall time, the
cells still in progress with how far they got, and, where `results/plan.txt` exists, how far each of its
planned `reproduce` commands got (relreason.studies.plan). `report_sections` computes that report once for
RESULTS.md and for the HTML page (relreason.studies.html_report).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from relreason.config import build_config, to_plain
from relreason.rundir import RunResults, read_object
from relreason.runs.stats import Summary, Verdict
from relreason.runtime import source_digest
from relreason.studies.cells import config_differences, delta_slug, protocol_nar, result_identity
from relreason.studies.plan import PLAN_COLUMNS, PLAN_FILE, plan_status, read_plan
from relreason.studies.report import distribution_breakdown, study_table, table_margin
from relreason.studies.results import (DIAGNOSTIC_TEST_FACTOR, DIAGNOSTIC_TEST_MAX, DIAGNOSTIC_TEST_SEED, SELECTION,
                                       VERIFY, cell_files, progress_files, result_files)
from relreason.data.store import atomic_path
from relreason.eval.report import render
from relreason.studies.tables import TABLES
from relreason.studies.variants import Study
from relreason.tasks import TASKS, expand_tasks, task_entries


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
        # which comparison it was: on the device kind the cell was made on, or on the CPU within tolerances
        # and under which torch (a release draws its own initial weights: a verdict holds for the cell's release)
        under = f", under torch {verified['torch']}" if verified.get("torch") else ""
        how = f" ({verified['compared']}{under})" if verified.get("compared") else ""
        if verified["matches"]:
            return f"same first {verified['validations']} validations with {code_label(verified['code'])}{how}"
        return f"**differs** with {code_label(verified['code'])}{how}: {verified['difference']}"
    if not code:
        return "not yet; **its code is not recorded**"
    if any(c.get("source") != today for c in code):
        return "not yet; **its code differs from today's**"
    return "not yet (today's code)"


def _protocol_identity(study: Study, variant, task: str, seed: int, stored: dict) -> dict:
    over: dict = {"train": {"seed": seed}}
    if variant.nar is not None and (stored.get("model") or {}).get("nar"):  # the NAR it read, at its protocol
        over["model"] = protocol_nar(study, variant, task, seed, stored["model"]["nar"])
    cfg = build_config(variant.model, task, variant.recipe, over, ablation=(study.name, variant.delta))
    return result_identity(cfg.to_dict())


def _protocols(model: str, task: str) -> set[str]:
    """The recipe labels that some table's column takes as its protocol for (model, task)."""
    columns = [c for _, t in TABLES.items() for v in t.variants for c in (v, v.nar) if c is not None]
    return {build_config(v.model, task, v.recipe).recipe for v in columns if v.model == model}


def claim_lines(name: str, ood: tuple[list[dict], list[str]] | None) -> list[str]:
    """The summary's line for a text table's claim: from its in/out-of-distribution table's average rows, the
    first column minus each other one averaged over the algorithms, CLRS score per distribution class, with
    Welch's interval and verdict; no line before some algorithm has two seeds in every column."""
    if ood is None:
        return []
    rows, columns = ood
    clrs = [c for c in columns if c.endswith(": CLRS")]
    return [f"{name}, {r['model']}, {r['algorithm']}, CLRS: " + "; ".join(f"{c.removesuffix(': CLRS')} {r[c]}"
                                                                          for c in clrs)
            for r in rows if r["algorithm"].startswith("average") and " minus " in r["model"]]


def _distribution_blocks(ood: tuple[list[dict], list[str]] | None) -> list[Block]:
    """A text table's scores in and out of distribution with its columns' differences (none for graph cells)."""
    return [] if ood is None else [Block("In and out of distribution (shape, parse and CLRS scores in %, mean ± "
                                         "sample std over seeds; the first column minus the other with Welch's "
                                         "95% interval):"), Block(rows=ood[0], columns=ood[1])]


def table_result(study: Study, files: list[tuple[tuple, RunResults]]) -> dict | None:
    """The study's result (as relreason.studies.sweep.run_study returns it) from collected result files:
    the cells of its columns (model and delta) on its tasks, under the column's protocol recipe or a
    recipe that is no table's protocol (e.g. `quick`: kept, marked not comparable); the cells of
    another table's protocol (clrs30's MPNN in rt-table19) stay in that table. None when it has none."""
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
            got, want = result_identity(data.config), _protocol_identity(study, v, task, seed, data.config)
            if got != want:
                why.append(protocol_difference(data.recipe, own, got, want))
            if task in study.not_comparable:
                why.append(study.not_comparable[task])
            records.append(_record(v.label, (model, setting, task, seed), data, "; ".join(why),
                                   f"relreason reproduce {study.name} --models {remake_models(study, v)} "
                                   f"--tasks {task} --seeds {seed + 1}"))
    if not records:
        return None
    used_tasks = [t for t in tasks if any(r["task"] == t for r in records)]
    used = [v.label for v in study.variants if any(r["variant"] == v.label for r in records)]
    return {"study": study.name, "variants": used, "tasks": used_tasks, "cells": records, "missing": [],
            # the seeds planned: the most any cell has, or the study's own count (a study whose paper gives none)
            "seeds": max(study.seeds or 0, *(len([r for r in records if r["variant"] == v and r["task"] == t])
                                             for v in used for t in used_tasks)),
            "figures": [{"variant": v, "task": t, **to_plain(p)}
                        for (v, t), p in study.figures.items() if v in used and t in used_tasks],
            "averages": [{"variant": v, **to_plain(p)} for v, p in study.averages.items()
                         if v in used and used_tasks == tasks],
            "lower_is_better": TASKS.get(used_tasks[0]).lower_is_better, "margin": study.margin}


def remake_models(study: Study, variant) -> str:
    """What `reproduce --models` names to re-make `variant`'s cells: its model, or its column's label (quoted)
    where another column of the study has the same model (relreason.studies.cells.picks reads both). TransNAR's
    study: `--models 'text transformer'` selects that column alone; the TransNAR column's label is its model's
    name, so its command re-makes both columns' cells of that task and seed."""
    if sum(v.model == variant.model for v in study.variants) > 1:
        return shlex.quote(variant.label)
    return variant.model


def _record(variant: str, key: tuple, data: RunResults, why: str, reproduce: str) -> dict:
    """One cell of a table (or of the NARs it reads) as the report uses it: column `variant`, its key (model,
    setting, task, seed), its result file's figures, why it is not its column's protocol ("": it is) and the
    command that re-makes it (on the thread count it ran with)."""
    model, setting, task, seed = key
    return {"variant": variant, "model": model, "setting": setting, "task": task, "seed": seed,
            "score": data.test.score, "comparable": not why, "why_not": why, "seconds": data.seconds,
            "hardware": data.hardware or [], "command": data.command, "examples": data.examples,
            "test_label": data.test_label, "best_val": data.best_val,
            "val_size": ((data.config or {}).get("data") or {}).get("val_size"),
            "reproduce": reproduce + _same_threads(data.config), "recipe": data.recipe, "relreason": data.relreason,
            "code": data.code, "per_task": data.per_task, "config": data.config}


def nar_result(study: Study, files: list[tuple[tuple, RunResults]]) -> dict | None:
    """The NAR cells that a study's columns read (`Variant.nar`: the TransNAR study's pre-trained Triplet-GMPNN,
    one per algorithm and seed), as a result like table_result's: they stand in none of the study's comparisons,
    but they are cells like any other (their compute, code and verification count), and their own test scores
    say how good a NAR each TransNAR cell read. A NAR cell trained otherwise than its column's protocol is marked
    not comparable. None when the study reads no NAR or none is done."""
    nars = list({v.nar.label: v.nar for v in study.variants if v.nar is not None}.values())
    algorithms = list(dict.fromkeys(e.algorithm for t in expand_tasks(study.tasks) for e in task_entries(t)
                                    if e.algorithm is not None))
    records = []
    for v in nars:
        for algorithm in algorithms:
            recipe = build_config(v.model, algorithm, v.recipe).recipe
            setting = recipe + (f"+{delta_slug(v.delta)}" if v.delta else "")
            for (model, got_setting, task, seed), data in files:
                if (model, got_setting, task) != (v.model, setting, algorithm):
                    continue
                protocol = build_config(v.model, algorithm, v.recipe, {"train": {"seed": seed}},
                                        ablation=(study.name, v.delta))
                got, want = result_identity(data.config), result_identity(protocol.to_dict())
                why = "" if got == want else protocol_difference(data.recipe, recipe, got, want)
                records.append(_record(v.label, (model, setting, task, seed), data, why,
                                       f"relreason train {model} {task} --recipe {v.recipe} --set train.seed={seed}"))
    if not records:
        return None
    return {"study": study.name, "variants": [v.label for v in nars if any(r["variant"] == v.label for r in records)],
            "tasks": [a for a in algorithms if any(r["task"] == a for r in records)], "cells": records}


def protocol_difference(recipe: str | None, protocol: str, got: dict, want: dict) -> str:
    """Why a cell is not its column's protocol, in words: the keys whose values differ (a cell trained before a
    protocol setting changed names that setting), or the recipe when it is another."""
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


def duration(seconds: float | None) -> str:
    """A wall time in hours (from one hour) or minutes, "?" when unknown."""
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
    every, progress = cell_files(results), progress_files(results)
    # a cell whose code is not recorded cannot be verified: shown in a section of its own, out of every table
    files = [(key, res) for key, res in every if res.code]
    unrecorded = [(key, res) for key, res in every if not res.code]
    selection = {key: read_object(path) for key, path in result_files(results, SELECTION)}
    verified = {key: read_object(path) for key, path in result_files(results, VERIFY)}
    today = source_digest()
    sections: list[Section] = []
    summary: list[dict] = []
    claims: list[str] = []  # the text tables' claims, averaged over their algorithms (claim_lines)
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
        ood = distribution_breakdown(result, margin)
        claims += claim_lines(name, ood)
        ordered = sorted(result["cells"], key=lambda r: (r["task"], r["variant"], r["seed"]))
        cell_rows = _cell_rows(ordered, verified, today)
        blocks = [Block(f"Paper: {study.source}." +
                        (f" {study.note[:1].upper()}{study.note[1:]}." if study.note else "") +
                        (" No verdicts: this unit declares no equivalence margin." if verdict_margin is None else
                         f" Verdict margin: ±{verdict_margin:g} " + ("(relative loss)." if result["lower_is_better"]
                                                                     else f"percentage point{'s' * (verdict_margin != 1)}."))),
                  Block(rows=rows, columns=columns), *_distribution_blocks(ood),
                  Block(rows=cell_rows, columns=CELL_COLUMNS)]
        nars = nar_result(study, files)
        if nars is not None:
            blocks += _nar_blocks(nars, verified, today)
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
                             f"({DIAGNOSTIC_TEST_FACTOR} x the protocol's test samples at its size, but at most "
                             f"{DIAGNOSTIC_TEST_MAX:,}, seed {DIAGNOSTIC_TEST_SEED}; the protocol's 32 graphs carry "
                             "about ±0.4-1 point of test-set noise; each row names the samples it was scored on):"), Block(rows=picked, columns=SELECTION_COLUMNS)]
        sections.append(Section("table", name, title, blocks, ordered))
        summary += summary_rows(study, result, rows, verified)
        if nars is not None:
            summary += summary_rows(study, nars, [], verified)
    if tables is None and unrecorded:
        rows = [dict(zip(UNRECORDED_COLUMNS, [
            model, setting, task, str(seed), f"{100 * res.test.score:.2f}", duration(res.seconds),
            "; ".join(res.hardware or []) or "not recorded"])) for (model, setting, task, seed), res in unrecorded]
        sections.append(Section("unrecorded", "unrecorded", "Cells whose code is not recorded", [
            Block("Trained before a cell recorded the code that made it, so `reproduce --verify` cannot check them: "
                  "they stand in no table and no average, and `relreason reproduce` trains them again under their "
                  "table's command. Their scores, for the record:"), Block(rows=rows, columns=UNRECORDED_COLUMNS)]))
    if tables is None and progress:
        rows = []
        for (model, setting, task, seed), p in progress:
            best = "-" if p.get("best_val") is None else f"{100 * p['best_val']:.2f}"
            rows.append(dict(zip(PROGRESS_COLUMNS, [
                model, setting, task, str(seed), f"{p['examples']:,} of {p['train_examples']:,}", best,
                duration(p.get("seconds")), "; ".join(p.get("hardware") or []) or "?"])))
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
    elif tables is None and summary:
        claim = [Block("The claims the studies test, averaged over their algorithms (the first column minus the "
                       "other, Welch's 95% interval and verdict; per algorithm in the study's section): " +
                       " ".join(f"{line}." for line in claims))] if claims else []
        sections.insert(0, Section("summary", "summary", "Summary", [Block(SUMMARY_TEXT),
                                                                       Block(rows=summary, columns=SUMMARY_COLUMNS),
                                                                       *claim]))
    return sections


def _cell_rows(cells: list[dict], verified: dict, today: str) -> list[dict]:
    """One row per cell (CELL_COLUMNS): its score, wall time, hardware, commands, code and verification."""
    return [dict(zip(CELL_COLUMNS, [
        r["variant"], r["task"], str(r["seed"]), f"{100 * r['score']:.2f}", duration(r["seconds"]),
        "; ".join(r["hardware"]) or "not recorded", f"`{r['reproduce']}`",
        f"`{r['command']}`" if r["command"] else "not recorded",
        ", ".join(code_label(c) for c in r["code"]) if r["code"] else "not recorded",
        verification(r["code"], verified.get((r["model"], r["setting"], r["task"], r["seed"])), today)]))
        for r in cells]


NAR_COLUMNS = ["algorithm", "model", "seeds", "best validation", "validated at", "test score", "tested on"]


def _nar_blocks(nars: dict, verified: dict, today: str) -> list[Block]:
    """The blocks of a study's NAR cells (nar_result): per algorithm the NARs' best validation and test over
    seeds, then each cell as the table's cells are shown."""
    ordered = sorted(nars["cells"], key=lambda r: (r["task"], r["variant"], r["seed"]))
    rows = []
    for task in sorted(nars["tasks"]):
        for v in nars["variants"]:
            cells = [r for r in ordered if r["task"] == task and r["variant"] == v]
            if not cells:
                continue
            why = "; ".join(dict.fromkeys(r["why_not"] for r in cells if r["why_not"]))
            rows.append(dict(zip(NAR_COLUMNS, [
                task, v, str(len(cells)),
                Summary.of(None if r["best_val"] is None else 100 * r["best_val"] for r in cells).text(),
                "; ".join(dict.fromkeys(f"n={r['val_size']}" if r["val_size"] else "?" for r in cells)),
                Summary.of(100 * r["score"] for r in cells).text() + (f" (not the protocol: {why})" if why else ""),
                "; ".join(dict.fromkeys(r["test_label"] or "?" for r in cells))])))
    return [Block("The NARs its columns read, one per algorithm and seed (pre-trained first, then frozen): cells "
                  "of their own, in no comparison above. Their own scores on the algorithm's graph task, mean ± "
                  "sample std over seeds: the best validation (the checkpoint the TransNAR cell of that algorithm "
                  "and seed read) and that checkpoint's test, at the benchmark's test size, which may lie far "
                  "beyond the text sizes the study tests:"),
            Block(rows=rows, columns=NAR_COLUMNS), Block(rows=_cell_rows(ordered, verified, today),
                                                         columns=CELL_COLUMNS)]


SUMMARY_COLUMNS = ["table", "column", "cells done", "ours (average)", "paper (same tasks)", "verdict", "verified",
                   "device", "compute"]
SUMMARY_TEXT = ("Each published table with finished cells, one row per column: its comparable cells done against "
                "the table at the paper's seed count (a study's own where the paper gives none), our average over "
                "the tasks that compare (two or more seeds of ours and a published figure) beside the paper's over "
                "the same tasks, with the verdict; how many of its cells `reproduce --verify` re-trained to the same "
                "first validations (and how many it found to differ, and of those how many it re-trained on another "
                "device kind than made them, where float rounding alone parts trajectories); the devices its cells ran "
                "on and their wall time summed. The sections below give every cell.")
UNRECORDED_COLUMNS = ["model", "setting", "task", "seed", "score", "wall time", "hardware"]


def _device(hardware: str) -> str:
    """A hardware record's machine and device ("AMD EPYC (2 cores), 1 torch thread, cpu, torch ..." -> "AMD
    EPYC (2 cores), cpu")."""
    parts = hardware.split(", ")
    return ", ".join([parts[0], *[p for p in parts[1:] if p == "cpu" or p.startswith(("cuda", "mps"))]])


def summary_rows(study: Study, result: dict, rows: list[dict], verified: dict) -> list[dict]:
    """The summary's rows for one table: per column with cells, how many of its comparable cells are done
    (of tasks x the paper's seeds, where it printed them, else the study's own), its average row's figures
    (study_table's), how many of its cells `reproduce --verify` found the same and how many it found to differ
    (`verified`: the verify records by (model, setting, task, seed)), the devices and the summed wall time."""
    out = []
    for v in result["variants"]:
        cells = [c for c in result["cells"] if c["variant"] == v]
        comparable = sum(bool(c.get("comparable", True)) for c in cells)
        seeds = study.column_seeds(v) or 0  # the paper's count, else the study's own (a NAR column: its study's)
        tasks = len(expand_tasks(study.tasks))
        done = f"{comparable} of {tasks * seeds}" if seeds else f"{comparable} ({tasks} tasks)"
        if comparable < len(cells):
            done += f"; {len(cells) - comparable} not comparable"
        average = next((r for r in rows if r["task"] == "average" and r["model"] == v), None)
        ours = "-"
        if average is not None and average["ours"] != "-":
            ours = f"{average['ours']} over {average['seeds'].split(':')[0]}"
        elif average is None and len(result["tasks"]) == 1:  # study_table averages only over several tasks
            (task,) = result["tasks"]
            row = next((r for r in rows if r["task"] == task and r["model"] == v), None)
            if row is not None and row["verdict"] in {v.value for v in Verdict}:  # a comparison that means something: what the average would show
                average = row
                ours = f"{row['ours'].split(' ')[0]} over 1 task"
        checks = [verified.get((c["model"], c["setting"], c["task"], c["seed"])) for c in cells]
        same, differ = sum(bool(v and v["matches"]) for v in checks), sum(bool(v and not v["matches"]) for v in checks)
        across = sum(bool(v and not v["matches"] and v.get("device", "cpu") != v.get("made_on", "cpu")) for v in checks)
        checked = f"{same} of {len(cells)}" + (f"; {differ} differ{'s' * (differ == 1)}" if differ else "") + (
            f" ({across} re-trained on another device kind than made it)" if across else "")
        devices = sorted({_device(h) for c in cells for h in c["hardware"]}) or ["not recorded"]
        seconds = sum(c["seconds"] or 0.0 for c in cells)
        out.append(dict(zip(SUMMARY_COLUMNS, [
            study.name, v, done, ours, average["paper"] if average else "-", average["verdict"] if average else "-",
            checked, "; ".join(devices), duration(seconds)])))
    return out


README_MARKERS = ("<!-- results-summary: written by `relreason results`; do not edit -->", "<!-- /results-summary -->")


def write_readme_summary(readme: Path, sections: list[Section]) -> bool:
    """Writes the report's summary table between README_MARKERS in `readme` (README.md's "Results so far"), so
    that README's figures come from the result files too. False (nothing written) when the file or its markers
    are missing."""
    if not Path(readme).is_file():
        return False
    text = Path(readme).read_text()
    start, end = text.find(README_MARKERS[0]), text.find(README_MARKERS[1])
    if start < 0 or end < start:
        return False
    summary = next((s for s in sections if s.kind == "summary"), None)
    body = "\n\n".join([render(summary.blocks[1].rows, summary.blocks[1].columns, "md").rstrip("\n"),
                        *(b.text for b in summary.blocks[2:])]) if summary else "No results yet."
    new = text[: start + len(README_MARKERS[0])] + "\n" + body + "\n" + text[end:]
    if new != text:
        with atomic_path(Path(readme)) as tmp:
            tmp.write_text(new)
    return True


def markdown_report(sections: list[Section]) -> str:
    """RESULTS.md's text: the title, INTRODUCTION, then every section's heading and blocks."""
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
    sections = report_sections(results, margin)
    with atomic_path(Path(markdown)) as tmp:
        tmp.write_text(markdown_report(sections))
    write_readme_summary(Path(markdown).parent / "README.md", sections)
    return sum(s.kind == "table" for s in sections)
