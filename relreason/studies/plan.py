"""The results plan: the `relreason reproduce` commands that fill RESULTS.md, in lanes, and how far each got.

`results/plan.txt` holds one command per line, `LANES: TABLE [--models M,...] [--tasks T,...] [--seeds K]`
(`#` starts a comment; LANES a comma list, `1` or `1,2`). `scripts/reproduce_results.sh` runs each lane's
lines one after another, the lanes side by side, every command with `--set train.threads=1 --committed
results` (a line of two lanes is trained by both: each skips the cells whose run lock the other holds).
`relreason results` reads the same file and writes, per line, how many of its cells are finished (committed
under results/cells under the cell's config: relreason.studies.cells.committed_result), in progress
(results/progress, under the cell's config) and not started, with the command that resumes it and what the
cells left are predicted to cost on one quiet core (relreason.studies.costs). One file
says what is planned and both the script and the report read it, so neither can drift from the other.

    lines = read_plan(Path("results/plan.txt"))
    rows = plan_status(lines, Path("results"))    # one dict per line (PLAN_COLUMNS)
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from relreason.errors import RelreasonError
from relreason.files import MAX_JSON_BYTES, maybe_json_object, read_text
from relreason.studies.cells import Cell, check_models, committed_result, plan_cells, result_identity
from relreason.studies.costs import estimate_cells, hours
from relreason.studies.sweep import parse_models
from relreason.studies.tables import TABLES
from relreason.tasks import expand_tasks

PLAN_FILE = "plan.txt"
LANE_OPTIONS = ("--set", "train.threads=1", "--committed", "results")  # what the lanes add to every line
_OPTIONS = {"--models": "models", "--tasks": "tasks", "--seeds": "seeds"}
PLAN_COLUMNS = ["lane", "command (resumes where it stopped)", "cells", "finished", "in progress", "not started",
                "left (predicted, one quiet core)"]


@dataclass(frozen=True)
class PlanLine:
    lanes: tuple[str, ...]
    table: str
    models: str | None
    tasks: str | None
    seeds: int
    args: str  # the line's `reproduce` arguments as written

    @property
    def command(self) -> str:
        return " ".join(["relreason reproduce", self.args, *LANE_OPTIONS])


def parse_plan_line(text: str, where: str) -> PlanLine:
    """`LANES: TABLE [--models M,...] [--tasks T,...] [--seeds K]` -> PlanLine; a one-line error naming `where`."""
    lanes_text, sep, rest = text.partition(":")
    want = ("LANES: TABLE [--models M,...] [--tasks T,...] [--seeds K], e.g. 1: clrs30 --tasks bellman_ford "
            "--seeds 3 (LANES: 1, or 1,2 for a line both lanes train)")
    lanes = tuple(x.strip() for x in lanes_text.split(","))
    try:
        words = shlex.split(rest)
    except ValueError:
        words = []
    if not sep or not all(x.isalnum() for x in lanes) or not words:
        raise RelreasonError(f"{where}: {text.strip()!r} is not a plan line", want)
    table, values = words[0], {}
    rest_words = words[1:]
    if len(rest_words) % 2:
        raise RelreasonError(f"{where}: {rest_words[-1]!r} has no value", want)
    for option, value in zip(rest_words[::2], rest_words[1::2]):
        if option not in _OPTIONS or _OPTIONS[option] in values:
            raise RelreasonError(f"{where}: {option!r} is not an option of a plan line (or is given twice)", want)
        values[_OPTIONS[option]] = value
    seeds = values.get("seeds")
    if seeds is None or not seeds.isdigit() or int(seeds) < 1:
        raise RelreasonError(f"{where}: --seeds must be given as a whole number >= 1 (got {seeds!r})", want)
    line = PlanLine(lanes, table, values.get("models"), values.get("tasks"), int(seeds), " ".join(words))
    try:  # the table, its tasks and its columns, named as `reproduce` would take them
        study = TABLES.get(table)
        expand_tasks(line.tasks if line.tasks is not None else study.tasks)
        check_models(study, parse_models(line.models) or [])
    except RelreasonError as e:
        raise RelreasonError(f"{where}: {e.message}", e.hint) from None
    return line


def read_plan(path: Path) -> list[PlanLine]:
    """The plan lines of `path`, in order (comments and blank lines skipped)."""
    text = read_text(path, MAX_JSON_BYTES, follow=True, hint="see relreason.studies.plan")
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            lines.append(parse_plan_line(line, f"{path}:{number}"))
    return lines


def _progress(results: Path, rel: Path, cell) -> dict | None:
    """The cell's progress record under `results`/progress, when it was made under the cell's config."""
    path = Path(results) / "progress" / rel.parent / f"{rel.name}.json"
    if not path.is_file():
        return None
    record = maybe_json_object(path)
    if record is None:
        return None
    same = result_identity(record.get("config") or {}) == result_identity(cell.config.to_dict())
    return record if same else None


def plan_status(lines: list[PlanLine], results: Path) -> list[dict]:
    """One row per plan line (PLAN_COLUMNS): its cells, how many are finished and committed under `results`,
    which are in progress (with how far they got) and how many have not started."""
    out = Path("reproduce")  # the lanes' directory: cells are placed by it, then looked up under `results`
    rows = []
    for line in lines:
        study = TABLES.get(line.table)
        cells = plan_cells(study, expand_tasks(line.tasks if line.tasks is not None else study.tasks),
                           tuple(range(line.seeds)),
                           out=out, models=parse_models(line.models))
        finished, running, waiting, left = 0, [], 0, []
        for c in cells:
            if committed_result(c, out, results) is not None:
                finished += 1
                continue
            p = _progress(results, c.directory.relative_to(out / "cells"), c)
            if p is None:
                waiting += 1
                left.append((c, 1.0))
            else:
                running.append(f"{c.variant.label} / {c.task} / seed {c.seed}: "
                               f"{p['examples']:,} of {p['train_examples']:,} examples")
                left.append((c, max(0.0, 1 - p["examples"] / p["train_examples"])))
        rows.append(dict(zip(PLAN_COLUMNS, [", ".join(line.lanes), f"`{line.command}`", str(len(cells)), str(finished),
                                            "; ".join(running) or "-", str(waiting), time_left_of(left)])))
    return rows


def time_left_of(left: list[tuple[Cell, float]]) -> str:
    """What the cells left cost on one quiet core (relreason.studies.costs): each cell's predicted time times the
    fraction of its examples still to train; the cells no measurement covers, or priced from other tasks, said."""
    if not left:
        return "-"
    e = estimate_cells([c for c, _ in left], left=[f for _, f in left])
    notes = ([f"{e.unmeasured_cells} cell(s) not measured"] if e.unmeasured_cells else []) + \
        ([f"{e.other_task_cells} priced from other tasks"] if e.other_task_cells else [])
    return (hours(e.seconds) if e.unmeasured_cells < e.cells else "-") + (f" ({'; '.join(notes)})" if notes else "")


def main(argv: list[str]) -> int:
    """`python -m relreason.studies.plan PLAN` prints the plan's lanes, one per line; `... PLAN LANE` prints that
    lane's `reproduce` arguments, one line each, in order (what scripts/reproduce_results.sh runs: one parser)."""
    if len(argv) not in (1, 2):
        print("usage: python -m relreason.studies.plan PLAN [LANE]", file=sys.stderr)
        return 2
    try:
        lines = read_plan(Path(argv[0]))
    except RelreasonError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    if len(argv) == 1:
        print("\n".join(dict.fromkeys(lane for line in lines for lane in line.lanes)))
    else:
        print("\n".join(line.args for line in lines if argv[1] in line.lanes))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
