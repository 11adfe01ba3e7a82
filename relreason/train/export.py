"""Exporting runs: a portable bundle (weights + config + model card), a folder in the Hugging Face model
repository layout (`export RUN --hub DIR`: model.safetensors, config.json, a README.md model card with the
Hub's YAML metadata), and result tables. `relreason eval DIR` and `relreason train --init DIR` read both."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from relreason.errors import RelreasonError
from relreason.eval.metric_kinds import resolve_metric
from relreason.eval.report import render, score_rows
from relreason.eval.text_score import text_table
from relreason.rundir import CHECKPOINT_CONFIG, WEIGHTS, RunDir, RunResults, check_no_links
from relreason.rundir import read_results as read_results_file
from relreason.tasks import METRIC_LABELS, feature_measure
from relreason.train.checkpoint import verify_checkpoint

FORMATS = ("md", "csv", "json", "latex")
HUB_CARD = "README.md"  # the Hub reads a model repository's card, and its YAML metadata, from README.md
HUB_TAGS = ("neural-algorithmic-reasoning", "clrs")  # every relreason model; the model and its tasks are added
LOADING_GUIDE = "relreason's docs/export.md, \"Loading exported weights without the CLI\""


def read_results(run_dir: Path) -> RunResults:
    """The results.json of a finished run, validated. Raises RelreasonError when it has none or it is damaged."""
    path = RunDir(run_dir).results
    if not path.is_file():
        raise RelreasonError(f"{run_dir} has no results.json (unfinished or not a run directory)",
                             "finish it with `relreason train ... --name NAME --resume`")
    return read_results_file(path, "re-run the final evaluation with `relreason eval`")


def results_table(run_dir: Path, fmt: str) -> str:
    if fmt not in FORMATS:
        raise RelreasonError(f"unknown results format {fmt!r}", f"use one of: {', '.join(FORMATS)}")

    res = read_results(run_dir)
    rows, columns = result_table(run_scores(res))
    label = res.test_label or f"test, n={res.test_size}"
    return render(rows, columns, fmt, title=result_title(res.model, res.task, label,
                                                         METRIC_LABELS.get(_metric(res), res.metric)))


def result_title(model: str, task: str, label: str, metric: str) -> str:
    """The title of a result table: "mpnn on bfs: test, n=64, 32 samples — CLRS score (...), higher is better"."""
    return f"{model} on {task}: {label} — {metric}"


def result_table(scores: dict) -> tuple[list[dict], list[str]]:
    """The one result table of `train` (its final test), `eval`, `export --results` and the model card: rows
    and columns of the scores as stored (fractions, squared errors), per output feature, the task score and
    each hint `scores` holds, each row with how it is measured and which way is better
    (relreason.tasks.feature_measure); for text tasks, per (algorithm, size) with TransNAR's shape, parse and
    CLRS scores. `scores`: an evaluation, or a run's test with its "task" and "metric" (`run_scores`)."""
    if scores.get("metric") == "text_clrs":
        return text_table(scores)

    return score_rows(scores, scores.get("task"), feature_measure), ["feature", "score", "measure"]


def run_scores(res: RunResults) -> dict:
    """A finished run's test as `result_table` reads it."""
    return {**res.test.to_dict(), "per_task": res.per_task, "task": res.task, "metric": _metric(res)}


def _metric(res: RunResults) -> str:
    """The run's metric: CLRS for results.json written before the key existed (only CLRS tasks were)."""
    return "clrs" if res.metric is None else res.metric


def export_bundle(run_dir: Path, out_dir: Path | None = None, hub: bool = False) -> Path:
    """Copies best/ weights and config into a bundle with MODEL_CARD.md; `relreason eval BUNDLE` accepts it.
    `hub`: the Hugging Face model repository layout instead, the card as README.md with its YAML metadata
    (`hub_card`). The checkpoint is checked first (its config valid, its weights readable and finite): a
    damaged one is refused, never exported. The folder appears whole or not at all (written beside, renamed)."""
    run_dir = Path(run_dir)
    check_no_links(run_dir)
    res = read_results(run_dir)
    files = RunDir(run_dir)
    best = files.best
    if not best.weights.is_file():
        raise RelreasonError(f"{run_dir} has no best/ checkpoint", "train it first")
    verify_checkpoint(best.path)
    out_dir = files.export if out_dir is None else Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise RelreasonError(f"{out_dir} already exists and is not empty", "choose another --out")
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in (WEIGHTS, CHECKPOINT_CONFIG):  # contents only: new files take the exporting user's umask
        shutil.copyfile(best.path / name, tmp / name)
    if hub:
        (tmp / HUB_CARD).write_text(hub_card(res, run_dir.name))
    else:
        (tmp / "MODEL_CARD.md").write_text(model_card(res))
    if out_dir.exists():
        out_dir.rmdir()
    tmp.rename(out_dir)
    return out_dir


