"""A run's metrics.jsonl as training writes it: rows appended one flushed line at a time
(`append_row`), and on resume cut back to the checkpoint resumed from (`truncate_metrics`).

    append_row(RunDir(run_dir).metrics, ValidationRow(...))
    truncate_metrics(RunDir(run_dir).metrics, examples=320)   # before a resume appends again

The rows and their reading are relreason.rundir's; a row is appended before the checkpoint that follows
it moves last/ forward, so a kill never loses a line, and a resume drops what comes after its checkpoint
(written again as the run goes on).
"""

from __future__ import annotations

from pathlib import Path

from relreason.data.store import atomic_path
from relreason.errors import RelreasonError
from relreason.files import open_for_update
from relreason.rundir import ResumeRow, TestRow, ValidationRow, row_json, scan_metrics


def append_row(path: Path, row) -> None:
    """Appends one row (relreason.rundir) to metrics.jsonl, flushed: a kill loses at most this line."""
    with open(path, "a", opener=open_for_update) as f:  # the run's own file: no link, no hard link, no FIFO
        f.write(row_json(row) + "\n")
        f.flush()


def truncate_metrics(path: Path, examples: int) -> None:
    """Drops the validation, resume and test rows written after the checkpoint we resume from (they will
    be written again), and a last line cut by a kill while it wrote a row after that checkpoint. Rows
    of divergences and of events this version does not know are kept.

    Raises:
        RelreasonError: another line is damaged (edited, or a row of this checkpoint cut): the file is
            the run's record and is left as it is."""
    if not path.exists():
        return
    rows, damaged = scan_metrics(path)
    text = path.read_text(errors="replace")
    lines = text.splitlines()
    intact = [row for _, _, row in rows if isinstance(row, (ValidationRow, ResumeRow))]
    kill_cut = (not text.endswith("\n") and intact and intact[-1].examples == examples and damaged
                and damaged[-1][0] == len(lines))
    damaged = damaged[:-1] if kill_cut else damaged
    if damaged:
        more = f" (and {len(damaged) - 1} more damaged line(s))" if len(damaged) > 1 else ""
        raise RelreasonError(f"cannot resume: {damaged[0][1]}{more}",
                             f"{path} is the run's record, so it is not rewritten while a line is damaged: "
                             "repair or delete that line, then resume")
    drop = {i for i, _, row in rows if isinstance(row, TestRow)
            or (isinstance(row, (ValidationRow, ResumeRow)) and row.examples > examples)}
    keep = [line for i, line in enumerate(lines, 1) if i not in drop and line.strip() and not
            (kill_cut and i == len(lines))]
    with atomic_path(path) as tmp:
        tmp.write_text("".join(x + "\n" for x in keep))


__all__ = ["append_row", "truncate_metrics"]
