"""A study's result as tables: the one table printer of `ablate` and `reproduce`, and the files they write.

`study_table` gives, per task and column, ours as mean ± sample std (ddof 1) with its seed count, the
published figure with its own, ours minus the paper with Welch's 95% interval and the verdict against
the table's equivalence margin (relreason.runs.stats.difference, the one comparison of every table);
`size_breakdown` the shape / parse / CLRS scores per algorithm and size of text cells, and
`distribution_breakdown` the same in and out of distribution with the columns' differences.
`write_tables` writes them as BASE/results.{json,csv,md} (results.partial.* while cells are missing;
text cells add results.sizes.csv and results.distribution.csv);
`study_view` is what the commands print: the tables, then the source and the notes.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from relreason.data.store import atomic_path
from relreason.data.text import SCORE_TITLES, TEXT_PRESETS
from relreason.eval.report import render, rich_table
from relreason.runs.stats import Difference, Figure, MARGIN, Spread, Summary, Verdict, check_margin, difference
from relreason.studies.variants import Published

MISSING_SHOWN = 10  # missing cells named in `missing_note` (the rest are counted)


def _published(result: dict) -> tuple[dict, dict]:
    """The published figures and averages of a result, as Figures (results written before the "±" had a
    declared meaning hold "std" and no "spread": read as undefined, the harder reading to agree with)."""
    def figure(f: dict) -> Published:
        return Published(f["mean"], f.get("pm", f.get("std")), f.get("seeds"),
                         Spread(f.get("spread", Spread.UNDEFINED.value)))

    figures = {(f["variant"], f["task"]): figure(f) for f in result.get("figures", [])}
    averages = {a["variant"]: figure(a) for a in result.get("averages", [])}
    if not averages:  # results written before averages had their own list
        averages = {p["variant"]: Published(p["value"]) for p in result.get("paper", [])}
    return figures, averages


def table_margin(result: dict, margin: float | None = None) -> float | None:
    """The equivalence margin of a result's verdicts: `margin` (--margin) when given, else the one its table
    declares, else MARGIN (1 point) for scores in percent; None (no verdicts) for another unit that
    declares none."""
    if margin is not None:
        return check_margin(margin)
    if result.get("margin") is not None:
        return check_margin(result["margin"])
    return None if result.get("lower_is_better") else MARGIN


NO_VERDICT_ONE_SEED = "no verdict: one seed of ours, the difference is not meaningful"


def _compared(d: Difference | None) -> tuple[str, str, str]:
    """(diff, 95% CI of diff, verdict) of a Difference."""
    if d is None:
        return "-", "-", "-"
    if d.interval is None:
        return f"{d.diff:+.2f}", "-", NO_VERDICT_ONE_SEED
    return f"{d.diff:+.2f}", d.interval_text(), d.verdict.value if d.verdict else "no verdict: no margin declared"


COLUMNS = ["task", "model", "ours", "seeds", "paper", "diff", "95% CI of diff", "verdict"]


def study_table(result: dict, margin: float | None = None) -> tuple[list[dict], list[str]]:
    """The table of a study's result: one row per (task, column) with ours (mean ± sample std, seeds "k of
    n" where the paper ran n), the published figure (its ± labelled unless the paper says it is a std),
    ours minus the paper, Welch's 95% interval of that difference and the verdict against the margin
    (`table_margin`); cells that are not the protocol are never compared. Then per column an average row
    over the tasks where a comparison means something (a published figure, comparable cells, two or more
    seeds of ours), naming them and those left out, beside the paper's mean over the same tasks (or its
    printed average, when it printed no per-task figures and we have every task). Scores in percent; a
    lower-is-better metric (relative loss) in its unit."""
    scale = 1.0 if result.get("lower_is_better") else 100.0
    margin = table_margin(result, margin)
    figures, averages = _published(result)
    planned = result.get("seeds")
    by: dict[tuple[str, str], list[dict]] = {}
    for c in result["cells"]:
        by.setdefault((c["task"], c["variant"]), []).append(c)
    rows, seen = [], {}
    for task in result["tasks"]:
        for v in result["variants"]:
            cells = by.get((task, v), [])
            paper = figures.get((v, task))
            # the protocol's cells are pooled and compared; cells that are not (another recipe, or trained before
            # a protocol setting changed) are never pooled with them: a row of their own, not compared
            fresh = [c for c in cells if c.get("comparable", True)]
            other = [c for c in cells if not c.get("comparable", True)]
            for group, comparable in ((fresh, True), (other, False)) if fresh and other else ((cells, not other),):
                ours = Summary.of(c["score"] * scale for c in group)
                why = "; ".join(dict.fromkeys(c.get("why_not", "") for c in group if c.get("why_not")))
                if ours.n and not comparable:
                    diff, ci, verdict = "-", "-", f"not comparable: {why}"
                else:
                    diff, ci, verdict = _compared(difference(ours, paper, margin) if ours.n and paper else None)
                seeds = f"{ours.n}" + (f" of {paper.seeds}" if paper and paper.seeds else f" of {planned}"
                                       if planned and ours.n < planned else "")
                rows.append({"task": task, "model": v, "ours": ours.text(), "seeds": seeds if ours.n else "0",
                             "paper": paper.text() if paper else "-", "diff": diff, "95% CI of diff": ci,
                             "verdict": verdict})
                if comparable or not fresh:
                    seen[task, v] = (ours, comparable)
    if len(result["tasks"]) > 1:
        rows += [_average_row(result["tasks"], v, seen, figures, averages.get(v), margin) for v in result["variants"]]
    return rows, COLUMNS


def _average_row(tasks: list[str], v: str, seen: dict, figures: dict, average: Published | None,
                 margin: float | None) -> dict:
    """Column `v`'s average row: over the tasks whose comparison means something, against the paper's mean
    of its figures for the same tasks (or, when it printed only an average, that average: then only with
    every task); the tasks averaged and those left out (with why) named."""
    used, left = [], {}
    with_figures = any(fv == v for fv, _ in figures)
    for t in tasks:
        ours, comparable = seen[t, v]
        if not ours.n:
            continue
        why = ("not comparable" if not comparable else "one seed" if ours.n < 2
               else "no published figure" if with_figures and (v, t) not in figures else "")
        if why:
            left.setdefault(why, []).append(t)
        else:
            used.append(t)
    row = {"task": "average", "model": v, "ours": "-", "seeds": "-", "paper": "-",
           "diff": "-", "95% CI of diff": "-", "verdict": "-"}
    out = "; ".join(f"left out ({why}): {', '.join(ts)}" for why, ts in left.items())
    if not used:
        return {**row, "seeds": "no task that compares" + (f"; {out}" if out else "")}
    ours = [seen[t, v][0] for t in used]
    row.update({"ours": f"{sum(o.mean for o in ours) / len(ours):.2f}",
                "seeds": f"{len(used)} task{'s' * (len(used) > 1)}: {', '.join(used)}" + (f"; {out}" if out else "")})
    if with_figures:
        theirs = [figures[v, t] for t in used]
        paper = f"{sum(f.mean for f in theirs) / len(theirs):.2f} (its figures for the same tasks)"
    elif average is not None and len(used) == len(tasks):
        theirs, paper = [average] * len(used), average.text()
    else:
        return row
    return {**row, "paper": paper, **dict(zip(("diff", "95% CI of diff", "verdict"),
                                              _compared(difference(ours, theirs, margin))))}


def size_breakdown(result: dict) -> tuple[list[dict], list[str]] | None:
    """For text tasks (cells scored per algorithm and size): one row per (algorithm, size), and per
    variant the shape, parse and CLRS scores in percent, mean ± sample std over seeds, as the TransNAR
    paper's Figures 4-6 show them. None when no cell was scored per size."""
    by: dict[tuple[str, int, str, str], list[float]] = {}
    keys: list[tuple[str, int]] = []
    for c in result["cells"]:
        for entry in (c.get("per_task") or {}).values():
            if "size" not in entry or "clrs" not in entry.get("outputs", {}):
                continue
            key = (entry.get("algorithm", ""), int(entry["size"]))
            if key not in keys:
                keys.append(key)
            for score in SCORE_TITLES:
                by.setdefault((*key, c["variant"], score), []).append(100.0 * entry["outputs"][score])
    if not keys:
        return None
    variants = result["variants"]
    columns = ["algorithm", "size"] + [f"{v}: {name}" for v in variants for name in SCORE_TITLES.values()]
    rows = []
    for algorithm, size in sorted(keys):
        row: dict = {"algorithm": algorithm, "size": str(size)}
        for v in variants:
            for score, name in SCORE_TITLES.items():
                xs = by.get((algorithm, size, v, score))
                row[f"{v}: {name}"] = "-" if not xs else Summary.of(xs).text(1)
        rows.append(row)
    return rows, columns


