"""Scoring CLRS-Text predictions files (relreason.eval.text_score): ids name the examples of every split we
generate, an LLM-style file scores as computed by hand, the same answers score the same by id and by
question, our own answers score as the evaluation that made them, and every malformed file fails in one line."""

from __future__ import annotations

import json

import pytest
import torch

from relreason.config import build_config
from relreason.data.algorithms import ALGORITHMS
from relreason.data.text import (ExampleId, TextPiece, TextScore, TextSplitRequest, load_text_split,
                                 resolve_text_split, text_batch, write_text_split)
from relreason.errors import RelreasonError
from relreason.eval.text_score import (Truth, TruthExample, answers_writer, read_predictions, read_truth,
                                       score_predictions, split_truth, summarize_text_scores, truth_of_ids)


def write_lines(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def file_lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


# -- ids -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("insertion_sort/n12/s3/i17", ExampleId("insertion_sort", 12, 3, 17)),
    ("bfs/n4/s0/i7000/hints", ExampleId("bfs", 4, 0, 7000, hints=True)),
    ("minimum/n5/s1/i0/dfull", ExampleId("minimum", 5, 1, 0, decimals=None)),
    ("minimum/n5/s1/i0/hints/d2", ExampleId("minimum", 5, 1, 0, hints=True, decimals=2)),
])
def test_ids_read_back_as_written(text, want):
    assert ExampleId.parse(text) == want and str(want) == text


@pytest.mark.parametrize("text", ["insertion_sort/n12/s3", "insertion_sort/12/3/17", "a/n1/s1/i1/hint",
                                  "a/n1/s1/i-1", " a/n1/s1/i1", "a/b/n1/s1/i1"])
def test_malformed_ids_are_refused(text):
    with pytest.raises(RelreasonError, match="is not an example id"):
        ExampleId.parse(text)


@pytest.mark.parametrize("algorithm", ALGORITHMS.names())
def test_ids_of_generated_files_name_their_examples(algorithm, tmp_path):
    """A split's ids count from its streams' start (a piece that skips examples included), and drawing an
    id again gives the file's question and answer, with and without hints."""
    size = max(ALGORITHMS.get(algorithm).min_size, 5)
    for hints in (False, True):
        request = TextSplitRequest(algorithm, "x", (TextPiece(size, 2, 2, skip=3), TextPiece(size, 5, 1)), hints)
        path = write_text_split(request, tmp_path / str(hints))
        lines = file_lines(path)
        ids = [ExampleId.parse(x["id"]) for x in lines]
        assert ids == [ExampleId(algorithm, size, 2, 3, hints), ExampleId(algorithm, size, 2, 4, hints),
                       ExampleId(algorithm, size, 5, 0, hints)]
        drawn = truth_of_ids(reversed(ids))
        assert [(drawn[i].question, drawn[i].answer) for i in ids] == [(x["question"], x["answer"]) for x in lines]
        assert drawn[ids[0]].question == text_batch(algorithm, size, 2, 4, hints).questions[3]


def test_files_keep_their_fields_and_load_as_before(tmp_path):
    path = write_text_split(resolve_text_split("minimum", sizes="4", num=2, seed=0), tmp_path)
    assert [list(x) for x in file_lines(path)] == [["id", "question", "answer", "algorithm", "length"]] * 2
    assert load_text_split(path).questions == text_batch("minimum", 4, 0, 2).questions


# -- the shared aggregation ----------------------------------------------------------------------------

def test_summary_averages_per_cell_then_over_algorithms():
    s = lambda shape, parse, clrs: TextScore(shape, parse, clrs)  # noqa: E731
    res = summarize_text_scores("test", [("bfs", 4, [s(1, 1, 1), s(0, 1, 0)]), ("bfs", 5, [s(1, 1, 1)]),
                                         ("dfs", 4, [s(0, 0, 0)])])
    assert res["per_task"]["bfs@4"]["outputs"] == {"shape": 0.5, "parse": 1.0, "clrs": 0.5}
    assert list(res["per_task"]) == ["bfs@4", "bfs@5", "dfs@4"] and res["per_task"]["bfs@4"]["num"] == 2
    # bfs: the mean of its 3 examples (2/3 CLRS, not the mean of its cells, 3/4), dfs 0; then the mean of the two
    assert res["outputs"] == {"shape": pytest.approx(1 / 3), "parse": pytest.approx(0.5), "clrs": pytest.approx(1 / 3)}
    assert res["score"] == res["outputs"]["clrs"] and res["num"] == 4 and res["size"] == 5
    assert res["label"] == "test, n=4/5, 1-2 examples per algorithm and size, mean over 2 algorithms"


