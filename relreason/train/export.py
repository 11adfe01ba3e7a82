"""Exporting runs: a portable bundle (weights + config + model card) and result tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from relreason.errors import RelreasonError
from relreason.eval.report import render, score_rows

FORMATS = ("md", "csv", "json", "latex")


def read_results(run_dir: Path) -> dict:
    path = Path(run_dir) / "results.json"
    if not path.is_file():
        raise RelreasonError(f"{run_dir} has no results.json (unfinished or not a run directory)",
                             "finish it with `relreason train ... --name NAME --resume`")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        raise RelreasonError(f"{path} is corrupt", "re-run the final evaluation with `relreason eval`") from None


def results_table(run_dir: Path, fmt: str) -> str:
    if fmt not in FORMATS:
        raise RelreasonError(f"unknown results format {fmt!r}", f"use one of: {', '.join(FORMATS)}")
    from relreason.tasks import METRIC_LABELS

    res = read_results(run_dir)
    rows, columns = _table(res)
    label = res.get("test_label") or f"test, n={res['test_size']}"
    metric = METRIC_LABELS.get(res.get("metric", "clrs"), res.get("metric"))
    return render(rows, columns, fmt, title=f"{res['model']} on {res['task']}, {label}: {metric}")


def _table(res: dict) -> tuple[list[dict], list[str]]:
    """The test's rows and columns: per feature, or per (algorithm, size) for text tasks."""
    test = {**res["test"], "per_task": res.get("per_task") or {}}
    if res.get("metric") == "text_clrs":
        from relreason.eval.text_score import text_table

        return text_table(test)
    return score_rows(test), ["feature", "score"]


def export_bundle(run_dir: Path, out_dir: Path | None = None) -> Path:
    """Copies best/ weights and config into a bundle with MODEL_CARD.md; `relreason eval BUNDLE` accepts it."""
    run_dir = Path(run_dir)
    res = read_results(run_dir)
    best = run_dir / "best"
    if not (best / "model.safetensors").is_file():
        raise RelreasonError(f"{run_dir} has no best/ checkpoint", "train it first")
    out_dir = run_dir / "export" if out_dir is None else Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise RelreasonError(f"{out_dir} already exists and is not empty", "choose another --out")
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in ("model.safetensors", "config.json"):  # contents only: new files take the exporting user's umask
        shutil.copyfile(best / name, tmp / name)
    (tmp / "MODEL_CARD.md").write_text(model_card(res))
    if out_dir.exists():
        out_dir.rmdir()
    tmp.rename(out_dir)
    return out_dir


def model_card(res: dict) -> str:
    from relreason.tasks import METRIC_LABELS

    metric = res.get("metric", "clrs")
    table = render(*_table(res), "md")
    label = res.get("test_label") or f"test, n={res['test_size']}"
    again = {"relative_loss": f"relreason eval THIS_DIRECTORY --ood {res['config']['data'].get('test_backbone', 100)}",
             "text_clrs": "relreason eval THIS_DIRECTORY --sizes "
                          + ",".join(map(str, res["config"]["data"].get("test_sizes", ())))
             }.get(metric, f"relreason eval THIS_DIRECTORY --ood {res['test_size']}")
    deviation = f"\n**Deviation from the paper's protocol:** {res['deviation']}\n" if res.get("deviation") else ""
    return (f"# {res['model']} on {res['task']}\n\n"
            f"Trained with relreason {res['relreason']}, seed {res['seed']}, recipe {res.get('recipe')}:"
            f" {res['examples']} training examples in {res['seconds']} s (final test included).\n{deviation}\n"
            f"Command:\n\n```\n{res.get('command') or '(python API)'}\n```\n\n"
            f"Best validation score {res['best_val']:.4f} (after {res['best_examples']} examples).\n\n"
            f"## Out-of-distribution test ({label}): {METRIC_LABELS.get(metric, metric)}\n\n{table}\n"
            f"Evaluate again with `{again}`.\n")
