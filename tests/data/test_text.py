"""CLRS-Text: our text streams are the reference's, character for character; answers parse and score.

`golden_text_digests.json` holds, per algorithm and case (length 5 or 12, seed 0 or 7, with and
without hints, floats truncated to 3 decimals; plus one untruncated stream), the sha256 of the first
few (question, answer) pairs made by the reference implementation (google-deepmind/clrs 2.0.3),
computed by scripts/golden_text.py (which documents how to re-run it).
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from relreason.cli.main import app
from relreason.data import ALGORITHMS, run_algorithm
from relreason.data.algorithms.geometry import _truncated_disk_points, sample_disk_points
from relreason.data.samplers import truncate
from relreason.data.text import (ANSWER_CHARS, REFERENCE_TRAIN_LENGTHS, REFERENCE_VAL_STOP, TEXT_PRESETS,
                                 ParsedAnswer, TextParseError, TextPiece, answer_arrays,
                                 draw_sample, load_text_split, parse_answer, parse_sizes, render,
                                 resolve_text_split, score_answer, text_batch, text_batches, text_examples,
                                 text_path, text_split, write_text_split)
from relreason.errors import RelreasonError

GOLDEN = json.loads((Path(__file__).parent / "golden_text_digests.json").read_text())
NAMES = ALGORITHMS.names()


def digest(pairs) -> str:
    """The golden file's digest (scripts/golden_text.py: sha256 of the JSON list of [question, answer])."""
    import hashlib

    return hashlib.sha256(json.dumps([list(p) for p in pairs]).encode()).hexdigest()[:24]


def parse_case(key: str) -> dict:
    """"n12_s7_hints_d3" -> length 12, seed 7, hints, 3 decimals ("dfull": untruncated)."""
    n, s, h, d = key.split("_")
    return {"length": int(n[1:]), "seed": int(s[1:]), "hints": h == "hints",
            "decimals": None if d == "dfull" else int(d[1:])}


def test_golden_file_covers_exactly_the_registered_algorithms():
    assert set(GOLDEN["digests"]) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_streams_equal_the_reference(name):
    cases = GOLDEN["digests"][name]
    assert len(cases) == 9
    for key, want in cases.items():
        c = parse_case(key)
        batch = text_batch(name, c["length"], c["seed"], GOLDEN["settings"]["num"], c["hints"], decimals=c["decimals"])
        assert digest(zip(batch.questions, batch.answers)) == want, f"{name} {key}"


def test_the_documented_example():
    ex = next(text_examples("insertion_sort", 5, 0, 1))
    assert ex.question == "insertion_sort:\nkey: [0.548 0.715 0.602 0.544 0.423]\npred:\n"
    assert ex.answer == "[0.423 0.544 0.548 0.602 0.715]\n\n"


def test_hint_formats_by_hand():
    # insertion sort: i = j = 0 first, then one hint per key: T = n; the trace shows hints 1..T-2
    ex = next(text_examples("insertion_sort", 4, 0, 1, hints=True))
    assert ex.question == ("insertion_sort:\nkey: [0.548 0.715 0.602 0.544], initial_trace: [0.548 0.715 0.602 0.544]"
                           "\ntrace | pred:\n")
    assert ex.answer == "[0.548 0.715 0.602 0.544], [0.548 0.602 0.715 0.544] | [0.544 0.548 0.602 0.715]\n\n"
    bs = next(text_examples("binary_search", 8, 0, 1, hints=True))
    assert bs.question.endswith(", initial_trace: (0, 7)\ntrace | (low, high):\n")
    assert bs.answer.count("(") == bs.answer.count(")") and " | (" in bs.answer
    km = next(text_examples("kmp_matcher", 8, 0, 1, hints=True))
    assert km.question.endswith("trace | s:\n") and km.question.startswith("kmp_matcher:\nstring: [")
    plain = text_batch("segments_intersect", 4, 3, 5)
    hinted = text_batch("segments_intersect", 4, 3, 5, hints=True)  # no `intersect_h`: no trace, same text
    assert plain.questions == hinted.questions and plain.answers == hinted.answers