def _text_entries(record: dict) -> list[dict]:
    """A cell's per-size text scores (`per_task` entries "ALG@N" with shape / parse / CLRS); none for a graph
    cell (its data has no text preset)."""
    if "preset" not in ((record.get("config") or {}).get("data") or {}):
        return []
    return [e for e in (record.get("per_task") or {}).values()
            if "size" in e and "algorithm" in e and "clrs" in e.get("outputs", {})]


def size_classes(record: dict) -> dict[int, str]:
    """A text cell's test sizes by where they lie against its training sizes (its preset's train split):
    "in distribution" (a training size), "OOD, interpolation" (inside their range) or "OOD, extrapolation"
    (beyond the largest), as the TransNAR paper reads its test sizes 12, 10 and 14."""
    out = {}
    for entry in _text_entries(record):
        preset = TEXT_PRESETS.get(record["config"]["data"]["preset"])
        trained = {p.length for p in preset.pieces("train", entry["algorithm"])}
        n = int(entry["size"])
        out[n] = (IN_DISTRIBUTION if n in trained else "OOD, extrapolation" if n > max(trained)
                  else "OOD, interpolation")
    return out


IN_DISTRIBUTION = "in distribution"
CLASS_ORDER = (IN_DISTRIBUTION, "OOD, interpolation", "OOD, extrapolation")


