"""Figures of runs: learning curves of several runs, the bar chart of an ablation, and scores
against graph size of size sweeps.

    from relreason.runs.discovery import load_runs
    from relreason.runs.plot import curves_figure, ood_figure, save_figure
    fig = curves_figure(load_runs(["runs/a", "runs/b"]))
    save_figure(fig, "curves.png")
    fig = ood_figure([("runs/a", read_sweep("runs/a")), ...], by="model")   # relreason.eval.grid.read_sweep

matplotlib is an optional dependency (`pip install 'relreason[plot]'`), imported only when a figure
is made; figures are built on `matplotlib.figure.Figure` directly (no pyplot: no global state, no GUI
backend). Every function returns the Figure so tests and notebooks can inspect or restyle it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional

from relreason.data.store import atomic_path
from relreason.errors import RelreasonError
from relreason.eval.metric_kinds import UNKNOWN_METRIC, Metric, MetricLookup, resolve_metric
from relreason.rundir import RunDir, read_metrics, validations
from relreason.runs.discovery import discover_runs
from relreason.runs.records import RunInfo
from relreason.runs.stats import Summary as Stat

FORMATS = ("png", "svg", "pdf")


def require_matplotlib() -> None:
    """Raises the one-line RelreasonError that says how to install matplotlib when it is missing."""
    try:
        import matplotlib  # noqa: F401  (optional: the plot extra)
    except ImportError:
        raise RelreasonError("plotting needs matplotlib: pip install 'relreason[plot]'") from None


def _figure(**kwargs):
    require_matplotlib()
    from matplotlib.figure import Figure  # optional: the plot extra

    return Figure(**kwargs)


def _scale(metric: Metric) -> float:
    return 100.0 if metric.percent else 1.0


def curves_figure(runs: list[RunInfo]):
    """Validation score and training loss against training examples, one line per run in each panel.

    The loss is the one the loop records at each validation: that of the last training batch, so
    it is noisy. A dot marks each run's best validation so far (the checkpoint tested OOD at the end).
    Raises RelreasonError when the runs' metrics differ or no run has a validation record."""
    metrics = {(r.metric.name, r.metric.lower_is_better): r.metric for r in runs}
    if len(metrics) > 1:
        names = ", ".join(f"{r.name} ({r.metric.name})" for r in runs)
        raise RelreasonError(f"cannot plot scores of different metrics on one axis: {names}",
                             "plot the runs of each metric separately")
    metric = next(iter(metrics.values()), UNKNOWN_METRIC)
    curves = [(r, validations(read_metrics(RunDir(r.path).metrics))) for r in runs]
    if not any(vals for _, vals in curves):
        raise RelreasonError("no validation records to plot in " + ", ".join(r.name for r in runs),
                             "metrics.jsonl is written at each validation; let the run reach its first one")
    fig = _figure(figsize=(11, 4.2), layout="constrained")
    ax_score, ax_loss = fig.subplots(1, 2)
    scale = _scale(metric)
    any_loss = False
    for r, vals in curves:
        if not vals:
            continue
        x = [v.examples for v in vals]
        (line,) = ax_score.plot(x, [v.score * scale for v in vals], label=r.name, linewidth=1.5)
        if r.best_examples is not None and r.best_val is not None:
            ax_score.scatter([r.best_examples], [r.best_val * scale], color=line.get_color(), zorder=3, s=18)
        losses = [(v.examples, v.loss) for v in vals if v.loss is not None]
        if losses:
            any_loss = True
            ax_loss.plot(*zip(*losses), label=r.name, color=line.get_color(), linewidth=1.5)
    ax_score.set_xlabel("training examples")
    ax_score.set_ylabel(f"validation score ({metric.describe()})")
    ax_score.set_title("validation (dot: the best checkpoint, tested OOD at the end)")
    ax_loss.set_xlabel("training examples")
    ax_loss.set_ylabel("training loss (last batch)")
    ax_loss.set_title("training loss")
    if any_loss and all(y > 0 for ln in ax_loss.get_lines() for y in ln.get_ydata()):
        from matplotlib.ticker import FuncFormatter  # optional: the plot extra

        ax_loss.set_yscale("log")  # losses fall by orders of magnitude over a full schedule
        plain = FuncFormatter(lambda y, _: f"{y:g}")
        ax_loss.yaxis.set_major_formatter(plain)
        ax_loss.yaxis.set_minor_formatter(plain)
    for ax in (ax_score, ax_loss):
        ax.grid(alpha=0.3)
    ax_score.legend(fontsize="small", loc="best")
    return fig


