"""The `relreason` command: one Typer app, one module per group of commands.

`main()` is the console script (and `python -m relreason`). It runs the app outside Click's
standalone mode so that command-line mistakes (unknown command or option, missing argument, a
value of the wrong type) print the same one-line `Error:` / `Hint:` as every other error, with exit
code 2 (relreason.cli.common lists the exit codes).
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
import sys
from typing import Annotated, Callable

import typer
from rich.table import Table

from relreason import __version__
from relreason.cli import ablate, data, interop, reproduce, runs, score, train
from relreason.cli.common import EXIT_ERROR, EXIT_USAGE, JsonOpt, out, print_error, report_errors
from relreason.data.algorithms import ALGORITHMS, ALGORITHM_INFO, canonical_split
from relreason.data.families import BENCHMARK, FAMILIES, format_value
from relreason.data.specs import CANONICAL_SPLITS, Stage
from relreason.errors import RelreasonError

app = typer.Typer(
    name="relreason",
    help="Train and evaluate neural algorithmic reasoners on faithful CLRS-30 data.",
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
)

app.command("generate")(data.generate_cmd)
app.command("show")(data.show_cmd)
app.command("train")(train.train_cmd)
app.command("eval")(train.eval_cmd)
app.command("export")(train.export_cmd)
app.command("export-data")(interop.export_data_cmd)
app.command("ablate")(ablate.ablate_cmd)
app.command("reproduce")(reproduce.reproduce_cmd)
app.command("results")(reproduce.results_cmd)
app.command("report")(reproduce.report_cmd)
app.command("runs")(runs.runs_cmd)
app.command("compare")(runs.compare_cmd)
app.command("plot")(runs.plot_cmd)
app.command("score")(score.score_cmd)


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True)] = False,
) -> None:
    """Train and evaluate neural algorithmic reasoners on faithful CLRS-30 data."""
    if version:
        out.print(f"relreason {__version__}", highlight=False)
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:  # bare `relreason`: the overview, not an error
        text = ctx.get_help()  # rich help prints itself and returns ""; plain help returns the text
        if text:
            out.print(text, highlight=False, markup=False)
        raise typer.Exit(0)


# -- `relreason list`: every list is rows of plain values (--json), shown as a table otherwise ----

Rows = list[dict]


def _algorithms() -> Rows:
    rows = []
    for name in ALGORITHMS.names():
        info = ALGORITHM_INFO[name]
        splits = {s: {"size": c.size, "num": c.num} for s, c in ((s, canonical_split(name, s)) for s in CANONICAL_SPLITS)}
        rows.append({"name": name, "class": info.klass, **{stage.value + "s": [f.name for f in info.features(stage)]
                                                            for stage in (Stage.INPUT, Stage.OUTPUT, Stage.HINT)},
                     "splits": splits, "origin": str(ALGORITHMS.origin(name))})
    return rows


def _models() -> Rows:
    from relreason.models.catalog import model_rows  # CLI start-up: torch loads on use

    return model_rows()


def _tasks() -> Rows:
    from relreason.tasks import TASKS, task_groups  # CLI start-up: loads on use

    rows = [{"name": name, "kind": "group", "tasks": members} for name, members in task_groups().items()]
    rows += [{"name": name, "kind": TASKS.get(name).kind, "tasks": [name]} for name in TASKS.names()]
    return rows


def _flat(tree: dict) -> dict[str, object]:
    """{"train": {"lr": 1e-4}} -> {"train.lr": 1e-4}."""
    return {f"{section}.{key}": value for section, values in (tree or {}).items() if isinstance(values, dict)
            for key, value in values.items()}


def _recipes() -> Rows:
    from relreason.config import RECIPES, SECTIONS, find_recipe, read_recipe, read_recipe_text, recipe_names  # CLI start-up: loads on use

    rows = []
    for name in recipe_names():
        recipe, _ = read_recipe(name)
        lines = read_recipe_text(find_recipe(name)).splitlines()
        head = [x.lstrip("#").strip() for x in itertools.takewhile(lambda x: x.startswith("#"), lines)]
        prose = " ".join(head[1:])
        summary = re.split(r"(?<!et al)(?<!e\.g)(?<!i\.e)\.\s", prose + " ")[0].rstrip(".") + "." if prose else ""
        scoped = {scope: {key: _flat(diff) for key, diff in (recipe.get(scope) or {}).items()}
                  for scope in ("models", "tasks") if recipe.get(scope)}
        rows.append({"name": name, "command": head[0] if head else "", "summary": summary,
                     "inherit": recipe.get("inherit"),
                     "sets": _flat({k: v for k, v in recipe.items() if k in SECTIONS}),
                     **scoped, "deviation": recipe.get("deviation"), "origin": str(RECIPES.origin(name))})
    return rows


def _ablations() -> Rows:
    from relreason.studies.ablations import ABLATIONS  # CLI start-up: loads on use

    return [{"name": name, "variants": [{"label": v.label, "model": v.model, "sets": _flat(v.delta)}
                                        for v in abl.variants],
             "description": abl.description, "origin": str(ABLATIONS.origin(name))} for name, abl in ABLATIONS.items()]


def _graphs() -> Rows:
    rows = [{"name": BENCHMARK, "parameters": {}, "description": "the benchmark's own sampler (the default): ER "
             "graphs with each algorithm's p, SCC's 4 communities; bit-exact CLRS-30 splits"}]
    rows += [{"name": name, "description": fam.doc,
              "parameters": {p.name: {"default": None if p.default is None else format_value(p.default),
                                      "meaning": p.doc} for p in fam.params}} for name, fam in FAMILIES.items()]
    return rows


def _settings(values: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def _recipe_changes(r: dict) -> str:
    lines = []
    if r["inherit"]:
        lines.append("inherits " + ("the model's paper recipe" if r["inherit"] == "paper" else r["inherit"]))
    lines.append(_settings(r["sets"]) if r["sets"] else "(no changes of its own)")
    for scope in ("models", "tasks"):
        for key, values in r.get(scope, {}).items():
            lines.append(f"{key}: {_settings(values) if values else '(nothing more)'}")
    if r["deviation"]:
        lines.append(f"deviation: {r['deviation']}")
    return "\n".join(lines)


# what: (rows, title, [(column, cell of a row)])
PROSE_WIDTH = 72  # characters per line of a prose column in `list` tables

LISTS: dict[str, tuple[Callable[[], Rows], str, list[tuple[str, Callable[[dict], str]]]]] = {
    "algorithms": (_algorithms, "algorithms", [
        ("name", lambda r: r["name"]), ("class", lambda r: r["class"]),
        ("inputs", lambda r: ", ".join(r["inputs"])), ("outputs", lambda r: ", ".join(r["outputs"])),
        ("hints", lambda r: ", ".join(r["hints"])),
        ("train / val / test (n, samples)", lambda r: " / ".join(f"{s['size']}, {s['num']}"
                                                                 for s in r["splits"].values())),
        ("origin", lambda r: r["origin"])]),
    "models": (_models, "models", [
        ("name", lambda r: r["name"]), ("family", lambda r: r["family"]),
        ("paper recipe", lambda r: r["paper_recipe"]), ("description", lambda r: r["description"]),
        ("origin", lambda r: r["origin"])]),
    "tasks": (_tasks, "tasks and groups (usable wherever a task list is accepted)", [
        ("name", lambda r: r["name"]), ("kind", lambda r: r["kind"]),
        ("tasks", lambda r: ", ".join(r["tasks"]) if r["kind"] == "group" else "")]),
    "recipes": (_recipes, "recipes (each a diff over the defaults; --print-config shows the result)", [
        ("name", lambda r: r["name"]), ("what it is", lambda r: r["summary"]), ("changes", _recipe_changes),
        ("command", lambda r: r["command"]), ("origin", lambda r: r["origin"])]),
    "graphs": (_graphs, "graph families (--graph NAME:KEY=VALUE,...; a range low..high or a choice a|b|c is "
                        "drawn per graph)", [
        ("name", lambda r: r["name"]),
        ("parameters", lambda r: "\n".join(f"{k}={'(unset)' if v['default'] is None else v['default']}: {v['meaning']}"
                                            for k, v in r["parameters"].items())),
        ("description", lambda r: r["description"])]),
    "ablations": (_ablations, "ablations", [
        ("name", lambda r: r["name"]), ("variants", lambda r: " | ".join(v["label"] for v in r["variants"])),
        ("description", lambda r: r["description"]), ("origin", lambda r: r["origin"])]),
}


@app.command("list")
@report_errors
def list_cmd(what: Annotated[str, typer.Argument(help="What to list: " + ", ".join(LISTS) + ".")] = "algorithms",
             as_json: JsonOpt = False) -> None:
    """List what is registered: algorithms, models, tasks (and groups), recipes, graph families, ablations,
    each with its origin: built-in, or the installed plugin (distribution and version) that added it.

    Examples:\n
      relreason list algorithms\n
      relreason list recipes\n
      relreason list models --json
    """
    if what not in LISTS:
        raise RelreasonError(f"cannot list {what!r}", "use one of: " + ", ".join(LISTS))
    rows_of, title, columns = LISTS[what]
    rows = rows_of()
    if as_json:
        out.print_json(json.dumps({what: rows}))
        return
    table = Table(title=title)
    for column, _ in columns:  # names, commands and origins whole; prose wraps at a readable width (also piped)
        whole = column in ("name", "command", "origin")
        table.add_column(column, no_wrap=whole, max_width=None if whole else PROSE_WIDTH)
    for r in rows:
        table.add_row(*(cell(r) for _, cell in columns))
    out.print(table, highlight=False, markup=False)


def one_line_summaries(typer_app: typer.Typer) -> None:
    """`relreason --help` lists each command by its docstring's first paragraph as one line of prose (rich wraps
    it to the terminal), not with the docstring's own line breaks, which cut its sentences mid-way."""
    for info in typer_app.registered_commands:
        doc = info.callback.__doc__ if info.callback is not None else None
        if info.short_help is None and doc:
            info.short_help = " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def main(argv: list[str] | None = None) -> None:
    """The console script: runs the app; usage errors become `Error:` / `Hint:` and exit code 2."""
    try:
        code = app(args=argv, prog_name="relreason", standalone_mode=False)
    except typer.TyperException as e:  # Click's errors about the command line itself (and its file errors)
        usage = getattr(e, "exit_code", EXIT_ERROR) == EXIT_USAGE
        ctx = getattr(e, "ctx", None)
        where = ctx.command_path if ctx is not None else "relreason"
        message = " ".join(e.format_message().split())
        print_error(message[:1].lower() + message[1:], f"see `{where} --help`" if usage else None)
        sys.exit(EXIT_USAGE if usage else EXIT_ERROR)
    except typer.Abort:
        print_error("aborted", None)
        sys.exit(EXIT_ERROR)
    sys.exit(code if isinstance(code, int) else 0)


one_line_summaries(app)  # after every command is registered

if __name__ == "__main__":
    main()
