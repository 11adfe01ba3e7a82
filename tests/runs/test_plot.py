"""Figures (relreason.runs.plot): learning curves, ablation bars and size sweeps, checked on the Figure
objects and on the written files."""

from __future__ import annotations

import statistics
import sys

import pytest
from fake_runs import make_ablation, make_run

from relreason.errors import RelreasonError
from relreason.runs.discovery import load_runs
from relreason.runs.plot import ablation_figure, curves_figure, ood_figure, require_matplotlib, save_figure
from relreason.runs.records import read_ablation

# every test but the last draws a figure (the `matplotlib_installed` fixture: tests/conftest.py)
needs_matplotlib = pytest.mark.usefixtures("matplotlib_installed")


@needs_matplotlib
def test_curves_one_line_per_run_in_each_panel(tmp_path):
    a = make_run(tmp_path, "mpnn-bfs-s0", vals=(0.1, 0.5, 0.6))
    b = make_run(tmp_path, "rt-bfs-s0", model="rt", vals=(0.2, 0.7, 0.9, 0.8))
    c = make_run(tmp_path, "no-loss", vals=(0.3, 0.4), losses=(None, None), finished=False)
    fig = curves_figure(load_runs([a, b, c]))
    score, loss = fig.axes
    assert len(score.get_lines()) == 3 and len(loss.get_lines()) == 2
    assert [t.get_text() for t in score.get_legend().get_texts()] == [str(a), str(b), str(c)]
    xs, ys = score.get_lines()[1].get_data()
    assert list(xs) == [0, 160, 320, 480] and list(ys) == pytest.approx([20, 70, 90, 80])  # percent
    assert "accuracy/F1 %, higher is better" in score.get_ylabel()
    assert len(score.collections) == 3  # each run's best validation so far


@needs_matplotlib
def test_curves_refuse_mixed_metrics_and_empty_runs(tmp_path):
    a = make_run(tmp_path, "a")
    b = make_run(tmp_path, "b", task="lobster", metric="relative_loss")
    with pytest.raises(RelreasonError, match="different metrics"):
        curves_figure(load_runs([a, b]))
    empty = make_run(tmp_path, "empty", finished=False)
    (empty / "metrics.jsonl").unlink()
    with pytest.raises(RelreasonError, match="no validation records"):
        curves_figure(load_runs([empty]))


@needs_matplotlib
def test_ablation_bars_are_means_with_sample_std(tmp_path):
    scores = {("rt", "bfs"): [0.8, 0.9], ("rt", "dfs"): [0.4, 0.6],
              ("rt without edge updates", "bfs"): [0.5, 0.7], ("rt without edge updates", "dfs"): [0.1, 0.3]}
    abl = make_ablation(tmp_path, "no-edge-updates", scores, paper="RT 81.30")
    fig = ablation_figure(abl, read_ablation(abl))
    (ax,) = fig.axes
    assert len(ax.containers) == 2 * 2  # per variant: the bars and their error bars
    bars = [c for c in ax.containers if type(c).__name__ == "BarContainer"]
    assert len(bars) == 2 and len(ax.patches) == 2 * 3  # 2 variants x (2 tasks + average)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["bfs", "dfs", "average"]
    heights = [p.get_height() for p in bars[0].patches]
    assert heights == pytest.approx([85.0, 50.0, 67.5])
    err = bars[1].errorbar.lines[2][0].get_segments()  # vertical error segments, one per bar
    assert [s[1][1] - s[0][1] for s in err] == pytest.approx([2 * 100 * statistics.stdev([0.5, 0.7]),
                                                              2 * 100 * statistics.stdev([0.1, 0.3]),
                                                              2 * 100 * statistics.stdev([0.3, 0.5])])
    assert "sample std" in fig._suptitle.get_text() and "RT 81.30" in fig._supxlabel.get_text()


@needs_matplotlib
@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG\r\n\x1a\n"), (".svg", b"<svg")])
def test_figures_are_written_atomically_as_valid_files(tmp_path, suffix, magic):
    fig = curves_figure(load_runs([make_run(tmp_path, "a")]))
    out = save_figure(fig, tmp_path / "figs" / f"curves{suffix}")
    data = out.read_bytes()
    assert data.startswith(magic) if suffix == ".png" else magic in data[:2000]
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary left behind