def ablation_figure(path: Path, data: dict, metric_of: Optional[MetricLookup] = None):
    """The paper-style bars of an ablation folder's results.json: per task (and their average) one bar
    per variant, the mean over seeds with a sample-std (ddof=1) error bar (as `relreason ablate` prints).

    The average's error bar is the std over seeds of each seed's mean over tasks. Tasks scored with
    different metrics get a panel each."""
    variants = [v for v in data.get("variants", []) if isinstance(v, str)]
    cells = [c for c in data.get("cells", []) if isinstance(c, dict) and isinstance(c.get("score"), (int, float))]
    tasks = [t for t in data.get("tasks", []) if any(c.get("task") == t for c in cells)]
    if not variants or not tasks:
        raise RelreasonError(f"{path}/results.json holds no finished cells to plot",
                             f"run the ablation first: relreason ablate {data.get('ablation', 'NAME')}")
    task_metric = _ablation_metrics(path, tasks, data.get("lower_is_better"), metric_of)
    panels: dict[tuple, list[str]] = {}
    for t in tasks:
        m = task_metric[t]
        panels.setdefault((m.name, m.lower_is_better), []).append(t)
    seeds = sorted({c.get("seed") for c in cells}, key=str)
    fig = _figure(figsize=(max(6.0, 0.55 * (len(tasks) + 1) * len(variants) + 2.5), 4.2 * len(panels)),
                  layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    width = 0.8 / len(variants)
    for ax, (_, group) in zip(axes, panels.items()):
        metric = task_metric[group[0]]
        scale = _scale(metric)
        labels = group + (["average"] if len(group) > 1 else [])
        for i, v in enumerate(variants):
            stats = [Stat.of(c["score"] * scale for c in cells if c.get("task") == t and c.get("variant") == v)
                     for t in group]
            means = [s.mean if s.n else 0.0 for s in stats]
            stds = [s.std or 0.0 for s in stats]  # one seed: no error bar
            if len(group) > 1:
                per_seed = []
                for seed in seeds:
                    xs = [c["score"] * scale for t in group for c in cells
                          if c.get("task") == t and c.get("variant") == v and c.get("seed") == seed]
                    if len(xs) == len(group):  # this seed finished every task
                        per_seed.append(sum(xs) / len(xs))
                means.append(sum(means) / len(group))
                stds.append(Stat.of(per_seed).std or 0.0)
            xs = [j + (i - (len(variants) - 1) / 2) * width for j in range(len(labels))]
            ax.bar(xs, means, width, yerr=stds, capsize=3, label=v)
        ax.set_xticks(range(len(labels)), labels, rotation=30 if len(labels) > 4 else 0, ha="right"
                      if len(labels) > 4 else "center")
        ax.set_ylabel(f"OOD test ({metric.describe()})")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize="small")
    n_seeds = len(seeds)
    fig.suptitle(f"{data.get('ablation', path.name)}: mean ± std over {n_seeds} seed{'s' * (n_seeds != 1)} "
                 "(sample std, ddof=1)")
    paper = data.get("paper_line") if isinstance(data.get("paper_line"), str) else data.get("paper")
    if isinstance(paper, str) and paper:  # the published figures, as `relreason ablate` prints them
        line = paper if paper.startswith("paper") else f"paper: {paper}"
        fig.supxlabel(textwrap.fill(line, int(fig.get_figwidth() * 13)), fontsize="small")  # ~chars per inch
    return fig


def _ablation_metrics(path: Path, tasks: list[str], lower_is_better, metric_of: Optional[MetricLookup]) -> dict:
    """Each task's metric: what its cells' results.json record, else what `metric_of` knows."""
    found: dict[str, Metric] = {}
    try:
        for r in discover_runs(path, metric_of):
            if r.task in tasks and r.task not in found and r.metric.name != UNKNOWN_METRIC.name:
                found[r.task] = r.metric
    except RelreasonError:  # results.json without cell folders (copied alone): fall back to the lookup
        pass
    lib = lower_is_better if isinstance(lower_is_better, bool) else None
    return {t: found.get(t) or resolve_metric(None, lib, t, metric_of) for t in tasks}