# -- an LLM's file -------------------------------------------------------------------------------------

@pytest.fixture
def split(tmp_path):
    """insertion_sort at sizes 4 and 5, three examples each: the file and its lines."""
    path = write_text_split(resolve_text_split("insertion_sort", sizes="4,5", num=3, seed=0), tmp_path / "data")
    return path, file_lines(path)


def llm_answers(lines):
    """Answers to the six questions: right; two of four values wrong; unparsable; the wrong shape (two
    values of five); right with chatter after the line; and none for the last."""
    a = [x["answer"] for x in lines]
    keys = a[1].strip().strip("[]").split()
    return [a[0], f"[{keys[0]} {keys[1]} 9.5 9.75]", a[2].replace("[", "[x ", 1).replace(" ", "", 1).rstrip(),
            "[0.1 0.2]", a[4].rstrip("\n") + "\nI sorted the keys.", None]


# hand-computed: n=4: (1, 1, 1), (1, 1, 0.5), (1, 0, 0.75); n=5: (0, 1, 0), (1, 1, 1), missing (0, 0, 0)
HAND = {"insertion_sort@4": {"shape": 1.0, "parse": 2 / 3, "clrs": 0.75},
        "insertion_sort@5": {"shape": 1 / 3, "parse": 2 / 3, "clrs": 1 / 3}}


def test_an_llm_style_file_scores_as_computed_by_hand(split, tmp_path):
    path, lines = split
    answers = llm_answers(lines)
    assert answers[2].startswith("[x") and len(answers[2].split()) == 4  # "[x0.xxx ...]": one unparsable value
    preds = write_lines(tmp_path / "llm.jsonl", [{"question": x["question"], "prediction": p, "model": "some-llm"}
                                                 for x, p in zip(lines, answers) if p is not None])
    res = score_predictions(read_predictions(preds), read_truth([path]), source="llm")
    for cell, want in HAND.items():
        assert res["per_task"][cell]["outputs"] == pytest.approx(want), cell
        assert res["per_task"][cell]["num"] == 3
    assert res["outputs"] == pytest.approx({"shape": 4 / 6, "parse": 4 / 6, "clrs": 3.25 / 6})
    assert (res["missing"], res["per_task"]["insertion_sort@5"]["missing"], res["answered"]) == (1, 1, 5)
    # the same truth drawn again by name scores the same
    again = score_predictions(read_predictions(preds), split_truth(["insertion_sort"], sizes="4,5", num=3, seed=0),
                              source="llm")
    assert again["per_task"] == res["per_task"] and again["outputs"] == res["outputs"]


def test_the_same_answers_score_the_same_by_id_and_by_question(split, tmp_path):
    path, lines = split
    answers = llm_answers(lines)[:5] + [lines[5]["answer"]]
    by_question = write_lines(tmp_path / "q.jsonl", [{"question": x["question"], "prediction": p}
                                                     for x, p in zip(lines, answers)])
    by_id = write_lines(tmp_path / "i.jsonl", [{"id": x["id"], "prediction": p} for x, p in zip(lines, answers)])
    both = write_lines(tmp_path / "b.jsonl", [{"id": x["id"], "question": x["question"], "prediction": p}
                                              for x, p in reversed(list(zip(lines, answers)))])
    truth = read_truth([path])
    results = [score_predictions(read_predictions(by_question), truth),
               score_predictions(read_predictions(by_id), truth),
               score_predictions(read_predictions(by_id)),  # no truth: drawn again from the ids
               score_predictions(read_predictions(both))]
    first = results[0]
    assert first["outputs"]["clrs"] == pytest.approx((2.25 + 2) / 6) and first["missing"] == 0
    for res in results[1:]:
        assert res["outputs"] == first["outputs"] and res["missing"] == 0
        assert {k: v["outputs"] for k, v in res["per_task"].items()} == {k: v["outputs"]
                                                                         for k, v in first["per_task"].items()}
        assert list(res["per_task"]) == ["insertion_sort@4", "insertion_sort@5"]