def test_integer_inputs_print_as_ints():
    dfs = next(text_examples("dfs", 5, 0, 1))
    assert "A: [[" in dfs.question and ".0" not in dfs.question
    scc = next(text_examples("strongly_connected_components", 5, 0, 1))
    assert "1.0" in scc.question or "0.0" in scc.question  # built in a float matrix by the reference
    ts = next(text_examples("task_scheduling", 5, 0, 1))
    assert ts.question.split("d: [")[1].split("]")[0].replace(" ", "").isdigit()


def test_examples_do_not_depend_on_chunking_and_skip_continues_the_stream():
    whole = text_batch("bubble_sort", 6, 5, 9, hints=True)
    parts = list(text_batches("bubble_sort", 6, 5, 9, hints=True, chunk=4))
    assert [len(p) for p in parts] == [4, 4, 1]
    assert sum((p.questions for p in parts), []) == whole.questions
    assert sum((p.answers for p in parts), []) == whole.answers
    tail = text_batch("bubble_sort", 6, 5, 3, hints=True, skip=6)
    assert tail.questions == whole.questions[6:] and tail.answers == whole.answers[6:]


@pytest.mark.parametrize("name", NAMES)
def test_each_example_keeps_its_graph_form(name):
    rng = np.random.RandomState(4)
    alg = ALGORITHMS.get(name)
    for ex in text_examples(name, 6, 4, 2, hints=True):
        inputs = draw_sample(alg, rng, 6, 3)
        traj = run_algorithm(name, *inputs)
        assert render(traj, hints=True) == (ex.question, ex.answer)
        for k, v in traj.inputs.items():
            np.testing.assert_array_equal(ex.trajectory.inputs[k], v)


def test_truncate_is_toward_zero_and_leaves_ints():
    x = np.array([0.12345, -0.12345, -0.0004, 1.9999])
    out, d, t = truncate((x, np.array([3, 4]), 0.98765), 3)
    np.testing.assert_array_equal(out, [0.123, -0.123, -0.0, 1.999])
    assert np.signbit(out[2])  # -0.0 prints "-0.0", as the reference's
    assert d.dtype.kind == "i" and isinstance(t, float) and t == 0.987
    assert truncate((x,), None)[0] is x


def test_hull_sampler_draws_as_ours_when_truncation_rejects_nothing():
    for seed in range(8):
        a = _truncated_disk_points(np.random.RandomState(seed), 5, 3)
        b = truncate(sample_disk_points(np.random.RandomState(seed), 5), 3)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


def test_every_character_is_printable_ascii():
    allowed = set(string.printable) - set("\t\r\x0b\x0c")
    for name in NAMES:
        for length in (4, 7, 12):
            for hints in (False, True):
                batch = text_batch(name, length, 1, 3, hints)
                for q, a in zip(batch.questions, batch.answers):
                    assert set(q + a) <= allowed, name
                    assert set(a) <= ANSWER_CHARS | {"\n"}, name


# --- parsing and scores ---