OOD_GROUPINGS = ("run", "model")  # `plot --ood --by`: a line per run, or per model with the seeds as a band


def ood_figure(sweeps: list[tuple[str, dict]], by: str = "run"):
    """Score against graph size (log2 axis) of size sweeps (`relreason.eval.grid.read_sweep` documents),
    given as (where it came from, sweep). `by="run"`: one line per sweep; `by="model"`: one line per
    model (and task), the mean over its sweeps (the seeds of the model) with a band of ± the sample std
    (relreason.runs.stats.Summary) where two or more seeds have the size. With several graph families,
    one line per family as well.

    Raises RelreasonError for an unknown grouping, sweeps of different metrics, or the same
    checkpoint twice (its seed would count twice)."""
    if by not in OOD_GROUPINGS:
        raise RelreasonError(f"--by {by!r} is not a grouping", f"use one of: {', '.join(OOD_GROUPINGS)}")
    metrics = {(s["metric"], s.get("lower_is_better")) for _, s in sweeps}
    if len(metrics) > 1:
        names = ", ".join(f"{where} ({s['metric']})" for where, s in sweeps)
        raise RelreasonError(f"cannot plot scores of different metrics on one axis: {names}",
                             "plot the sweeps of each metric separately")
    seen: dict[str, str] = {}
    for where, s in sweeps:
        key = f"{s.get('checkpoint')}|{s.get('split')}"
        if key in seen:
            raise RelreasonError(f"{seen[key]} and {where} are sweeps of the same checkpoint",
                                 "plot each run once (save one sweep per run, with every size in it)")
        seen[key] = where
    name, lower = next(iter(metrics))
    metric = resolve_metric(name, lower if isinstance(lower, bool) else None)
    scale = _scale(metric)
    graphs = {r["graph"] for _, s in sweeps for r in s["rows"]}
    tasks = {s["task"] for _, s in sweeps}

    def label(base: str, graph: str, task: str) -> str:
        parts = [base] + ([task] if len(tasks) > 1 and by == "model" else []) + ([graph] if len(graphs) > 1 else [])
        return " · ".join(parts)

    lines: dict[str, dict[int, list[float]]] = {}
    for where, s in sweeps:
        base = Path(s.get("run") or where).name if by == "run" else s.get("model_label", s["model"])
        for r in s["rows"]:
            cells = lines.setdefault(label(base, r["graph"], s["task"]), {})
            cells.setdefault(r["size"], []).append(r["score"] * scale)
    fig = _figure(figsize=(7.5, 4.5), layout="constrained")
    ax = fig.subplots()
    for text, cells in lines.items():
        sizes = sorted(cells)
        stats = [Stat.of(cells[n]) for n in sizes]
        seeds = max(st.n for st in stats)
        shown = f"{text} ({seeds} seeds)" if by == "model" and seeds > 1 else text
        (line,) = ax.plot(sizes, [st.mean for st in stats], marker="o", markersize=3.5, linewidth=1.5, label=shown)
        banded = [(n, st) for n, st in zip(sizes, stats) if st.std is not None]
        if by == "model" and banded:
            ax.fill_between([n for n, _ in banded], [st.mean - st.std for _, st in banded],
                            [st.mean + st.std for _, st in banded], color=line.get_color(), alpha=0.2, linewidth=0)
    every = sorted({n for cells in lines.values() for n in cells})
    ax.set_xscale("log", base=2)
    ax.set_xticks(every, [str(n) for n in every])
    ax.minorticks_off()
    ax.set_xlabel("size (--ood: nodes; lobsters: backbone length)")
    ax.set_ylabel(f"score ({metric.describe()})")
    split = {s.get("split", "test") for _, s in sweeps}
    what = "mean ± std over seeds" if by == "model" else "one line per run"
    ax.set_title(f"{', '.join(sorted(tasks))}: {'/'.join(sorted(split))} score by size ({what})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    return fig


def save_figure(fig, out: Path) -> Path:
    """Writes the figure atomically (temp file + rename) in the format its suffix names."""
    out = Path(out)
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise RelreasonError(f"unknown figure format {out.suffix or '(none)'!r} in {out}",
                             "end --out with " + ", ".join(f".{f}" for f in FORMATS))
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format=fmt, dpi=150)
    return out


__all__ = ["curves_figure", "ablation_figure", "ood_figure", "save_figure", "require_matplotlib", "FORMATS",
           "OOD_GROUPINGS"]