def distribution_breakdown(result: dict, margin: float | None = None) -> tuple[list[dict], list[str]] | None:
    """For text cells: per algorithm and column, the shape, parse and CLRS scores (%) in distribution and out of
    it (`size_classes`; a class's sizes averaged per cell), mean ± sample std over seeds; then per algorithm
    the first column minus each other one with Welch's 95% interval (relreason.runs.stats.difference, the
    other column's seeds as the reference) and the verdict against the margin (`table_margin`): the test of
    a claim that a column generalises where another does not. None when no cell was scored per size."""
    by: dict[tuple[str, str, str, str], list[float]] = {}  # (algorithm, variant, column, score) -> per cell
    heads: dict[str, set[int]] = {}
    algorithms: list[str] = []
    for c in result["cells"]:
        classes = size_classes(c)
        per_cell: dict[tuple[str, str, str], list[float]] = {}
        for entry in _text_entries(c):
            cls = classes[int(entry["size"])]
            heads.setdefault(cls, set()).add(int(entry["size"]))
            if entry["algorithm"] not in algorithms:
                algorithms.append(entry["algorithm"])
            for score in SCORE_TITLES:
                per_cell.setdefault((entry["algorithm"], cls, score), []).append(100.0 * entry["outputs"][score])
        for (algorithm, cls, score), xs in per_cell.items():
            by.setdefault((algorithm, c["variant"], cls, score), []).append(sum(xs) / len(xs))
    if not algorithms:
        return None
    margin = table_margin(result, margin)
    groups = [(cls, f"{cls} (n={'/'.join(map(str, sorted(heads[cls])))})") for cls in CLASS_ORDER if cls in heads]
    columns = ["algorithm", "model"] + [f"{head}: {name}" for _, head in groups for name in SCORE_TITLES.values()]
    variants = result["variants"]
    keys = [(cls, score) for cls, _ in groups for score in SCORE_TITLES]
    head_of = {(cls, score): f"{head}: {SCORE_TITLES[score]}" for cls, head in groups for score in SCORE_TITLES}
    rows, per_algorithm = [], {}
    for algorithm in sorted(algorithms):
        summaries = {v: {k: Summary.of(by.get((algorithm, v, *k), [])) for k in keys} for v in variants}
        per_algorithm[algorithm] = summaries
        for v in variants:
            rows.append({"algorithm": algorithm, "model": v,
                         **{head_of[k]: summaries[v][k].text(1) for k in keys}})
        for other in variants[1:]:
            rows.append({"algorithm": algorithm, "model": f"{variants[0]} minus {other}",
                         **{head_of[k]: _minus([summaries[variants[0]][k]], [summaries[other][k]], margin, other)
                            for k in keys}})
    if len(algorithms) > 1:
        rows += _distribution_average(per_algorithm, variants, keys, head_of, margin)
    return rows, columns


