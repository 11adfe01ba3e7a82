"""`relreason eval RUN --dump FILE` and `relreason score FILE` end to end: a tiny text run's dump scores
exactly as eval printed it, an LLM-style file by question scores against a split of ours named on the
command line or given as a file, and the options that cannot go together fail in one line."""

from __future__ import annotations

import json

import pytest

from cli_run import invoke, ok

TINY = ["model.layers=1", "model.width=16", "model.heads=2", "model.context=512", "model.max_position=1024",
        "train.batch_size=6", "train.train_examples=12", "train.eval_every_examples=12",
        "data.train_num=10", "data.val_num=3", "data.test_num=3", "data.test_sizes=[5, 6]"]


def table_rows(text: str) -> list[str]:
    """The body rows of a printed score table."""
    return [line for line in text.splitlines() if line.startswith("│")]


@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("score")
    sets = [x for s in TINY for x in ("--set", s)]
    ok(invoke("train", "text_transformer", "text:insertion_sort,text:binary_search", "--recipe", "default",
              "--name", "r", "--out", root, *sets))
    return root / "r"


def half_right(model, tokenizer, batch, *rest):
    """A stand-in for greedy decoding (a tiny run answers nothing right): the true answers, every other
    one with its 5s turned into 7s."""
    return [a if k % 2 == 0 else a.replace("5", "7") for k, a in enumerate(batch.answers)]


@pytest.mark.parametrize("decoding", ["model", "half right"])
def test_a_dump_scores_exactly_as_eval_printed(text_run, tmp_path, monkeypatch, decoding):
    if decoding == "half right":
        monkeypatch.setattr("relreason.train.text.workload.decode", half_right)
    dump = tmp_path / "answers.jsonl"
    printed = invoke("eval", text_run, "--dump", dump)
    assert f"answers: {dump}" in ok(printed) + printed.output
    lines = [json.loads(x) for x in dump.read_text().splitlines()]
    assert len(lines) == 12 and {"id", "question", "prediction", "answer"} <= set(lines[0])
    scored = invoke("score", dump)
    assert table_rows(ok(scored)) == table_rows(printed.stdout) and len(table_rows(scored.stdout)) == 5
    evaluated = json.loads(ok(invoke("eval", text_run, "--json")))
    again = json.loads(ok(invoke("score", dump, "--json")))
    assert again["outputs"] == evaluated["outputs"] and again["missing"] == 0
    assert {k: (v["outputs"], v["num"]) for k, v in again["per_task"].items()} == \
        {k: (v["outputs"], v["num"]) for k, v in evaluated["per_task"].items()}
    if decoding == "half right":
        assert 0 < again["score"] < 1
    # the same answers as an LLM would give them: question text and prediction, against our dump as truth
    llm = tmp_path / "llm.jsonl"
    llm.write_text("".join(json.dumps({"question": x["question"], "prediction": x["prediction"]}) + "\n"
                           for x in lines))
    by_question = json.loads(ok(invoke("score", llm, "--truth", dump, "--json")))
    assert by_question["outputs"] == evaluated["outputs"] and by_question["per_task"].keys() == \
        evaluated["per_task"].keys()


def test_an_llm_file_scores_against_a_split_named_on_the_command_line(tmp_path):
    ok(invoke("generate", "insertion_sort", "--text", "--sizes", "4,5", "--num", "2", "--seed", "0", "--out", tmp_path))
    split = tmp_path / "text" / "insertion_sort" / "custom_n4-5_s0_k2.jsonl"
    lines = [json.loads(x) for x in split.read_text().splitlines()]
    llm = tmp_path / "llm.jsonl"  # right, unparsable, the wrong shape; the fourth question unanswered
    answers = [lines[0]["answer"], "[a b c d]", "[0.5]"]
    llm.write_text("".join(json.dumps({"question": x["question"], "prediction": p}) + "\n"
                           for x, p in zip(lines, answers)))
    named = invoke("score", llm, "--sizes", "4,5", "--num", "2", "--seed", "0", "--json")
    res = json.loads(ok(named))
    assert res["per_task"]["insertion_sort@4"]["outputs"] == {"shape": 1.0, "parse": 0.5, "clrs": 0.5}
    assert res["per_task"]["insertion_sort@5"]["outputs"] == {"shape": 0.0, "parse": 0.5, "clrs": 0.0}
    assert res["missing"] == 1 and res["truth"] == "custom_n4-5_s0_k2 of insertion_sort"
    table = invoke("score", llm, "--truth", split)
    assert "missing" in ok(table) and "examples of the truth without an answer: 1 of 4" in table.output
    assert [[c.strip() for c in r.split("│")[3:7]] for r in table_rows(table.stdout)] == [
        ["1.0000", "0.5000", "0.5000", "0"], ["0.0000", "0.5000", "0.0000", "1"], ["0.5000", "0.5000", "0.2500", "1"]]


@pytest.mark.parametrize("args, message", [
    (["--truth", "t.jsonl", "--split", "test"], "name the truth twice"),
    (["--preset", "paper"], "describe a split to draw"),
    (["--hints"], "describe a split to draw"),
    ([], "names its example by question, which needs the examples it answers"),
    (["--split", "test", "--algorithms", "insertion_sortt"], "insertion_sort"),
    (["--split", "nope", "--algorithms", "insertion_sort"], "has no split 'nope'"),
    (["--sizes", "4", "--algorithms", "insertion_sort"], "needs --sizes, --num and --seed"),
])
def test_score_options_fail_in_one_line(tmp_path, args, message):
    llm = tmp_path / "llm.jsonl"
    llm.write_text(json.dumps({"question": "insertion_sort:\nkey: [0.5]\npred:\n", "prediction": "[0.5]"}) + "\n")
    res = invoke("score", llm, *args)
    assert res.exit_code == 1 and res.output.count("Error:") == 1 and message in res.output, res.output
    assert "Traceback" not in res.output


def test_dump_applies_to_text_runs(trained, tmp_path):
    root, _, _ = trained
    dump = tmp_path / "answers.jsonl"
    res = invoke("eval", root / "runs" / "tiny", "--dump", dump)
    assert res.exit_code == 1 and "--dump writes the answers of text runs" in res.output, res.output
    assert res.output.count("Error:") == 1 and not dump.exists()


def test_help_ends_with_examples():
    res = invoke("score", "--help", env={"COLUMNS": "200"})
    examples = ok(res).split("Examples:")[1]
    assert examples.count("relreason score ") == 3 and "--dump" in res.stdout.split("Examples:")[0]