def test_a_question_the_truth_holds_twice_may_be_answered_twice(tmp_path):
    twice = TruthExample("minimum", 4, "Q", "1\n\n")
    truth = Truth([twice, TruthExample("minimum", 4, "R", "2\n\n"), twice], "hand-made")
    preds = [{"question": "Q", "prediction": "1"}, {"question": "Q", "prediction": "0"},
             {"question": "R", "prediction": "2"}]
    res = score_predictions(read_predictions(write_lines(tmp_path / "p.jsonl", preds)), truth)
    assert res["per_task"]["minimum@4"]["outputs"]["clrs"] == pytest.approx(2 / 3) and res["missing"] == 0
    with pytest.raises(RelreasonError, match=r":4 answers a question again: the truth holds it 2 times, "
                                             r"answered on lines 1, 2"):
        score_predictions(read_predictions(write_lines(tmp_path / "p.jsonl", preds + [preds[0]])), truth)


# -- errors --------------------------------------------------------------------------------------------

GOOD = {"id": "insertion_sort/n4/s0/i0", "prediction": "[0.1]"}


@pytest.mark.parametrize("rows, message", [
    ([], "holds no predictions"),
    (["{not json"], r"p.jsonl:1 is not JSON"),
    ([GOOD, "[1, 2]"], r"p.jsonl:2 is not a JSON object"),
    ([{"id": GOOD["id"]}], r"p.jsonl:1 has no 'prediction' string"),
    ([{"id": GOOD["id"], "prediction": 3}], r"p.jsonl:1: 'prediction' is not a string"),
    ([{"prediction": "1"}], r"p.jsonl:1 names no example"),
    ([{"id": 17, "prediction": "1"}], r"'id' is not a string"),
    ([{"id": "insertion_sort/4/0/0", "prediction": "1"}], r"p.jsonl:1: 'insertion_sort/4/0/0' is not an example id"),
    ([{**GOOD, "hints": "yes"}], r"'hints' is not true or false"),
    ([{**GOOD, "hints": True}], r"'hints' is true but the id insertion_sort/n4/s0/i0 is an example without hints"),
])
def test_malformed_files_fail_in_one_line(rows, message, tmp_path):
    path = write_lines(tmp_path / "p.jsonl", rows)
    with pytest.raises(RelreasonError, match=message):
        read_predictions(path)


def test_a_missing_file_fails(tmp_path):
    with pytest.raises(RelreasonError, match="predictions file .* does not exist"):
        read_predictions(tmp_path / "nope.jsonl")
    with pytest.raises(RelreasonError, match="truth file .* does not exist"):
        read_truth([tmp_path / "nope.jsonl"])
    with pytest.raises(RelreasonError, match=r"bad.jsonl:1 has no 'answer' string"):
        read_truth([write_lines(tmp_path / "bad.jsonl", [{"question": "Q", "algorithm": "a", "length": 4}])])


def test_unresolvable_answers_fail_naming_the_line(split, tmp_path):
    path, lines = split
    truth = read_truth([path])
    q0, q1 = lines[0]["question"], lines[1]["question"]
    cases = [
        ([GOOD, {"question": q0, "prediction": "1"}], None, r"p.jsonl:2 names its example by question, which needs"),
        ([{"id": "insertion_sortt/n4/s0/i0", "prediction": "1"}], None, r"p.jsonl:1: id insertion_sortt/n4/s0/i0: .*"
                                                                         r"insertion_sort"),
        ([{"id": "insertion_sort/n2000/s0/i0", "prediction": "1"}], None, r"p.jsonl:1: id .*size 2000 is out of range"),
        ([GOOD, {"id": GOOD["id"], "prediction": "2"}], None, r"p.jsonl:2 answers insertion_sort/n4/s0/i0 again "
                                                              r"\(line 1 answered it first\)"),
        ([{**GOOD, "question": q1}], None, r"p.jsonl:1: the question is not the one of insertion_sort/n4/s0/i0"),
        ([{**GOOD, "question": q1}], truth, r"p.jsonl:1: the question is not the one of insertion_sort/n4/s0/i0"),
        ([{"id": "insertion_sort/n4/s0/i3", "prediction": "1"}], truth, r"p.jsonl:1: the example insertion_sort/n4/s0/"
                                                                         r"i3 is not one of the truth"),
        ([{"question": "insertion_sort:\nkey: [0.5]\npred:\n", "prediction": "1"}], truth,
         r"p.jsonl:1: the question is not one of the truth \(.*custom_n4-5_s0_k3.jsonl\)"),
        ([{"question": q0, "prediction": "1"}, {"question": q0, "prediction": "1"}], truth,
         r"p.jsonl:2 answers a question again: the truth holds it 1 time, answered on line 1"),
        ([{"question": q0, "prediction": "1"}, {"id": lines[0]["id"], "prediction": "1"}], truth,
         r"p.jsonl:1 answers a question again"),  # the id's line takes the example first
    ]
    for rows, known, message in cases:
        with pytest.raises(RelreasonError, match=message):
            score_predictions(read_predictions(write_lines(tmp_path / "p.jsonl", rows)), known, source="p.jsonl")
    doubled = Truth(truth.examples + truth.examples[:1], "twice")
    with pytest.raises(RelreasonError, match=r"the truth \(twice\) holds the example insertion_sort/n4/s0/i0 twice"):
        score_predictions(read_predictions(write_lines(tmp_path / "p.jsonl", [GOOD])), doubled)