def _minus(mine: list[Summary], theirs: list[Summary], margin: float | None, other: str) -> str:
    """The first column minus `other` over the same algorithms (one Summary per algorithm on each side, the
    mean over them when several), with Welch's 95% interval and the verdict: "+30.0 [+27.0, +33.0] higher".
    Both columns are samples of ours: the difference alone while either side has one seed of some algorithm
    (a paper's figure without spread may stand for the truth; one seed of a column of ours may not)."""
    if not all(m.n for m in mine) or not all(t.n for t in theirs):
        return "-"
    d = difference(mine, [Figure(t.mean, t.std, t.n, Spread.STD) for t in theirs], margin, other)
    if any(t.n < 2 for t in theirs):
        return f"{d.diff:+.1f}"
    return f"{d.diff:+.1f}" + ("" if d.interval is None else
                               f" [{d.interval[0]:+.1f}, {d.interval[1]:+.1f}] {_versus(d, margin)}".rstrip())


def _distribution_average(per_algorithm: dict[str, dict], variants: list[str], keys: list[tuple[str, str]],
                          head_of: dict, margin: float | None) -> list[dict]:
    """The distribution table's average rows: each column's scores averaged over the algorithms where every
    column has two or more seeds (the study table's rule), then the first column minus each other one over
    those algorithms with Welch's interval (the variance of a mean over k algorithms: the sum of theirs over
    k^2); the algorithms averaged and those left out named. No rows when no algorithm has two seeds everywhere."""
    used = [a for a, s in per_algorithm.items() if all(s[v][keys[0]].n >= 2 for v in variants)]
    if not used:
        return []
    left = [a for a in per_algorithm if a not in used]
    same = [f"{v} on {a}" for a in used for v in variants if identical_seeds(per_algorithm[a][v], keys)]
    label = f"average ({len(used)}: {', '.join(used)}" + (f"; left out, one seed: {', '.join(left)}" if left
                                                         else "") + \
        (f"; seeds scoring identically (CLRS, every size; no spread to test against): {', '.join(same)}" if same
         else "") + ")"
    rows = [{"algorithm": label, "model": v,
             **{head_of[k]: f"{sum(per_algorithm[a][v][k].mean for a in used) / len(used):.1f}" for k in keys}}
            for v in variants]
    for other in variants[1:]:
        rows.append({"algorithm": label, "model": f"{variants[0]} minus {other}",
                     **{head_of[k]: _minus([per_algorithm[a][variants[0]][k] for a in used],
                                           [per_algorithm[a][other][k] for a in used], margin, other)
                        for k in keys}})
    return rows


def identical_seeds(summaries: dict, keys: list[tuple[str, str]]) -> bool:
    """Whether a column's seeds (two or more) score identically in CLRS score in every distribution class of
    `keys`: the mark of a model that gives one fixed answer for every input (the text transformer on
    naive_string_matcher: "0" for every question, docs/text.md); its zero spread leaves Welch's interval to the
    other column's alone. CLRS alone is read: the claim's score, whose spread Welch's interval rests on."""
    clrs = [summaries[k] for k in keys if k[1] == "clrs"]
    return bool(clrs) and all(x.n >= 2 and len(set(x.values)) == 1 for x in clrs)


def _versus(d: Difference, margin: float | None) -> str:
    """The verdict of one column against another: "equal within ±m" where a paper's would be "agrees"."""
    if d.verdict is None:
        return ""
    return f"equal within ±{margin:g}" if d.verdict is Verdict.AGREES else d.verdict.value


