"""`relreason export-data` and `--set train.log=tensorboard` from the command line: the real entry point
for a success and the error format, then every refusal as one Error/Hint pair (in process, for speed)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.data import generate
from relreason.data.store import save_dataset
from relreason.data.text import resolve_text_split, write_text_split

from cli_run import fails, relreason, succeeds

runner = CliRunner()


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    d = tmp_path_factory.mktemp("splits")
    graph = save_dataset(d / "bfs" / "test.safetensors", generate("bfs", num=2, size=5, seed=0))
    fw = save_dataset(d / "floyd_warshall" / "test.safetensors", generate("floyd_warshall", num=2, size=5, seed=0))
    text = write_text_split(resolve_text_split("bfs", sizes="4", num=2, seed=0), d)
    return {"graph": graph, "fw": fw, "text": text, "dir": d}


def test_export_data_through_the_entry_point(splits, tmp_path):
    if importlib.util.find_spec("pyarrow") is None:
        pytest.skip("pyarrow is not installed: pip install 'relreason[hf]'")
    out = tmp_path / "bfs.parquet"
    assert succeeds(relreason("export-data", splits["text"], "--out", out)).strip() == str(out)  # parquet by default
    import pyarrow.parquet as pq

    assert pq.read_table(out).num_rows == 2
    fails(relreason("export-data", splits["text"], "--format", "hf", "--edges", "complete"), 1,
          "--edges applies to graph splits")


def error(res) -> tuple[str, str]:
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    lines = res.output.splitlines()
    (i,) = [k for k, line in enumerate(lines) if line.startswith("Error: ")]
    assert lines[i + 1].startswith("Hint: ")
    return lines[i], lines[i + 1]


@pytest.mark.parametrize("args,message,hint", [
    (["{graph}", "--format", "hf"], "--format hf exports text splits; {graph} is a graph split", "--format pyg"),
    (["{text}", "--format", "pyg"], "--format pyg exports graph splits", "--format parquet or hf"),
    (["{text}", "--format", "parquet", "--edges", "complete"], "--edges applies to graph splits", "drop --edges"),
    (["{graph}", "--format", "arrow"], "unknown export format 'arrow'", "known: hf, parquet, pyg"),
    (["{dir}/notes.txt", "--format", "pyg"], "is neither a CLRS-Text split (.jsonl) nor a graph split", "relreason generate"),
    (["{dir}/nowhere.safetensors", "--format", "pyg"], "dataset file {dir}/nowhere.safetensors does not exist", "generate"),
    (["{dir}/nowhere.jsonl", "--format", "hf"], "text split {dir}/nowhere.jsonl does not exist", "--text"),
    (["{fw}", "--format", "pyg"], "floyd_warshall's Pi, Pi_h, D, msk have values on pairs that are not edges",
     "--edges complete"),
    (["{graph}", "--format", "pyg", "--edges", "dense"], "unknown edges mode 'dense'", "adjacency, complete"),
    (["{graph}", "--format", "pyg", "--out", "{graph}"], "{graph} already exists", "--force"),
])
def test_export_data_refusals(splits, tmp_path, args, message, hint):
    """Each refusal comes before the format's package is imported, so these run without the extras."""
    fill = {k: str(v) for k, v in splits.items()}
    args = [a.format(**fill) for a in args]
    res = runner.invoke(app, ["export-data", *args] + ([] if "--out" in args else ["--out", str(tmp_path / "x")]))
    line, hint_line = error(res)
    assert message.format(**fill) in line and hint in hint_line
    assert not (tmp_path / "x").exists()


def test_export_data_without_the_package_names_the_extra(splits, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch_geometric", None)
    line, hint = error(runner.invoke(app, ["export-data", str(splits["graph"]), "--format", "pyg",
                                           "--out", str(tmp_path / "x")]))
    assert line == "Error: export to pyg needs the torch_geometric package"
    assert hint == "Hint: pip install 'relreason[pyg]'"


def test_train_without_tensorboard_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    res = runner.invoke(app, ["train", "mpnn", "bfs", "--out", str(tmp_path / "runs"), "--set", "train.log=tensorboard"])
    line, hint = error(res)
    assert line == "Error: train.log=tensorboard needs the tensorboard package"
    assert "pip install 'relreason[tensorboard]'" in hint
    assert not (tmp_path / "runs").exists()
