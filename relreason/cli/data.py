"""`relreason generate` and `relreason show`: make a dataset split, look inside one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer
from rich.table import Table

from relreason.cli.common import ForceOpt, JsonOpt, err, out, progress, report_errors
from relreason.data.algorithms import ALGORITHMS
from relreason.data.families import family_names, graph_name, parse_graphs
from relreason.data.generate import resolve_split, write_split
from relreason.data.specs import Stage
from relreason.data.store import load_dataset
from relreason.data.text import DEFAULT_PRESET, TEXT_PRESETS, resolve_text_split, write_text_split
from relreason.errors import RelreasonError


def graph_help(what: str) -> str:
    """The help of a `--graph` option: the families `--graph` accepts."""
    return (f"{what}: {', '.join(family_names())} (clrs: the benchmark's sampler), with parameters, "
            f"e.g. ws:k=4,p=0.1 (docs/ood.md: Graph families).")


def one_graph(text: str) -> str:
    """The canonical text of a single `--graph` value (a one-line error for a list or a bad family)."""
    graphs = parse_graphs(text)
    if len(graphs) > 1:
        raise RelreasonError(f"--graph {text!r} names {len(graphs)} graphs; this command takes one",
                             "give one family, e.g. --graph ws:k=4,p=0.1 (eval takes a list)")
    return graph_name(graphs[0])


def generate_file(task: str, split: str | None, size: int | None, num: int | None, seed: int | None,
                  out_dir: Path, force: bool, graph: str | None = None, v1: bool = False) -> Path:
    """Writes a task's split to disk with a progress bar on stderr; `graph`: a graph family (graph algorithms);
    `v1`: CLRS v1.0.0's sampler (the string matchers)."""
    from relreason.tasks import TASKS  # CLI start-up: loads on use

    t = TASKS.get(task)
    if graph is not None or v1:
        if task not in ALGORITHMS:
            option, which = (("--graph", "the graph algorithms") if graph is not None
                             else ("--clrs-v1", "the string matchers"))
            raise RelreasonError(f"{option} applies to {which}; {task} is a {t.kind} task", f"drop {option}")
        total = resolve_split(task, split, size, num, seed, graph, v1)["num"]
        what = f" ({graph})" if graph is not None else " (clrs v1.0.0 sampler)"
        with progress(total, f"{task} {'custom' if split is None else split}{what}", unit="sample") as bar:
            return write_split(task, split, size, num, seed, out_dir, force, on_chunk=bar.update, graph=graph, v1=v1)
    if task in ALGORITHMS:
        total = resolve_split(task, split, size, num, seed)["num"]
    elif t.kind == "lobster":
        from relreason.data.lobster import SPLITS  # CLI start-up: loads on use

        total = num if num is not None else SPLITS.get(split, (None, None))[1]
    else:
        total = num
    with progress(total, f"{task} {'custom' if split is None else split}", unit="sample") as bar:
        return t.write(split, size, num, seed, out_dir, force, on_chunk=bar.update)


def generate_text_file(algorithm: str, text: bool, split: str | None, size: int | None, sizes: str | None,
                       preset: str | None, num: int | None, seed: int | None, hints: bool, out_dir: Path,
                       force: bool) -> Path:
    """Writes a CLRS-Text split as JSONL with a progress bar on stderr (refusing options that do not apply)."""
    if not text:
        raise RelreasonError("--hints, --sizes and --preset apply to text data only", "add --text")
    if size is not None:
        raise RelreasonError("--size does not apply to --text", "give text sizes with --sizes, e.g. --sizes 4-8,12")
    request = resolve_text_split(algorithm, split, preset, sizes, num, seed, hints)
    with progress(request.num, f"{algorithm} text {request.name}", unit="example") as bar:
        return write_text_split(request, out_dir, force, on_examples=bar.update)