def write_tables(result: dict, base: Path) -> str:
    """Writes the study's tables as BASE/results.{json,csv,md} (results.partial.* while cells are missing,
    a complete set removing every partial one; text tasks add results.sizes.csv and results.distribution.csv).
    Returns the stem.
    The JSON is the study's result (every cell's record) with the printed table as "table"."""
    rows, columns = study_table(result)
    sizes = size_breakdown(result)  # text tasks: shape / parse / CLRS per algorithm and size
    ood = distribution_breakdown(result)  # and the same in and out of distribution, the columns compared
    extra = ({"sizes_table": sizes[0]} if sizes else {}) | ({"distribution_table": ood[0]} if ood else {})
    stem = "results.partial" if result["missing"] else "results"
    # the markdown holds both tables; the sizes' CSV is a file of its own (results.sizes.csv)
    files = {"json": json.dumps({**result, "table": rows, **extra}, indent=2),
             "csv": render(rows, columns, "csv"),
             "md": render(rows, columns, "md") + ("\n" + render(*ood, "md") if ood else "")
             + ("\n" + render(*sizes, "md") if sizes else "")}
    if sizes:
        files["sizes.csv"] = render(*sizes, "csv")
    if ood:
        files["distribution.csv"] = render(*ood, "csv")
    for ext, body in files.items():
        with atomic_path(base / f"{stem}.{ext}") as tmp:
            tmp.write_text(body)
    if not result["missing"]:  # the complete tables supersede every partial one
        for ext in ("json", "csv", "md", "sizes.csv", "distribution.csv"):
            (base / f"results.partial.{ext}").unlink(missing_ok=True)
    return stem


def study_view(result: dict, description: str) -> tuple[list[Table], list[str]]:
    """What `ablate` and `reproduce` print of a study's result: its table (and the per-size table of text
    cells), then the lines under them: where the published figures are printed, and why cells are not
    comparable."""
    rows, columns = study_table(result)
    margin = table_margin(result)
    seeds = result["seeds"]
    unit = "relative loss, lower is better" if result["lower_is_better"] else "test score %, higher is better"
    title = (f"{result['study']}: {description} ({unit}; ours: mean ± sample std (ddof 1) over up to {seeds} "
             f"seed{'s' * (seeds > 1)}; recipe {result['recipe']}, {result['train_examples']:,} training examples "
             "per run)")
    if result["missing"]:
        title += f" — PARTIAL: {len(result['cells'])} of {result['planned']} cells"
    tables = [rich_table(rows, columns, title)]
    ood = distribution_breakdown(result)
    if ood:
        tables.append(rich_table(*ood, f"{result['study']}: in and out of distribution, shape, parse and CLRS scores "
                                       f"(%), mean ± sample std over {seeds} seed{'s' * (seeds > 1)}; the "
                                       "differences with Welch's 95% interval and verdict"))
    sizes = size_breakdown(result)
    if sizes:
        tables.append(rich_table(*sizes, f"{result['study']}: shape, parse and CLRS scores (%) per algorithm and "
                                         f"size, mean ± sample std over {seeds} seed{'s' * (seeds > 1)}"))
    lines = []
    if result.get("source"):
        lines.append(f"paper: {result['source']}" + (f"; {result['note']}" if result.get("note") else ""))
    lines.append(verdict_line(margin))
    lines += [f"not comparable with the paper: {why}" for why in result.get("not_comparable", [])]
    return tables, lines


def verdict_line(margin: float | None) -> str:
    """What the verdicts of a table mean, with its margin."""
    if margin is None:
        return "verdict: none (this unit declares no equivalence margin; give --margin)"
    return (f"verdict: Welch's 95% interval of ours minus the paper inside ±{margin:g} = agrees; entirely below "
            "or above 0 = lower or higher; otherwise inconclusive (one seed of ours: no verdict)")


def missing_note(result: dict) -> str:
    """How many cells have no results yet, the first MISSING_SHOWN of them named."""
    missing = result["missing"]
    shown = "; ".join(missing[:MISSING_SHOWN]) + (f"; ... ({len(missing) - MISSING_SHOWN} more)"
                                                   if len(missing) > MISSING_SHOWN else "")
    return f"{len(missing)} of {result['planned']} cells have no results yet: {shown}"