@pytest.mark.parametrize("hints", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_answers_round_trip_to_the_true_arrays(name, hints):
    for ex in text_examples(name, 7, 2, 3, hints):
        parsed = parse_answer(ex.answer, name, hints)
        assert parsed.equals(answer_arrays(ex.trajectory, hints)), name
        assert score_answer(ex.answer, ex.answer, trace=True) == score_answer(ex.answer, ex.answer)
        s = score_answer(ex.answer, ex.answer)
        assert (s.shape, s.parse, s.clrs) == (1.0, 1.0, 1.0)


def test_sorting_answer_is_the_sorted_keys():
    for ex in text_examples("heapsort", 9, 0, 5):
        (out,) = parse_answer(ex.answer, "heapsort").output
        np.testing.assert_array_equal(out, np.sort(ex.trajectory.inputs["key"]))


TRUTH = "[0.423 0.544 0.548 0.602 0.715]\n\n"


@pytest.mark.parametrize("prediction, shape, parse, clrs", [
    ("[0.423 0.544 0.548 0.602 0.715]\n\n", 1, 1, 1.0),  # right
    ("  [0.423  0.544 0.548 0.602 0.715] ", 1, 1, 1.0),  # extra spaces, no newline
    ("[0.423 0.544 0.548 0.602 0.715]\n\nkey: [1 2]", 1, 1, 1.0),  # garbage after the answer
    ("[0.4230 0.544 0.548 0.602 0.715]", 1, 1, 1.0),  # the same 3-decimal value
    ("[0.423 0.544 0.548 0.715 0.602]", 1, 1, 0.6),  # two wrong
    ("[0.423 0.544 0.548 0.602]", 0, 1, 0.0),  # wrong shape
    ("[0.423 0.544 0.548 0.602 0.715 0.1]", 0, 1, 0.0),
    ("0.423 0.544 0.548 0.602 0.715", 0, 1, 0.0),  # no brackets
    ("[0.423 0.544 0.548 0.602 x.715]", 1, 0, 0.8),  # garbled element: illegal, unequal, shape kept
    ("[0.423 0.544 0.548 0.602 0.7.15]", 1, 0, 0.8),  # legal characters, not a number
    ("pred: [0.423 0.544 0.548 0.602 0.715]", 0, 0, 0.0),
    ("", 0, 1, 0.0),
])
def test_scores_on_hand_made_answers(prediction, shape, parse, clrs):
    s = score_answer(prediction, TRUTH)
    assert (s.shape, s.parse) == (shape, parse)
    assert s.clrs == pytest.approx(clrs)


def test_scores_with_hints_look_at_the_output_unless_asked():
    truth = "(4, 7), (6, 7) | (7, 7)\n\n"
    assert score_answer("(4, 7) | (7, 7)", truth).clrs == 1.0
    assert score_answer("(4, 7) | (7, 7)", truth, trace=True).shape == 0.0
    assert score_answer("(4, 7), (6, 6) | (7, 7)", truth, trace=True).clrs == pytest.approx(5 / 6)
    assert score_answer("7, 7", "[-1 0 1]\n\n").shape == 0.0
    assert score_answer("[-1 0 1.0]", "[-1 0 1]\n\n").clrs == 1.0


def test_parse_is_tolerant_of_spacing_and_strict_about_structure():
    truth = ParsedAnswer((np.array([1.0, 2.0]), np.array(3.0)))
    assert parse_answer(" [1  2] ,3 \njunk", "topological_sort").equals(truth)
    assert parse_answer("(0, 1) | (2,3)", "binary_search", hints=True).output[1] == 3.0
    for bad, why in [("[1 2]", "values"), ("[1 2], 3, 4", "values"), ("[1 2], x", "illegal"),
                     ("[[1 2], [3]], 1", "rows"), ("[1 2, 3", "not a number"), ("[1 2", "expected"),
                     ("[1 2], 3 ]", "unexpected")]:
        with pytest.raises(TextParseError, match=why):
            parse_answer(bad, "topological_sort")
    with pytest.raises(TextParseError, match="multiple"):
        parse_answer("(1, 2), 3 | (4, 5)", "binary_search", hints=True)


# --- splits, files, CLI ---


def test_presets_cover_every_algorithm():
    assert set(REFERENCE_TRAIN_LENGTHS) == set(NAMES) == set(REFERENCE_VAL_STOP)
    train, val = text_split("paper", "train", "dfs"), text_split("paper", "val", "dfs")
    assert [p.length for p in train] == [4, 5, 6, 7, 8, 12] and {p.num for p in train} == {7000}
    assert all(v.skip == 7000 and v.num == 3000 and v.seed == t.seed for v, t in zip(val, train))
    assert {p.length for p in text_split("paper", "test", "dfs")} == {10, 12, 14}
    ref_val = text_split("clrs_text", "val", "bridges")
    assert [(p.length, p.seed) for p in ref_val[:6]] == [(4, 3), (4, 14), (4, 35), (4, 81), (4, 94), (5, 3)]
    assert len(ref_val) == 4 * 5 and {p.num for p in ref_val} == {125}
    assert [p.length for p in text_split("clrs_text", "train", "bubble_sort")] == [4, 5, 10]
    with pytest.raises(RelreasonError, match="no split"):
        text_split("clrs_text", "test", "dfs")
    assert set(TEXT_PRESETS.names()) == {"paper", "clrs_text"}


@pytest.mark.parametrize("text, sizes", [("12", (12,)), ("4-8,12", (4, 5, 6, 7, 8, 12)), (" 3 - 4 ", (3, 4))])
def test_parse_sizes(text, sizes):
    assert parse_sizes(text) == sizes


@pytest.mark.parametrize("text", ["4-", "0", "x", "", "5-3", "4,4", "4,,5", "-3"])
def test_parse_sizes_rejects(text):
    with pytest.raises(RelreasonError, match="--sizes"):
        parse_sizes(text)


def test_write_and_load_a_split(tmp_path):
    request = resolve_text_split("minimum", sizes="4,6", num=5, seed=3, hints=True)
    path = write_text_split(request, tmp_path)
    assert path == text_path(tmp_path, "minimum", "custom_n4+6_s3_k5", True)
    assert sorted(p.name for p in path.parent.iterdir()) == ["custom_n4+6_s3_k5_hints.jsonl",
                                                             "custom_n4+6_s3_k5_hints.meta.json"]
    split = load_text_split(path)
    a, b = text_batch("minimum", 4, 3, 5, True), text_batch("minimum", 6, 3, 5, True)
    assert split.questions == a.questions + b.questions and split.answers == a.answers + b.answers
    assert split.lengths.tolist() == [4] * 5 + [6] * 5 and split.algorithm == "minimum"
    with pytest.raises(RelreasonError, match="already exists"):
        write_text_split(request, tmp_path)
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(RelreasonError, match=":11 is (not|corrupt)"):
        load_text_split(path)


def _small_presets(monkeypatch):
    """Makes every preset split two tiny pieces, so that the CLI tests stay fast."""
    import relreason.data.text as text
    from relreason.data.text import splits

    def two_pieces(preset, split, alg):
        return TextPiece(4, 0, 3), TextPiece(5, 1, 2)

    monkeypatch.setattr(splits, "text_split", two_pieces)  # what the split files are made of
    monkeypatch.setattr(text, "text_split", two_pieces)  # what the tasks read (relreason.tasks)


runner = CliRunner()


def test_cli_custom_text_split_is_the_stream_prefix(tmp_path):
    res = runner.invoke(app, ["generate", "jarvis_march", "--text", "--sizes", "5", "--num", "4", "--seed", "7",
                              "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in (tmp_path / "text/jarvis_march/custom_n5_s7_k4.jsonl").read_text().splitlines()]
    want = text_batch("jarvis_march", 5, 7, 4)
    assert [x["question"] for x in lines] == want.questions and [x["answer"] for x in lines] == want.answers
    assert {(x["algorithm"], x["length"]) for x in lines} == {("jarvis_march", 5)}


def test_cli_text_defaults(tmp_path, monkeypatch):
    _small_presets(monkeypatch)
    res = runner.invoke(app, ["generate", "insertion_sort", "--text", "--hints", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert len(load_text_split(tmp_path / "text/insertion_sort/paper_train_hints.jsonl")) == 5


@pytest.mark.parametrize("args, message", [
    (["--text", "--sizes", "4-", "--num", "2", "--seed", "0"], "bad --sizes"),
    (["--text", "--sizes", "0", "--num", "2", "--seed", "0"], "bad --sizes"),
    (["--text", "--sizes", "x", "--num", "2", "--seed", "0"], "bad --sizes"),
    (["--text", "--size", "5"], "--size does not apply"),
    (["--sizes", "5"], "add --text"),
    (["--hints"], "add --text"),
    (["--text", "--split", "val", "--sizes", "5"], "cannot be combined"),
    (["--text", "--sizes", "5"], "missing: --num, --seed"),
    (["--text", "--preset", "clrs_text", "--split", "test"], "no split"),
    (["--text", "--preset", "papr"], "did you mean"),
])
def test_cli_text_bad_inputs(tmp_path, args, message):
    res = runner.invoke(app, ["generate", "dfs", *args, "--out", str(tmp_path)])
    assert res.exit_code == 1, res.output
    assert message in res.output and "Traceback" not in res.output
    assert not (tmp_path / "text").exists()
