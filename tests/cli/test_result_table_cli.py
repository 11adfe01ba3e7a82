"""One result table (relreason.train.export.result_table) for `train`, `eval` and `export --results`: the
same run gives the same columns and rows in all three, each row saying how it is measured and which way is
better, in the unit it is shown in (a fraction is not labelled a percentage)."""

from __future__ import annotations

import csv
import io

from cli_run import relreason, succeeds, tiny_sets


def rich_rows(text: str) -> tuple[list[str], list[tuple[str, ...]]]:
    """(header, rows) of the one rich table printed in `text`."""
    def cells(line: str) -> tuple[str, ...]:
        return tuple(c.strip() for c in line.strip()[1:-1].split(line.strip()[0]))

    header = next(cells(line) for line in text.splitlines() if line.startswith("┃"))
    return list(header), [cells(line) for line in text.splitlines() if line.startswith("│")]


def test_train_eval_and_export_print_the_same_result_table(tmp_path):
    """bellman_ford has a pointer output (accuracy), a scalar hint (hint.d, a squared error: lower is better)
    and a mask hint (F1): `train` once left the measure column empty, and the score's `acc/F1 % ↑` labelled
    a fraction."""
    trained = succeeds(relreason("train", "mpnn", "bellman_ford", "--recipe", "quick", *tiny_sets(tmp_path / "data"),
                                 "--out", tmp_path / "runs", "--name", "t"))
    run = tmp_path / "runs" / "t"
    evaluated = succeeds(relreason("eval", run, "--hints"))
    exported = list(csv.reader(io.StringIO(succeeds(relreason("export", run, "--results", "csv")))))
    header, rows = rich_rows(trained)
    assert header == ["feature", "score", "measure"]
    assert rich_rows(evaluated) == (header, rows)
    assert (exported[0], [tuple(r) for r in exported[1:]]) == (header, rows)
    measures = {feature: measure for feature, _, measure in rows}
    assert measures == {"output.pi": "accuracy ↑", "score (mean of outputs)": "acc/F1 ↑",
                        "hint.pi_h": "accuracy ↑", "hint.d": "MSE ↓", "hint.msk": "F1 ↑"}
    title = next(line for line in trained.splitlines() if line.strip())
    assert title == next(line for line in evaluated.splitlines() if line.strip())
    assert title.startswith("mpnn on bellman_ford: test, n=6, 4 samples — ") and title.endswith("higher is better")
    assert "%" not in trained + evaluated
