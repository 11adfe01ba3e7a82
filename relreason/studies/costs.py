"""What a study's cells cost, predicted from the measured cells shipped with relreason (costs.json).

scripts/bench_reproduce.py measures one cell of each published table's columns (on bellman_ford, or on the
tasks it is given, at the column's protocol) and records it in relreason/studies/costs.json with the machine it
ran on. A planned cell is predicted from the measured cell of its configuration: the same model, the same
resolved recipe and the same variant delta (so an ablation's column that a table also has, e.g. the RT without
edge updates of Table 17, is priced from that table's measurement), with the same batch size, on the cell's own
task where that was measured, else the mean of the tasks measured (said so: another task's hint steps and
graphs cost otherwise, by a factor of several), scaled to the cell's own training examples. Cells no
measurement covers are named, never guessed.

    estimate = estimate_cells(cells)       # before a sweep trains: what its cells cost
    estimate.line("no-edge-updates", "cpu")
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from relreason.config import build_config, paper_recipe
from relreason.errors import RelreasonError
from relreason.files import read_json
from relreason.studies.cells import Cell, delta_slug
from relreason.studies.tables import TABLES
from relreason.tasks import task_entries

# what makes two cells cost the same (besides the task, the seed and the training examples, scaled)
CostKey = tuple[str, str, str, int]  # (model, resolved recipe, delta slug, batch size)


def costs_file() -> Path:
    """The measured cell costs shipped with relreason (relreason/studies/costs.json, package data, written
    by scripts/bench_reproduce.py), so that `reproduce --list` shows them from any directory."""
    return Path(str(importlib.resources.files("relreason.studies") / "costs.json"))


def read_costs(costs: Path | None = None) -> dict:
    """The costs file (default: the shipped one; {} when that is absent); a one-line error for a file that
    cannot be read or parsed, or a `costs` given that does not exist."""
    path = costs_file() if costs is None else Path(costs)
    if path.is_file():
        try:
            return read_json(path, follow=True)  # the guarded reader: a regular file, bounded
        except RelreasonError:
            raise RelreasonError(f"{path} is not a readable costs file",
                                 "measure again: python scripts/bench_reproduce.py") from None
    if path != costs_file():
        raise RelreasonError(f"--costs {path} does not exist", "give the file scripts/bench_reproduce.py wrote, "
                                                               "or leave --costs out for the measured costs shipped")
    return {}


def hours(seconds: float) -> str:
    """A duration as people plan with it: "12 min", "2.5 h", "1,234 h"."""
    if seconds >= 100 * 3600:
        return f"{seconds / 3600:,.0f} h"
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min"


@dataclass(frozen=True)
class Measured:
    """One measured cell: its cost and where it was measured."""

    seconds: float  # the whole cell: training, validations, test
    examples: int  # its training examples
    machine: str  # "hardware, date"
    task: str = ""  # the task it was measured on


@lru_cache(maxsize=4)
def _measured(costs_path: str) -> dict[CostKey, dict[str, Measured]]:
    """{cost key: {task: measured cell}} of every measured column of the costs file at `costs_path` (its recipe
    resolved as build_config names it: the column's, else the model's paper recipe for the task)."""
    found: dict[CostKey, dict[str, Measured]] = {}
    for table, entry in read_costs(Path(costs_path)).items():
        if table not in TABLES or not isinstance(entry, dict):
            continue
        study = TABLES.get(table)
        machine = f"{entry.get('hardware', '?')}, {entry.get('date', '?')}"
        for key, m in (entry.get("cells") or {}).items():
            label, _, task = key.partition(" on ")
            for v in (v for v in study.variants if v.label == label and "batch" in m):
                recipe = v.recipe if v.recipe is not None else paper_recipe(v.model, task)
                found.setdefault((v.model, recipe, delta_slug(v.delta), int(m["batch"])), {}).setdefault(
                    task, Measured(float(m["seconds"]), int(m["examples"]), machine, task))
                if v.nar is not None and m.get("nar_s"):
                    _nar_measured(found, study.name, v.nar, task, float(m["nar_s"]), machine)
    return found


def _nar_measured(found: dict, study: str, nar, task: str, seconds: float, machine: str) -> None:
    """Records the NAR cell that a measured TransNAR cell on text task `task` pre-trains (the column's `nar`,
    on the task's algorithm): its `nar_s`, what scripts/bench_text_cells.py counted into the TransNAR cell's
    seconds for it (scripts/bench_quick.py's prediction of the NAR cell at its recipe's budget), so that a
    sweep's NAR cells, trained as cells of their own before the cells that read them, are priced too."""
    entries = task_entries(task)
    if len(entries) != 1 or entries[0].algorithm is None:
        return
    algorithm = entries[0].algorithm
    cfg = build_config(nar.model, algorithm, nar.recipe, ablation=(study, nar.delta))
    found.setdefault((nar.model, cfg.recipe, delta_slug(nar.delta), cfg.train.batch_size), {}).setdefault(
        algorithm, Measured(seconds, cfg.train.train_examples, f"{machine}, predicted by scripts/bench_quick.py",
                            algorithm))


def measured_cell(cell: Cell, costs: Path | None = None) -> tuple[float, str, bool] | None:
    """(predicted seconds, where measured, from the cell's own task) of one cell, or None where no measurement
    covers its configuration: its own task's measured cell, else the mean over the tasks measured (module
    docstring), scaled to its training examples."""
    by_task = _measured(str(costs_file() if costs is None else Path(costs))).get(cost_key(cell))
    if not by_task:
        return None
    examples = cell.config.train.train_examples
    if cell.task in by_task:
        m = by_task[cell.task]
        return m.seconds * examples / m.examples, m.machine, True
    rates = [m.seconds / m.examples for m in by_task.values()]
    return sum(rates) / len(rates) * examples, "; ".join(sorted({m.machine for m in by_task.values()})), False


def cost_key(cell: Cell) -> CostKey:
    return cell.variant.model, cell.config.recipe, delta_slug(cell.variant.delta), cell.config.train.batch_size


@dataclass(frozen=True)
class Estimate:
    """The predicted cost of some cells: the measured ones' seconds, one after another, and what is not known."""

    cells: int  # how many cells
    seconds: float  # predicted, of the cells a measurement covers
    unmeasured: tuple[str, ...]  # the configurations ("model recipe[+delta], batch B") no measurement covers
    unmeasured_cells: int
    machines: tuple[str, ...]  # where the measurements used were made
    other_task_cells: int = 0  # cells priced from the tasks measured, not their own (module docstring)

    def short(self) -> str:
        """E.g. "12.5 h", "12.5 h + 8 cells not measured (rt quick, batch 4)", "- (not measured: ...)"."""
        if self.unmeasured_cells == self.cells:
            return f"- (not measured: {', '.join(self.unmeasured)})"
        more = f" + {self.unmeasured_cells} cell(s) not measured ({', '.join(self.unmeasured)})"
        return hours(self.seconds) + (more if self.unmeasured_cells else "")

    def text(self) -> str:
        """E.g. "predicted 12.5 h one after another (measured on AMD EPYC ..., 2026-11-25)"."""
        if self.unmeasured_cells == self.cells:
            return f"not predicted: no measured cell of {', '.join(self.unmeasured)} (scripts/bench_reproduce.py)"
        text = (f"predicted {hours(self.seconds)} one after another, from the cells measured on "
                f"{'; '.join(self.machines)} (relreason/studies/costs.json), scaled to each cell's training examples")
        if self.other_task_cells:
            text += (f"; {self.other_task_cells} of them priced from other tasks' cells (their own task not "
                     f"measured: its hint steps and graphs may cost several times more or less)")
        if self.unmeasured_cells:
            text += (f"; {self.unmeasured_cells} cell(s) not measured and not counted: "
                     f"{', '.join(self.unmeasured)}")
        return text

    def line(self, name: str, device: str) -> str:
        """What a sweep prints before it trains: how many cells, where, and what they are predicted to cost."""
        return f"{name}: {self.cells} cell(s) to train on {device}; {self.text()}"


def predict_cell(cell: Cell, costs: Path | None = None) -> float | None:
    """The predicted seconds of one cell (module docstring), or None where no measurement covers it."""
    m = measured_cell(cell, costs)
    return None if m is None else m[0]


def time_left(cells: list[Cell], at_once: int = 1) -> str:
    """What a progress bar across cells says is left: "predicted 3.5 h left" for `cells` (those not done,
    trained `at_once` at a time), "" when some cell is not measured (the bar's own estimate, from the cells
    done so far, remains)."""
    seconds = [predict_cell(c) for c in cells]
    if None in seconds:
        return ""
    return f"predicted {hours(sum(seconds) / at_once)} left" + (f" ({at_once} at once)" if at_once > 1 else "")


def estimate_cells(cells: list[Cell], costs: Path | None = None, left: list[float] | None = None) -> Estimate:
    """The predicted cost of training `cells` one after another, from the measured costs (module docstring);
    `left[k]`: the fraction of cell k's examples still to train (default: all of each)."""
    seconds, unmeasured, missing, machines, elsewhere = 0.0, [], 0, set(), 0
    for k, c in enumerate(cells):
        m = measured_cell(c, costs)
        if m is None:
            model, recipe, delta, batch = cost_key(c)
            unmeasured.append(f"{model} {recipe}{f'+{delta}' if delta else ''}, batch {batch}")
            missing += 1
            continue
        seconds += m[0] * (1.0 if left is None else left[k])
        machines.add(m[1])
        elsewhere += not m[2]
    return Estimate(len(cells), seconds, tuple(dict.fromkeys(unmeasured)), missing, tuple(sorted(machines)),
                    elsewhere)