@report_errors
def generate_cmd(
    algorithm: Annotated[str, typer.Argument(help="Algorithm or task name (see `relreason list tasks`).")],
    split: Annotated[Optional[str], typer.Option("--split", help="Canonical split: train, val or test "
                                                 "(with --text: a split of --preset).",
                                                 show_default="train, or a custom split when --size, --num and "
                                                              "--seed are given")] = None,
    size: Annotated[Optional[int], typer.Option("--size", help="Number of nodes (overrides the split's).",
                                                show_default="the split's")] = None,
    num: Annotated[Optional[int], typer.Option("--num", help="Number of samples (overrides the split's).",
                                               show_default="the split's")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Random seed (overrides the split's).",
                                                show_default="the split's")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Output directory.")] = Path("data"),
    force: ForceOpt = False,
    text: Annotated[bool, typer.Option("--text", help="CLRS-Text JSONL (question/answer) instead of arrays.")] = False,
    hints: Annotated[bool, typer.Option("--hints", help="Text with the hint trace (with --text).")] = False,
    sizes: Annotated[Optional[str], typer.Option("--sizes", help="Text sizes, e.g. 4-8,12 (with --text).",
                                                 show_default="the preset's")] = None,
    preset: Annotated[Optional[str], typer.Option("--preset", help=f"Text split preset: {', '.join(TEXT_PRESETS)} "
                                                  f"(with --text; default {DEFAULT_PRESET}).",
                                                  show_default=False)] = None,
    graph: Annotated[Optional[str], typer.Option("--graph", help=graph_help("Graph family of a graph algorithm"),
                                                 show_default="the benchmark's")] = None,
    clrs_v1: Annotated[bool, typer.Option("--clrs-v1", help="String matchers: the split as CLRS v1.0.0 drew it "
                                          "(a needle of size // 4 on top of a haystack of size: the CLRS30 v1.0.0 "
                                          "archive the CLRS-30 and Ibarz et al. papers ran on).")] = False,
) -> None:
    """Generate a dataset split with full hint trajectories, or its CLRS-Text form (--text).

    Examples:\n
      relreason generate bellman_ford --split test\n
      relreason generate insertion_sort --split train --num 10000\n
      relreason generate dfs --size 32 --num 500 --seed 7 --out mydata\n
      relreason generate bfs --split test --graph ws:k=4,p=0.1\n
      relreason generate naive_string_matcher --split test --clrs-v1\n
      relreason generate lobster --split test\n
      relreason generate insertion_sort --text --hints\n
      relreason generate bfs --text --sizes 4-8,12 --num 1000 --seed 0
    """
    if seed is not None and not 0 <= seed < 2**32:  # every sampler's RandomState takes 32-bit seeds
        raise RelreasonError(f"--seed {seed} is out of range", "use 0 <= seed < 2**32, e.g. --seed 0")
    if graph is not None:
        graph = one_graph(graph)
        if text:
            raise RelreasonError("--graph applies to graph arrays, not to --text", "drop one of them")
    if clrs_v1 and text:
        raise RelreasonError("--clrs-v1 applies to the string matchers' arrays, not to --text", "drop one of them")
    if text or hints or sizes is not None or preset is not None:
        path = generate_text_file(algorithm, text, split, size, sizes, preset, num, seed, hints, out_dir, force)
        out.print(str(path))
        return
    if split is None and size is None and num is None and seed is None:
        split = "train"
    path = generate_file(algorithm, split, size, num, seed, out_dir, force, graph, clrs_v1)
    out.print(str(path))


@report_errors
def show_cmd(
    file: Annotated[Path, typer.Argument(help="A dataset file written by `relreason generate`.",
                                         readable=False)],  # checked by the reader, which says what is wrong
    index: Annotated[int, typer.Option("--index", help="Which example to print.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Summarize a dataset file and pretty-print one example.

    Examples:\n
      relreason show data/bellman_ford/test.safetensors\n
      relreason show data/insertion_sort/train.safetensors --index 3
    """
    ds = load_dataset(file)
    if not 0 <= index < len(ds):
        raise RelreasonError(f"--index {index} is out of range", f"the file has {len(ds)} examples (0..{len(ds) - 1})")
    meta = ds.meta
    keys = ("algorithm", "split", "size", "num", "seed", "spec_hash", "relreason")
    if "graph" in meta:  # a graph family's split (the benchmark's splits have no such key)
        keys = keys[:2] + ("graph",) + keys[2:]
    if "sampler" in meta:  # a string matcher's split drawn by CLRS v1.0.0's sampler
        keys = keys[:2] + ("sampler",) + keys[2:]
    if as_json:
        summary = {k: meta.get(k) for k in keys}
        summary["lengths"] = {"min": int(ds.lengths.min()), "mean": float(ds.lengths.mean()),
                              "max": int(ds.lengths.max())}
        out.print_json(json.dumps(summary))
        return
    head = Table(title=f"{meta['algorithm']} / {meta['split']}", show_header=False)
    for key in keys:
        head.add_row(key, str(meta.get(key)))
    head.add_row("hint steps", f"min {ds.lengths.min()}  mean {ds.lengths.mean():.1f}  max {ds.lengths.max()}")
    if ds.sizes is not None:
        head.add_row("graph sizes", f"min {ds.sizes.min()}  mean {ds.sizes.mean():.1f}  max {ds.sizes.max()} "
                                    f"(padded to {ds.n})")
    out.print(head)
    feats = Table(title="features")
    for col in ("name", "stage", "location", "type", "shape", "dtype"):
        feats.add_column(col)
    stores = {Stage.INPUT: ds.inputs, Stage.HINT: ds.hints, Stage.OUTPUT: ds.outputs}
    for f in ds.spec.values():
        x = stores[f.stage][f.name]
        feats.add_row(f.name, f.stage.value, f.location.value, f.type.value, str(list(x.shape)), str(x.dtype))
    out.print(feats)
    traj = ds.trajectory(index)
    out.print(f"[bold]example {index}[/] ({traj.length} hint steps)")
    with np.printoptions(precision=3, suppress=True, linewidth=120, threshold=400, edgeitems=4):
        for group in ("inputs", "outputs"):
            for k, v in getattr(traj, group).items():
                out.print(f"  {group[:-1]}.{k} =\n{_indent(v)}", highlight=False)
        for k, v in traj.hints.items():
            out.print(f"  hint.{k} [T={v.shape[0]}] first / last =\n{_indent(v[0])}\n{_indent(v[-1])}",
                      highlight=False)


def _indent(x: np.ndarray) -> str:
    return "\n".join("    " + line for line in np.array2string(np.asarray(x)).splitlines())


__all__ = ["generate_cmd", "show_cmd", "generate_file", "err"]
