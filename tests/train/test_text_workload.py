"""Text workloads: deterministic mixed batches of the reference's stream, exact resume, the CLI end to end
(train, eval --sizes, export), and TransNAR's frozen NAR read on the graph form of the same examples."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.config import build_config
from relreason.data.algorithms import ALGORITHM_INFO
from relreason.data.text import TEXT_PRESETS, text_batch
from relreason.errors import RelreasonError
from relreason.studies.ablations import ABLATIONS
from relreason.tasks import text_pieces
from relreason.train import run
from resume_check import assert_resume_is_exact
from relreason.train.text import TextWorkload, TransNARWorkload, build_text_workload, text_generator

TINY = ["model.layers=1", "model.width=16", "model.heads=2", "model.context=512", "model.max_position=1024",
        "train.batch_size=6", "train.train_examples=12", "train.eval_every_examples=12",
        "data.train_num=10", "data.val_num=3", "data.test_num=2", "data.test_sizes=[5, 6]"]
NAR_TINY = ["model.hidden=8", "train.batch_size=4", "train.train_examples=8", "train.eval_every_examples=8",
            "data.train_num=8", "data.train_size=5", "data.val_size=5", "data.test_size=5", "data.val_num=4",
            "data.test_num=4"]
TASKS = "text:insertion_sort,text:binary_search"
runner = CliRunner()
CPU = torch.device("cpu")


def tiny(model="text_transformer", task=TASKS, extra=()):
    return build_config(model, task, "default", TINY + list(extra))


@pytest.fixture(scope="module")
def nar_run(tmp_path_factory):
    """A (barely) trained multi-task Triplet-GMPNN on the NAR side of TASKS."""
    tmp = tmp_path_factory.mktemp("nar")
    cfg = build_config("triplet_gmpnn", "insertion_sort,binary_search", "default",
                       NAR_TINY + [f"data.data_dir={tmp / 'data'}"])
    return run(cfg, out=tmp, name="nar", show_progress=False).run_dir


def test_paper_test_pieces_are_the_presets_and_counts_cut_per_size():
    data = tiny().data
    full = build_config("text_transformer", "text:bfs", "default").data
    assert text_pieces("bfs", "test", full) == TEXT_PRESETS.get("paper").pieces("test", "bfs")
    cut = text_pieces("bfs", "test", full, num=130)  # the first 125 of seed 3, then 5 of seed 14, per size
    assert [(p.length, p.seed, p.num) for p in cut[:2]] == [(10, 3, 125), (10, 14, 5)] and len(cut) == 6
    val = text_pieces("bfs", "val", data)
    assert [(p.length, p.num, p.skip) for p in val] == [(n, 3, 7000) for n in (4, 5, 6, 7, 8, 12)]
    with pytest.raises(RelreasonError, match="preset"):
        text_pieces("bfs", "val", data, sizes=[9])


def test_step_batches_are_the_reference_stream_deterministic_and_mixed():
    a, b = TextWorkload(tiny(), CPU), TextWorkload(tiny(), CPU)
    pool = a._pool("train")
    assert len(pool) == 2 * 6 * 10  # 2 algorithms x 6 sizes x data.train_num
    # an epoch visits every example once; step k is a function of (seed, k) alone
    steps = len(pool) // 6
    seen = np.concatenate([a.step_indices(k) for k in range(steps)])
    assert sorted(seen) == list(range(len(pool)))
    assert np.array_equal(b.step_indices(7), a.step_indices(7))
    assert not np.array_equal(a.step_indices(7), a.step_indices(steps + 7))  # the next epoch reshuffles
    pa, pb = a.step_batches(3)[0], b.step_batches(3)[0]
    assert all(torch.equal(x.tokens, y.tokens) and torch.equal(x.positions, y.positions)
               for x, y in zip(pa.chunks, pb.chunks))
    # the rendered examples are the reference's stream (what `relreason generate --text` writes)
    batch = pool.render(seen)
    algs = {g.task_index for g in batch.graphs}
    sizes = {p.dataset.n for p in batch.graphs}
    assert algs == {0, 1} and sizes == {4, 5, 6, 7, 8, 12}
    for p in batch.graphs:
        group = next(g for g in pool.groups if g.task_index == p.task_index and g.length == p.dataset.n)
        truth = text_batch(group.algorithm, group.length, 0, 10)
        for row, k in zip(p.rows, seen[p.rows]):
            i = k - pool.offsets[pool.groups.index(group)]
            assert (batch.questions[row], batch.answers[row]) == (truth.questions[i], truth.answers[i])
    # loss covers answer tokens (and EOS) only
    assert pa.targets == sum(len(x) + 1 for x in a._pool("train").render(a.step_indices(3)).answers)


def test_loss_on_length_chunks_is_the_loss_of_the_whole_padded_batch():
    wl = TextWorkload(tiny("text_transformer", "text:bellman_ford,text:binary_search",
                           ["train.batch_size=16", "model.context=2048", "model.max_position=4096"]), CPU)
    part = wl.step_batches(0)[0]
    assert len(part.chunks) > 1
    lengths = [c.pad_mask.sum(1) for c in part.chunks]
    assert all(int(x.max()) == c.tokens.shape[1] for x, c in zip(lengths, part.chunks))  # each padded to its own
    batch = wl._pool("train").render(wl.step_indices(0))
    whole = wl.tokenizer.batch_examples(zip(batch.questions, batch.answers))
    pos = wl.model.positions(whole.pad_mask, train=True, generator=text_generator(wl.cfg.train.seed, 0))
    want = wl.model.loss(whole.tokens, pos, whole.target_mask, whole.pad_mask)
    got, _ = wl.loss(wl.model, part, 0)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_cli_trains_evaluates_at_sizes_and_exports(tmp_path):
    sets = [x for s in TINY for x in ("--set", s)]
    res = runner.invoke(app, ["train", "text_transformer", "text:insertion_sort", "--recipe", "default", "--name", "r",
                              "--out", str(tmp_path), *sets])
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["metric"] == "text_clrs" and set(results["per_task"]) == {"insertion_sort@5", "insertion_sort@6"}
    cell = results["per_task"]["insertion_sort@5"]
    assert set(cell["outputs"]) == {"shape", "parse", "clrs"} and cell["num"] == 2
    assert results["test"]["score"] == pytest.approx(np.mean([c["score"] for c in results["per_task"].values()]))

    out = runner.invoke(app, ["eval", str(tmp_path / "r"), "--sizes", "4,7", "--num", "3"])
    assert out.exit_code == 0, out.output
    for word in ("algorithm", "size", "shape", "parse", "CLRS", "insertion_sort"):
        assert word in out.output
    rows = [line for line in out.output.splitlines() if "insertion_sort" in line and "│" in line]
    assert [r.split("│")[2].strip() for r in rows] == ["4", "7"]
    js = runner.invoke(app, ["eval", str(tmp_path / "r"), "--sizes", "4", "--num", "2", "--json"])
    data = json.loads(js.stdout)
    assert list(data["per_task"]) == ["insertion_sort@4"] and data["per_task"]["insertion_sort@4"]["num"] == 2
    bad = runner.invoke(app, ["eval", str(tmp_path / "r"), "--ood", "64"])
    assert bad.exit_code == 1 and "--sizes" in bad.output

    exported = runner.invoke(app, ["export", str(tmp_path / "r")])
    assert exported.exit_code == 0, exported.output
    card = (tmp_path / "r" / "export" / "MODEL_CARD.md").read_text()
    assert "CLRS-Text" in card and "--sizes 5,6" in card and "insertion_sort" in card
    again = runner.invoke(app, ["eval", str(tmp_path / "r" / "export"), "--json"])  # the run's own test
    assert again.exit_code == 0, again.output
    # the bundle is the best checkpoint (tiny runs score 0 everywhere, so the scores below alone could not tell)
    best, exported_weights = (load_file(str(d / "model.safetensors")) for d in (tmp_path / "r" / "best",
                                                                                 tmp_path / "r" / "export"))
    assert best.keys() == exported_weights.keys() and all(torch.equal(best[k], exported_weights[k]) for k in best)
    bundle = json.loads(again.stdout)  # evaluated again: the scores the run stored, cell by cell
    assert bundle["score"] == pytest.approx(results["test"]["score"], abs=1e-6)
    assert set(bundle["per_task"]) == set(results["per_task"])
    for name, stored in results["per_task"].items():
        assert bundle["per_task"][name]["num"] == stored["num"], name
        assert bundle["per_task"][name]["outputs"] == pytest.approx(stored["outputs"], abs=1e-6), name


def test_tokenizer_record_is_checked_when_a_checkpoint_is_loaded(tmp_path):
    res = run(tiny(task="text:binary_search", extra=["train.train_examples=6"]), out=tmp_path, name="r",
              show_progress=False)
    stored = json.loads((res.run_dir / "best" / "config.json").read_text())
    assert stored["config"]["model"]["tokenizer"]["chars"].startswith("\n !")
    stored["config"]["model"]["tokenizer"]["chars"] = "abc"
    (res.run_dir / "best" / "config.json").write_text(json.dumps(stored))
    from relreason.train.evaluation import evaluate_checkpoint

    with pytest.raises(RelreasonError, match="tokenizer"):
        evaluate_checkpoint(res.run_dir, sizes=[5], num=1)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["text_transformer", "transnar"])
def test_interrupted_and_resumed_text_run_equals_uninterrupted(tmp_path, model, nar_run):
    extra = ([f"model.nar={nar_run}"] if model == "transnar" else []) + ["train.eval_every_examples=18"]
    task = "text:binary_search"  # short answers: cheap validations
    assert_resume_is_exact(lambda n: tiny(model, task, extra + [f"train.train_examples={n}"]), 36, 18, tmp_path)


def test_transnar_with_closed_gates_is_the_text_transformer(nar_run):
    """Same seed, same text weights; closed gates: TransNAR's logits are the text model's, exactly."""
    text = TextWorkload(tiny(), CPU)
    tn = build_text_workload(tiny("transnar", extra=[f"model.nar={nar_run}"]), CPU)
    assert isinstance(tn, TransNARWorkload)
    shared = {k: v for k, v in tn.model.state_dict().items() if not k.startswith(("cross.", "nar."))}
    assert shared.keys() == text.model.state_dict().keys()
    assert all(torch.equal(v, text.model.state_dict()[k]) for k, v in shared.items())
    for part, ref in zip(tn.step_batches(2)[0].chunks, text.step_batches(2)[0].chunks):
        assert torch.equal(part.tokens, ref.tokens) and torch.equal(part.positions, ref.positions)
        with torch.no_grad():
            got = tn.model(part.tokens, part.positions, part.pad_mask, **part.inputs)
            want = text.model(ref.tokens, ref.positions, ref.pad_mask)
        assert torch.equal(got, want)
    baseline = build_text_workload(tiny("transnar", extra=[f"model.nar={nar_run}", "model.use_nar=false"]), CPU)
    assert baseline.model.state_dict().keys() == text.model.state_dict().keys()  # transnar-vs-text's text side


def test_the_nar_stays_frozen_and_gets_no_gradient(nar_run):
    wl = TransNARWorkload(tiny("transnar", extra=[f"model.nar={nar_run}"]), CPU)
    stored = load_file(str(nar_run / "best" / "model.safetensors"))
    nar = {k[len("nar."):]: v for k, v in wl.model.state_dict().items() if k.startswith("nar.")}
    assert nar.keys() == stored.keys() and all(torch.equal(nar[k], stored[k]) for k in stored)
    opt = torch.optim.Adam(wl.model.parameters(), lr=1e-2)
    wl.model.train()
    for step in range(3):
        part = wl.step_batches(step)[0]
        assert not any(c.inputs["nodes"].requires_grad or c.inputs["edges"].requires_grad for c in part.chunks)
        loss, _ = wl.loss(wl.model, part, step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        assert all(p.grad is None for p in wl.model.nar.parameters())
        assert any(p.grad is not None for n, p in wl.model.named_parameters() if n.startswith("cross."))
        opt.step()
    assert not wl.model.nar.training and not any(m.training for m in wl.model.nar.modules())
    after = {k[len("nar."):]: v for k, v in wl.model.state_dict().items() if k.startswith("nar.")}
    assert all(torch.equal(after[k], stored[k]) for k in stored)


def test_node_padding_never_changes_a_token_prediction(nar_run):
    wl = TransNARWorkload(tiny("transnar", extra=[f"model.nar={nar_run}"]), CPU)
    with torch.no_grad():  # open the gates so that the NAR's embeddings reach every token
        for x in wl.model.cross.values():
            for gate in x.gates().values():
                gate.fill_(1.0)
    wl.model.eval()
    batch = wl._pool("train").render(wl.step_indices(0))
    tokens = wl.tokenizer.batch_examples(zip(batch.questions, batch.answers))
    pos = wl.model.positions(tokens.pad_mask, train=False, generator=torch.Generator().manual_seed(0))
    plain = wl.nar_embeddings(batch)
    padded = wl.nar_embeddings(batch, pad_to=plain["nodes"].shape[1] + 3)
    assert (~padded["node_mask"]).sum() > (~plain["node_mask"]).sum()
    with torch.no_grad():
        a = wl.model(tokens.tokens, pos, tokens.pad_mask, **plain)
        b = wl.model(tokens.tokens, pos, tokens.pad_mask, **padded)
    real = tokens.pad_mask
    torch.testing.assert_close(a[real], b[real], rtol=1e-5, atol=1e-5)
    assert torch.equal(a[real].argmax(-1), b[real].argmax(-1))
    without = {**plain, "nodes": torch.zeros_like(plain["nodes"])}
    with torch.no_grad():
        assert not torch.allclose(wl.model(tokens.tokens, pos, tokens.pad_mask, **without)[real], a[real])


def test_transnar_needs_a_nar_that_knows_the_algorithms(tmp_path, nar_run):
    with pytest.raises(RelreasonError, match="model.nar is not set"):
        TransNARWorkload(tiny("transnar"), CPU)
    with pytest.raises(RelreasonError, match="not on bfs"):
        TransNARWorkload(tiny("transnar", "text:bfs", [f"model.nar={nar_run}"]), CPU)
    with pytest.raises(RelreasonError) as group:  # a group: every algorithm the NAR lacks, named in one line
        TransNARWorkload(tiny("transnar", "text:clrs30", [f"model.nar={nar_run}"]), CPU)
    lacking = [a for a in ALGORITHM_INFO if a not in ("insertion_sort", "binary_search")]
    assert "\n" not in str(group.value) and "(28 of the 30 algorithms of text:clrs30)" in str(group.value)
    assert all(a in str(group.value) for a in lacking)
    with pytest.raises(RelreasonError, match="not a trained run"):
        tiny("transnar", extra=[f"model.nar={tmp_path}"])
    cfg = tiny("transnar", extra=[f"model.nar={nar_run}"])
    assert cfg.model.nar_config["config"]["model_name"] == "triplet_gmpnn"


@pytest.mark.parametrize("damage", ["gone", "another config"])
def test_a_new_transnar_run_refuses_a_nar_checkpoint_that_is_not_the_recorded_one(tmp_path, nar_run, damage):
    """Without the recorded NAR weights a new run would train on the random NAR build_nar makes; it refuses
    before writing anything (resuming and evaluation load the NAR's copy from the run's own checkpoints)."""
    import shutil

    copy = tmp_path / "nar"
    shutil.copytree(nar_run, copy)
    cfg = tiny("transnar", "text:binary_search", [f"model.nar={copy}"])  # model.nar_config read from the run now
    if damage == "gone":
        shutil.rmtree(copy)
    else:
        cfg.model.nar_config["config"]["train"]["lr"] *= 2
    with pytest.raises(RelreasonError, match="would train on a random NAR") as e:
        run(cfg, out=tmp_path / "runs", name="t", show_progress=False)
    assert ("is gone" if damage == "gone" else "another configuration") in str(e.value)
    assert not (tmp_path / "runs" / "t" / "config.json").exists()


def test_a_nar_checkpoint_that_differs_in_where_and_how_it_ran_is_the_recorded_one(tmp_path, nar_run):
    """A NAR captured as CUDA graphs, or run on other threads, computed what its record says: it is read."""
    cfg = tiny("transnar", "text:binary_search", [f"model.nar={nar_run}"])
    cfg.model.nar_config["config"]["train"].update(threads=7, static_step=True, cuda_graph=True)
    wl = TransNARWorkload(cfg, CPU)
    assert wl.nar_loaded and wl.fresh_start_problem() is None


@pytest.mark.slow
def test_transnar_trains_and_evaluates_from_its_checkpoint_alone(tmp_path, nar_run):
    import shutil

    copy = tmp_path / "nar"
    shutil.copytree(nar_run, copy)
    sets = ["--set", f"model.nar={copy}"] + [x for s in TINY for x in ("--set", s)]
    res = runner.invoke(app, ["train", "transnar", "text:binary_search", "--recipe", "default", "--name", "t",
                              "--out", str(tmp_path), *sets])
    assert res.exit_code == 0, res.output
    shutil.rmtree(copy)  # evaluation needs nothing but the TransNAR run
    out = runner.invoke(app, ["eval", str(tmp_path / "t"), "--sizes", "5", "--num", "2", "--json"])
    assert out.exit_code == 0, out.output
    assert list(json.loads(out.stdout)["per_task"]) == ["binary_search@5"]



@pytest.mark.slow
@pytest.mark.parametrize("model", ["text_transformer", "transnar"])
def test_one_model_trains_on_a_text_group_and_eval_gives_its_per_algorithm_scores(tmp_path, nar_run, model):
    """The paper trains one model on every algorithm at once: `train MODEL text:a,text:b` makes one run
    (for TransNAR reading one multi-task NAR) whose test has every (algorithm, size) cell, and `eval`
    of its checkpoint recomputes exactly those cells."""
    sets = [x for s in TINY + [f"model.nar={nar_run}"] * (model == "transnar") for x in ("--set", s)]
    res = runner.invoke(app, ["train", model, TASKS, "--recipe", "quick", "--name", "g", "--out", str(tmp_path), *sets])
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "g" / "results.json").read_text())
    cells = results["per_task"]
    assert set(cells) == {f"{a}@{n}" for a in ("insertion_sort", "binary_search") for n in (5, 6)}
    assert all(c["num"] == 2 and set(c["outputs"]) == {"shape", "parse", "clrs"} for c in cells.values())
    assert results["test"]["score"] == pytest.approx(np.mean([
        np.mean([cells[f"{a}@{n}"]["score"] for n in (5, 6)]) for a in ("insertion_sort", "binary_search")]))
    weights = load_file(str(tmp_path / "g" / "best" / "model.safetensors"))
    if model == "transnar":  # one text model, one set of Eq. 3 blocks, one NAR with both algorithms' encoders
        assert {k.split(".")[2] for k in weights if k.startswith("nar.nets.")} == {"insertion_sort", "binary_search"}
        assert any(k.startswith("cross.0.ffn.") for k in weights)

    out = runner.invoke(app, ["eval", str(tmp_path / "g"), "--json"])
    assert out.exit_code == 0, out.output
    again = json.loads(out.stdout)
    assert again["per_task"] == cells
    assert again["score"] == results["test"]["score"]


def test_a_transnar_group_whose_nar_lacks_an_algorithm_fails_in_one_line(tmp_path, nar_run):
    sets = [x for s in TINY + [f"model.nar={nar_run}"] for x in ("--set", s)]
    res = runner.invoke(app, ["train", "transnar", "text:insertion_sort,text:bfs", "--recipe", "quick",
                              "--out", str(tmp_path), "--name", "t", *sets])
    assert res.exit_code == 1
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "not on bfs (1 of the 2 algorithms" in errors[0], res.output
    assert not (tmp_path / "t" / "results.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ABLATIONS.names() if ABLATIONS.get(n).variants[0].model == "transnar"])
def test_text_ablations_run_and_keep_per_size_scores(tmp_path, nar_run, name):
    abl = runner.invoke(app, ["ablate", name, "--tasks", "text:binary_search", "--seeds", "1",
                              "--recipe", "default", "--out", str(tmp_path / "abl"), "--json",
                              "--set", f"model.nar={nar_run}", *[x for s in TINY for x in ("--set", s)]])
    assert abl.exit_code == 0, abl.output
    data = json.loads(abl.stdout)
    assert data["variants"] == [v.label for v in ABLATIONS.get(name).variants]
    for cell in data["cells"]:
        assert set(cell["per_task"]) == {"binary_search@5", "binary_search@6"}
        assert set(cell["per_task"]["binary_search@5"]["outputs"]) == {"shape", "parse", "clrs"}