def model_card(res: RunResults) -> str:
    metric = _metric(res)
    table = render(*result_table(run_scores(res)), "md")
    label = res.test_label or f"test, n={res.test_size}"
    again = {"relative_loss": f"relreason eval THIS_DIRECTORY --ood {res.config['data'].get('test_backbone', 100)}",
             "text_clrs": "relreason eval THIS_DIRECTORY --sizes "
                          + ",".join(map(str, res.config["data"].get("test_sizes", ())))
             }.get(metric, f"relreason eval THIS_DIRECTORY --ood {res.test_size}")
    deviation = f"\n**Deviation from the paper's protocol:** {res.deviation}\n" if res.deviation else ""
    needs = "\n".join(f"- `{p['distribution']}=={p['version']}` (its {p['kind']} `{p['name']}`)" for p in res.plugins or [])
    plugins = (f"\n**Plugins it needs** (install them before `relreason eval`; relreason refuses the bundle "
               f"without them):\n\n{needs}\n" if needs else
               "\nIt needs no plugin (everything in it is built into relreason).\n" if res.plugins is not None else "")
    return (f"# {res.model} on {res.task}\n\n"
            f"Trained with relreason {res.relreason}, seed {res.seed}, recipe {res.recipe}:"
            f" {res.examples} training examples in {res.seconds} s (final test included).\n{deviation}{plugins}\n"
            f"Command:\n\n```\n{res.command or '(python API)'}\n```\n\n"
            f"Best validation score {res.best_val:.4f} (after {res.best_examples} examples).\n\n"
            f"## Out-of-distribution test ({label}): {METRIC_LABELS.get(metric, metric)}\n\n{table}\n"
            f"Evaluate again with `{again}`.\n")


def hub_metadata(res: RunResults, name: str) -> dict:
    """The YAML header of a Hub model card: library_name, tags (the field's, the model's, the tasks'),
    datasets, metrics and the test score in the Hub's model-index format (percent for percent metrics)."""
    metric = resolve_metric(_metric(res), res.lower_is_better, res.task)
    tasks = res.tasks or [res.task]
    value = res.test.score * 100 if metric.percent else res.test.score
    label = res.test_label or f"test, n={res.test_size}"
    return {"library_name": "relreason", "tags": list(dict.fromkeys([*HUB_TAGS, res.model, *tasks])),
            "datasets": list(dict.fromkeys(["clrs30", *tasks])), "metrics": [metric.name],
            "model-index": [{"name": name, "results": [{
                "task": {"type": "algorithmic-reasoning", "name": res.task},
                "dataset": {"type": "clrs30", "name": f"CLRS-30 {res.task}", "split": label},
                "metrics": [{"type": metric.name, "name": f"{metric.label} ({label})", "value": round(value, 4),
                             "verified": False}]}]}]}


def hub_card(res: RunResults, name: str) -> str:
    """A Hub model card: the YAML metadata (hub_metadata), then the bundle's model card with the protocol
    line (recipe and its deviation from the paper), the plugins needed, and how to load the weights."""
    header = yaml.safe_dump(hub_metadata(res, name), sort_keys=False, allow_unicode=True)
    protocol = (f"**Protocol:** recipe `{res.recipe}`" if res.recipe else "**Protocol:** configured in Python") + (
        ", the paper's protocol as that recipe states it (no deviation recorded).\n" if not res.deviation else
        " (its deviation below).\n")
    body = model_card(res)
    title, _, rest = body.partition("\n\n")
    return (f"---\n{header}---\n\n{title}\n\n{protocol}\n{rest}\n"
            "## Loading\n\n"
            "`relreason eval THIS_DIRECTORY` evaluates it; `relreason train MODEL TASK --init THIS_DIRECTORY` fine-tunes "
            "it. Without the CLI: `config.json` holds the resolved config (under `config`) from which relreason's "
            "registry builds the model, and `model.safetensors` its weights (loaded strictly): see "
            f"{LOADING_GUIDE}.\n")