@needs_matplotlib
def test_unknown_figure_format(tmp_path):
    fig = curves_figure(load_runs([make_run(tmp_path, "a")]))
    with pytest.raises(RelreasonError, match="unknown figure format"):
        save_figure(fig, tmp_path / "curves.jpeg")


def sweep(run: str, model: str, scores: dict, graph: str = "clrs", task: str = "bfs", metric: str = "clrs") -> dict:
    """A sweep document (relreason.eval.grid) of run `run`: `scores` maps size -> score."""
    return {"kind": "ood_sweep", "schema_version": 1, "checkpoint": f"{run}/best", "run": run, "model": model,
            "model_label": model, "task": task, "split": "test", "metric": metric,
            "lower_is_better": metric == "relative_loss", "train_seed": 0,
            "rows": [{"graph": graph, "size": n, "seed": 3, "score": v, "num": 32, "label": "", "outputs": {}}
                     for n, v in scores.items()]}


SWEEPS = [("a", sweep("runs/mpnn-s0", "mpnn", {16: 0.9, 32: 0.8, 64: 0.6})),
          ("b", sweep("runs/mpnn-s1", "mpnn", {16: 0.7, 32: 0.6, 64: 0.4})),
          ("c", sweep("runs/rt-s0", "rt", {16: 0.95, 32: 0.9, 64: 0.85}))]


@needs_matplotlib
def test_ood_one_line_per_run_on_a_log2_size_axis():
    fig = ood_figure(SWEEPS)
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 3 and not ax.collections  # no bands
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["mpnn-s0", "mpnn-s1", "rt-s0"]
    xs, ys = ax.get_lines()[1].get_data()
    assert list(xs) == [16, 32, 64] and list(ys) == pytest.approx([70, 60, 40])  # percent
    assert ax.get_xscale() == "log" and [t.get_text() for t in ax.get_xticklabels()] == ["16", "32", "64"]


@needs_matplotlib
def test_ood_by_model_is_the_mean_over_seeds_with_a_sample_std_band():
    fig = ood_figure(SWEEPS, by="model")
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 2  # mpnn (two seeds), rt (one)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["mpnn (2 seeds)", "rt"]
    assert list(ax.get_lines()[0].get_ydata()) == pytest.approx([80, 70, 50])
    assert len(ax.collections) == 1  # one band: rt has one seed, so none
    band = ax.collections[0].get_paths()[0].vertices
    half = 100 * statistics.stdev([0.9, 0.7])
    assert band[:, 1].max() == pytest.approx(80 + half) and band[:, 1].min() == pytest.approx(50 - half)


@needs_matplotlib
def test_ood_a_line_per_graph_family():
    fams = [("a", {**sweep("runs/a", "mpnn", {16: 0.9}), "rows": sweep("runs/a", "mpnn", {16: 0.9, 32: 0.8})["rows"]
                   + sweep("runs/a", "mpnn", {16: 0.5, 32: 0.4}, graph="tree")["rows"]})]
    (ax,) = ood_figure(fams).axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a · clrs", "a · tree"]


@needs_matplotlib
def test_ood_refuses_mixed_metrics_the_same_run_twice_and_unknown_groupings():
    lobster = ("l", sweep("runs/l", "rt", {100: 0.1}, task="lobster", metric="relative_loss"))
    with pytest.raises(RelreasonError, match="different metrics"):
        ood_figure([SWEEPS[0], lobster])
    with pytest.raises(RelreasonError, match="same checkpoint"):
        ood_figure([SWEEPS[0], ("again", SWEEPS[0][1])])
    with pytest.raises(RelreasonError, match="not a grouping"):
        ood_figure(SWEEPS, by="seed")


def test_without_matplotlib_a_one_line_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(RelreasonError) as e:
        require_matplotlib()
    assert e.value.message == "plotting needs matplotlib: pip install 'relreason[plot]'"
