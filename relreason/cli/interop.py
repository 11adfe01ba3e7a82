"""`relreason export-data`: a CLRS-Text split as Parquet or a Hugging Face dataset, a graph split as
PyTorch Geometric Data (relreason.data.interop; each format's package is an optional extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from relreason.cli.common import ForceOpt, out, report_errors
from relreason.data.interop import EDGE_MODES, EXPORT_FORMATS, export_data


@report_errors
def export_data_cmd(
    file: Annotated[Path, typer.Argument(help="A split written by `relreason generate`: CLRS-Text (.jsonl) or "
                                              "graphs (.safetensors).", show_default=False, readable=False)],
    fmt: Annotated[Optional[str], typer.Option("--format", help="; ".join(f"{k}: {v.summary}"
                                                                        for k, v in EXPORT_FORMATS.items()) + ".",
                                               show_default="parquet for a text split, pyg for a graph split")] = None,
    out_path: Annotated[Optional[Path], typer.Option("--out", help="Where to write.",
                                                     show_default="beside FILE, e.g. test.pyg.pt")] = None,
    edges: Annotated[Optional[str], typer.Option("--edges", help=f"Graph splits: which pairs are edges, "
                                                 f"{' or '.join(EDGE_MODES)} (every ordered pair).",
                                                 show_default="adjacency")] = None,
    force: ForceOpt = False,
) -> None:
    """Export a dataset split for other libraries: Parquet, Hugging Face datasets, PyTorch Geometric.

    Examples:\n
      relreason export-data data/text/insertion_sort/paper_train.jsonl --format hf\n
      relreason export-data data/text/bfs/paper_test.jsonl --format parquet --out bfs_test.parquet\n
      relreason export-data data/floyd_warshall/test.safetensors --edges complete
    """
    out.print(str(export_data(file, fmt, out_path, edges, force)))