# -- our own answers: evaluation and dump ------------------------------------------------------------------

TINY = ["model.layers=1", "model.width=16", "model.heads=2", "model.context=512", "model.max_position=1024",
        "train.batch_size=6", "train.train_examples=12", "train.eval_every_examples=12",
        "data.train_num=10", "data.val_num=3", "data.test_num=3", "data.test_sizes=[5, 6]"]


def half_right(model, tokenizer, batch, *rest):
    """A stand-in for greedy decoding: the true answers, every other one with its 5s turned into 7s."""
    return [a if k % 2 == 0 else a.replace("5", "7") for k, a in enumerate(batch.answers)]


def test_a_dump_scores_as_the_evaluation_that_wrote_it(tmp_path, monkeypatch):
    from relreason.train.text import TextWorkload

    monkeypatch.setattr("relreason.train.text.workload.decode", half_right)
    cfg = build_config("text_transformer", "text:insertion_sort,text:binary_search", "default",
                       TINY + ["data.hints=true", "train.eval_batch_size=2"])
    wl = TextWorkload(cfg, torch.device("cpu"))
    dump = tmp_path / "out" / "answers.jsonl"
    with answers_writer(dump) as write:
        assert not dump.exists()  # written under a temporary name until the evaluation ends
        res = wl.evaluate("test", on_answers=write)
    lines = file_lines(dump)
    assert len(lines) == res["num"] == 12 and lines[0]["id"] == "insertion_sort/n5/s3/i0/hints"
    assert 0 < res["score"] < 1 and len({c["score"] for c in res["per_task"].values()}) > 1
    for truth in (None, read_truth([dump])):
        again = score_predictions(read_predictions(dump), truth, source="test")
        assert again["per_task"] == {k: {**v, "missing": 0} for k, v in res["per_task"].items()}
        assert again["outputs"] == res["outputs"] and again["score"] == res["score"] and again["num"] == res["num"]
        assert again["label"] == res["label"]
    with pytest.raises(RuntimeError), answers_writer(tmp_path / "failed.jsonl") as write:
        write([])
        raise RuntimeError("the evaluation failed")
    assert [f.name for f in tmp_path.iterdir() if "failed" in f.name] == []
    with pytest.raises(RelreasonError, match="is a directory"), answers_writer(tmp_path):
        pass


@pytest.mark.parametrize("content, message", [
    (b'{"id": "insertion_sort/n4/s0/i0", "prediction": "1"}\n\x89PNG\r\n\x1a\n\xff\xfe', r"p.jsonl:2 is not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000 + b"\n", r"p.jsonl:1 is nested too deeply"),
])
def test_binary_and_deeply_nested_lines_fail_naming_the_line(tmp_path, content, message):
    path = tmp_path / "p.jsonl"
    path.write_bytes(content)
    with pytest.raises(RelreasonError, match=message):
        read_predictions(path)


def test_an_id_asking_to_draw_too_much_is_refused_before_drawing(tmp_path):
    """insertion_sort/n1600/s3/i9000000 is a valid id (size and index within the generator's limits), but
    drawing it again means drawing 9 million graphs of 1600 nodes first: refused, saying why."""
    path = write_lines(tmp_path / "p.jsonl", [GOOD, {"id": "insertion_sort/n1600/s3/i9000000", "prediction": "1"}])
    with pytest.raises(RelreasonError, match=r"p.jsonl:2: id insertion_sort/n1600/s3/i9000000 asks to draw "
                                             r"9,000,001 examples of 1600 nodes again") as e:
        score_predictions(read_predictions(path), source="p.jsonl")
    assert "--truth" in e.value.hint
