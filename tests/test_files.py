"""relreason.files, the one guarded way to read back a file, case by case (tests/test_files_fuzz.py
fuzzes every reader): what is not a regular file is refused without blocking, a file written in
place is refused when it has another name, sizes, depth and integers are bounded, safetensors headers
are checked whole, names cannot forge output; and the classes of the sweep (issue 40) end in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import save

from fake_runs import make_run
from relreason.errors import RelreasonError
from relreason.files import (check_name, escape, jsonl_lines, open_for_update, read_bytes, read_json_object,
                             safetensors_header)

ENTRY = [sys.executable, "-m", "relreason"]


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink", "missing"])
def test_what_is_not_a_regular_file_is_refused_without_blocking(tmp_path, kind):
    path, real = tmp_path / "config.json", tmp_path / "real.json"
    real.write_text("{}")
    {"fifo": lambda: os.mkfifo(path), "directory": path.mkdir, "symlink": lambda: path.symlink_to(real),
     "missing": lambda: None}[kind]()
    problem = {"fifo": "is a named pipe \\(FIFO\\), not a regular file", "directory": "is a directory",
               "symlink": "is a symbolic link", "missing": "does not exist"}[kind]
    with pytest.raises(RelreasonError, match=f"config.json {problem}"):
        read_json_object(path)  # a FIFO without a writer: a blocking open would never return


def test_a_link_the_user_named_is_followed(tmp_path):
    (tmp_path / "real.json").write_text('{"a": 1}')
    (tmp_path / "named.json").symlink_to(tmp_path / "real.json")
    assert read_json_object(tmp_path / "named.json", follow=True) == {"a": 1}


@pytest.mark.parametrize("planted", ["hardlink", "symlink", "fifo", "directory"])
def test_a_file_written_in_place_must_be_the_runs_own(tmp_path, planted):
    """The `.lock` case: truncating a hard link empties the file outside the run."""
    victim, lock = tmp_path / "victim.txt", tmp_path / "run" / ".lock"
    victim.write_text("precious\n")
    lock.parent.mkdir()
    {"hardlink": lambda: os.link(victim, lock), "symlink": lambda: lock.symlink_to(victim),
     "fifo": lambda: os.mkfifo(lock), "directory": lock.mkdir}[planted]()
    with pytest.raises(RelreasonError, match=r"\.lock is (a hard link \(2 names\)|a symbolic link|a named pipe|"
                                             r"a directory)"):
        os.close(open_for_update(lock))
    assert victim.read_text() == "precious\n"


def test_a_hard_linked_lock_stops_training_and_its_target_is_kept(tmp_path):
    from relreason.runtime import RunLock

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / "run").mkdir()
    os.link(victim, tmp_path / "run" / ".lock")
    with pytest.raises(RelreasonError, match=r"run/\.lock is a hard link"):
        RunLock(tmp_path / "run").acquire()
    assert victim.read_text() == "precious\n"


def test_size_is_bounded_before_reading(tmp_path):
    big = tmp_path / "results.json"
    with open(big, "wb") as f:
        f.truncate(3 << 20)  # sparse: nothing to read, the size alone is refused
    with pytest.raises(RelreasonError, match=r"results.json is 3.0 MiB, more than the 1.0 MiB"):
        read_bytes(big, 1 << 20)


@pytest.mark.parametrize("text, problem", [("[" * 100_000 + "]" * 100_000, "nests 100000 levels deep"),
                                           ('{"step": ' + "1" * 4301 + "}", "an integer of 4301 digits"),
                                           ('{"cut": ', "is corrupt: not valid JSON"),
                                           ("\xff", "not UTF-8"), ("[1]", "holds \\[1\\], not a JSON object")])
def test_python_limits_become_one_line_naming_the_file(tmp_path, text, problem):
    path = tmp_path / "trainer_state.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(RelreasonError, match=f"trainer_state.json.*{problem}") as e:
        read_json_object(path)
    assert "\n" not in str(e.value)


def test_a_stream_is_read_once_to_its_end(tmp_path):
    fifo = tmp_path / "answers"
    os.mkfifo(fifo)

    def write():
        time.sleep(0.3)  # the reader opens first: it must wait for the writer, not read an empty pipe
        fifo.write_text('{"a": 1}\n{"b": 2}\n')

    writer = threading.Thread(target=write, daemon=True)  # never holds the suite when the read fails
    writer.start()
    lines = [line for _, line in jsonl_lines(fifo, streams=True)]
    writer.join(timeout=30)
    assert lines == ['{"a": 1}\n', '{"b": 2}\n']


def _weights(**tensors) -> bytes:
    return save({k: v for k, v in tensors.items()})


@pytest.mark.parametrize("edit, problem", [
    (lambda h: h["w"].update(dtype="Q9"), "tensor 'w' has no known dtype"),
    (lambda h: h["w"].update(shape=[10**12]), "do not hold a F32 tensor of shape"),
    (lambda h: h["w"].update(data_offsets=[0, 4]), "do not hold a F32 tensor"),
    (lambda h: h["w"].update(shape=[-1, 2]), "is not a list of sizes"),
])
def test_a_safetensors_header_is_checked_whole_before_the_file_is_mapped(tmp_path, edit, problem):
    raw = _weights(w=torch.ones(2, 3), b=torch.zeros(3))
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    edit(header)
    body = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(body).to_bytes(8, "little") + body + raw[8 + n:])
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(RelreasonError, match=f"model.safetensors: {problem}|model.safetensors.*{problem}"):
            safetensors_header(fd, path)
    finally:
        os.close(fd)


def test_weights_of_another_dtype_are_refused_not_cast(tmp_path):
    """Int8 weights of the right shapes: before, `eval` cast and scored them (0.08 against 0.72)."""
    from relreason.train.checkpoint import load_weights

    model = torch.nn.Linear(3, 2)
    (tmp_path / "model.safetensors").write_bytes(_weights(weight=model.weight.detach().to(torch.int8),
                                                          bias=model.bias.detach()))
    with pytest.raises(RelreasonError, match="tensor weight is I8, the model's is F32"):
        load_weights(tmp_path, model)


@pytest.mark.parametrize("name", ["run\nfake-row", "run\x1b[31mred", "run\u202eevil", "a\tb"])
def test_names_with_control_characters_are_refused(name):
    with pytest.raises(RelreasonError, match="holds the control character") as e:
        check_name(name, "run name")
    assert "\n" not in str(e.value) and "\x1b" not in str(e.value)


def test_printed_text_is_escaped():
    assert escape("ok-name_1.2") == "ok-name_1.2"
    assert escape("a\nb\x1b[31mc\u202e") == "a\\nb\\x1b[31mc\\u202e"


# -- the classes of issue 40, end to end -------------------------------------------------------------

def test_trainer_state_steps_must_agree_with_its_examples():
    from relreason.rundir import TrainerState

    base = {"step": 4, "examples": 16, "best_val": 0.5, "best_examples": 16, "seconds": 1.0}
    TrainerState.from_dict(base)
    for step, examples in ((17, 16), (0, 16), (3, 0)):
        with pytest.raises(RelreasonError, match=f"field 'step' is {step} for {examples} examples"):
            TrainerState.from_dict({**base, "step": step, "examples": examples, "best_examples": None,
                                    "best_val": None})


def test_a_checkpoint_folder_replaced_by_a_file_is_refused(tmp_path):
    from relreason.rundir import check_no_links

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "last").write_text("not a folder")
    with pytest.raises(RelreasonError, match="last is a regular file, not a folder"):
        check_no_links(tmp_path)


def test_model_sizes_are_checked_against_memory_before_allocating():
    from relreason.config import build_config
    from relreason.models.build import build_nar
    from relreason.tasks import task_entries

    for setting, key in (("model.hidden=1000000000", "model.hidden=1,000,000,000"),
                         ("processor.layers=1000000", "processor.layers=1,000,000")):
        cfg = build_config("mpnn", "bfs", None, [setting])
        with pytest.raises(RelreasonError, match=f"{key} asks for a model of .* GiB"):
            build_nar(cfg, task_entries(cfg.task), torch.device("cpu"))


@pytest.mark.parametrize("algorithm", ["floyd_warshall", "lcs_length", "matrix_chain_order"])
def test_a_score_id_is_bounded_by_its_trajectorys_cost(tmp_path, algorithm):
    from relreason.eval.text_score import read_predictions, score_predictions

    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": f"{algorithm}/n1600/s0/i0", "prediction": "1"}) + "\n")
    with pytest.raises(RelreasonError, match=f"p.jsonl:1: id {algorithm}/n1600/s0/i0: its trajectory holds about"):
        score_predictions(read_predictions(path), None, source=str(path))


def test_huge_integers_in_set_and_recipes_are_one_line(tmp_path):
    from relreason.config import build_config

    with pytest.raises(RelreasonError, match="--set train.seed: an integer of 5000 digits"):
        build_config("mpnn", "bfs", None, ["train.seed=" + "9" * 5000])
    recipe = tmp_path / "r.yaml"
    recipe.write_text("train:\n  seed: " + "9" * 5000 + "\n")
    with pytest.raises(RelreasonError, match="r.yaml is not valid YAML: an integer of 5000 digits"):
        build_config("mpnn", "bfs", str(recipe), [])


def test_a_large_recipe_is_refused_by_its_size_before_parsing(tmp_path):
    recipe = tmp_path / "big.yaml"
    recipe.write_text("train:\n" + "  # a comment, no alias\n" * 100_000)
    from relreason.config import build_config

    with pytest.raises(RelreasonError, match=r"recipe .*big.yaml is 2.\d MiB, more than the 1.0 MiB"):
        build_config("mpnn", "bfs", str(recipe), [])


def test_runs_lists_damaged_runs_beside_healthy_ones_and_escapes_what_it_prints(tmp_path):
    """One subprocess: a FIFO config.json, results.json a folder, nesting 100,000 deep, an ANSI name,
    a newline in a folder name; `runs` lists each (damaged ones with file and reason) and never hangs."""
    root = tmp_path / "runs"
    make_run(root, "healthy")
    fifo = make_run(root, "fifo-config", finished=False)
    (fifo / "config.json").unlink()
    os.mkfifo(fifo / "config.json")
    folder = make_run(root, "results-folder")
    (folder / "results.json").unlink()
    (folder / "results.json").mkdir()
    deep = make_run(root, "deep", finished=False)
    (deep / "config.json").write_text('{"config": ' + "[" * 100_000 + "]" * 100_000 + "}")
    ansi = make_run(root, "ansi", model="mpnn\x1b[31m")
    make_run(root, "new\nline")
    res = subprocess.run([*ENTRY, "runs", str(root)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 0, res.stderr
    assert "\x1b" not in res.stdout + res.stderr and "Traceback" not in res.stderr
    assert "6 runs" in res.stdout
    for name, problem in (("fifo-config", "config.json is a named pipe"), ("results-folder", "results.json is a "
                                                                                              "directory"),
                          ("deep", "config.json nests 100001 levels deep")):
        assert any(name in line and problem in line for line in res.stderr.splitlines()), (name, res.stderr)
    assert "mpnn\\x1b[31m" in res.stdout and "new\\nline" in res.stdout
    assert ansi.exists()


def test_score_reads_standard_input(tmp_path):
    line = json.dumps({"id": "insertion_sort/n4/s0/i0", "prediction": "1"}) + "\n"
    res = subprocess.run([*ENTRY, "score", "-", "--json"], input=line, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["file"] == "-"


@pytest.mark.parametrize("name", ["a\nb", "a\x1b[2Jb"])
def test_a_run_name_with_a_control_character_is_refused_before_anything_is_made(tmp_path, name):
    from typer.testing import CliRunner

    from relreason.cli.main import app

    res = CliRunner().invoke(app, ["train", "mpnn", "bfs", "--name", name, "--out", str(tmp_path)])
    assert res.exit_code == 1 and "holds the control character" in res.output, res.output
    assert "\x1b" not in res.output and not any(tmp_path.iterdir())


def test_text_generate_on_a_full_disk_names_the_file(tmp_path, monkeypatch):
    import errno

    import relreason.data.text as text
    from relreason.data.text import splits

    def full(*_):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(splits, "split_batches", full)  # where write_text_split reads it
    request = text.resolve_text_split("insertion_sort", "test", "paper", None, None, None, False)
    with pytest.raises(RelreasonError, match=r"cannot write .*insertion_sort.*\.jsonl: no space left on device"):
        text.write_text_split(request, tmp_path)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # nothing half-written


def test_report_shows_a_damaged_run_beside_the_others(tmp_path):
    from relreason.studies.html_report import page

    good, bad = make_run(tmp_path, "good"), make_run(tmp_path, "bad")
    (bad / "results.json").write_text('{"test": ' + "[" * 100_000 + "]" * 100_000 + "}")
    text, counts = page([str(good), str(bad)], tmp_path / "results")
    assert counts["sections"] == 2 and "run bad: damaged" in text and "results.json nests 100001 levels deep" in text
    with pytest.raises(RelreasonError, match="results.json nests"):
        page([str(bad)], tmp_path / "results")


@pytest.mark.parametrize("key, value, problem", [("betas", [0.5, 0.9], "betas is \\[0.5, 0.9\\], the run's optimizer "
                                                                      "has \\[0.9, 0.999\\]"),
                                                 ("eps", 1e-3, "eps is 0.001"), ("weight_decay", 0.1, "weight_decay"),
                                                 ("params", [1, 0], "params is \\[1, 0\\].*the ids of the model's"),
                                                 ("lr", -1, "lr must be a positive number")])
def test_optimizer_state_of_other_hyperparameters_or_parameters_is_refused(tmp_path, key, value, problem):
    """Before, resume trained on with another optimizer and said nothing (issue 40, class 3)."""
    from safetensors.torch import save_file

    from relreason.train.checkpoint import _flatten_optimizer, load_optimizer
    from relreason.train.optimizer import adam

    model = torch.nn.Linear(3, 2)
    opt = adam(model.parameters(), 1e-3)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    tensors, meta = _flatten_optimizer(opt)
    save_file(tensors, tmp_path / "optimizer.safetensors")
    meta["param_groups"][0][key] = value
    (tmp_path / "optimizer.json").write_text(json.dumps(meta))
    with pytest.raises(RelreasonError, match=f"optimizer.json: param_groups\\[0\\].{problem}"):
        load_optimizer(tmp_path, adam(model.parameters(), 1e-3))
