"""metrics.jsonl as training writes it (relreason.train.metrics_file): one flushed line per row, and on
resume the rows after the resumed checkpoint dropped, the others kept byte for byte."""

from __future__ import annotations

import pytest

from relreason.errors import RelreasonError
from relreason.rundir import DivergedRow, ResumeRow, TestRow, ValidationRow, read_metrics, row_json
from relreason.train.metrics_file import append_row, truncate_metrics


def val(examples: int) -> ValidationRow:
    return ValidationRow(step=examples // 4, examples=examples, score=examples / 100)


def written(path, rows) -> list[str]:
    for row in rows:
        append_row(path, row)
    return path.read_text().splitlines()


def test_append_row_writes_one_line_per_row_that_reads_back(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [val(0), val(16), DivergedRow(step=5, examples=20, loss="nan")]
    assert written(path, rows) == [row_json(r) for r in rows]
    assert read_metrics(path) == rows


def test_resuming_drops_what_came_after_its_checkpoint_and_keeps_the_rest(tmp_path):
    """At 16 examples: the validation at 32, a resume at 32 and the test go (they are written again);
    the validations up to 16, the resume at 16 and a divergence (the run's history) stay as they were."""
    path = tmp_path / "metrics.jsonl"
    lines = written(path, [val(0), val(16), ResumeRow(examples=16), DivergedRow(step=6, examples=24, loss="inf"),
                           val(32), ResumeRow(examples=32), TestRow(size=7, num=4, score=0.5)])
    truncate_metrics(path, examples=16)
    assert path.read_text().splitlines() == lines[:4]


def test_a_last_line_cut_by_a_kill_after_the_checkpoint_is_dropped(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = written(path, [val(0), val(16)])
    path.write_text(path.read_text() + row_json(val(32))[:20])  # killed while writing the next row
    truncate_metrics(path, examples=16)
    assert path.read_text().splitlines() == lines


@pytest.mark.parametrize("damaged", ['{"event": "val", "step": 4, "examples": 16, "score": "high"}',
                                     '{"event": "val", "step": 4, "exa'])
def test_a_damaged_line_inside_the_file_refuses_and_leaves_it(tmp_path, damaged):
    path = tmp_path / "metrics.jsonl"
    written(path, [val(0)])
    path.write_text(path.read_text() + damaged + "\n" + row_json(val(32)) + "\n")
    before = path.read_bytes()
    with pytest.raises(RelreasonError, match="cannot resume: .*metrics.jsonl:2") as e:
        truncate_metrics(path, examples=16)
    assert "repair or delete that line" in e.value.hint
    assert path.read_bytes() == before


def test_no_file_is_nothing_to_truncate(tmp_path):
    truncate_metrics(tmp_path / "metrics.jsonl", examples=16)
    assert not (tmp_path / "metrics.jsonl").exists()
