"""The house's floors: every module of relreason/ stands on a layer and imports only its own layer or
lower ones, and neither modules nor rooms import each other in a circle. A room is a package of
relreason (relreason.runs, relreason.studies, ...) or a module standing directly in relreason/
(relreason.config, relreason.errors, ...): two rooms on one layer may not lean on each other either.

The layers, lowest first, and why each stands where it does:

- core: what every other layer may use and that knows none of them: errors, the Registry and the
  loading of plugins into it, seeds, process-level runtime helpers, what a result is (the protocol's
  keys), the run directory's layout and records (read by models, eval and train alike), the typed checker
  of values read from outside (run records and configuration alike), the package's version;
- data: the CLRS-30 specs, algorithms, samplers and datasets on disk, and the `data:` sections that
  configure them (relreason.data.config); no model, no metric;
- models: encoders, processors, decoders, text models, and building a configured net from what its
  caller hands over (the model layer reads no run configuration and looks up no task);
- eval: metrics and scores over model outputs, and what a metric means (its unit and direction);
- runs: what trainings left on disk read back as records, seeds pooled with their statistics, compared,
  listed and drawn (it reads metrics' meanings from eval and the run directory from core);
- tasks: a task binds a dataset (data) to its metric (eval) and its config defaults;
- config: a run's typed configuration, resolved from the model catalog (models) and the task (tasks);
- train: the loop, workloads, checkpoints, and evaluating saved checkpoints: one training;
- studies: what runs many trainings (relreason.studies: the ablations and the papers' tables as grids
  of cells, the result files and RESULTS.md made from them);
- cli: the thin Typer commands over all of it (and `python -m relreason`).

An import counts wherever it is written: at module level, inside a function (a lazy import dodges
a circle at import time but is still a dependency), under `if TYPE_CHECKING`, or as
`importlib.import_module("relreason...")` with a constant name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "relreason"

LAYERS = ("core", "data", "models", "eval", "runs", "tasks", "config", "train", "studies", "cli")  # lowest first

# module (or package prefix) -> its layer; a module takes the layer of its longest listed prefix
PLACES = {
    "relreason": "core",  # the package itself: __version__
    "relreason.errors": "core",
    "relreason.registry": "core",
    "relreason.plugins": "core",
    "relreason.seeds": "core",
    "relreason.runtime": "core",
    "relreason.protocol": "core",
    "relreason.rundir": "core",
    "relreason.typecheck": "core",
    "relreason.data": "data",
    "relreason.models": "models",
    "relreason.eval": "eval",
    "relreason.runs": "runs",
    "relreason.tasks": "tasks",
    "relreason.config": "config",
    "relreason.train": "train",
    "relreason.studies": "studies",
    "relreason.cli": "cli",
    "relreason.__main__": "cli",
}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) of every module under relreason/."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module of ours that a dotted name lives in (`relreason.tasks.TASKS` -> `relreason.tasks`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """The modules of ours that `module` imports anywhere in its file."""
    path, is_package = MODULES[module]
    return _imports_in(ast.parse(path.read_text(), str(path)), module, is_package)


def _imports_in(tree: ast.AST, module: str, is_package: bool = False) -> set[str]:
    """The modules of ours that the code `tree` of `module` imports (relative imports resolved)."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(_owner(a.name) for a in node.names if a.name.split(".")[0] == "relreason")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1] + ([node.module] if node.module else [])
                target = ".".join(base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "relreason":
                continue
            for alias in node.names:  # `from relreason.models import text` imports the module text
                full = f"{target}.{alias.name}"
                out.add(full if full in MODULES else _owner(target))
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and node.args[0].value.startswith("relreason")):
            out.add(_owner(node.args[0].value))
    out.discard(None)
    out.discard(module)
    return out


GRAPH = {m: _imports(m) for m in MODULES}


def layer(module: str) -> str:
    prefix = module
    while prefix not in PLACES:
        prefix = prefix.rpartition(".")[0]
        assert prefix, f"{module} stands on no layer: add it (or its package) to PLACES"
    return PLACES[prefix]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_has_a_layer(module):
    assert layer(module) in LAYERS


def test_no_module_imports_a_higher_layer():
    upward = [f"{m} ({layer(m)}) imports {t} ({layer(t)})" for m in sorted(GRAPH) for t in sorted(GRAPH[m])
              if LAYERS.index(layer(t)) > LAYERS.index(layer(m))]
    assert not upward, "imports that run up the layers:\n" + "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    circles = _cycles(GRAPH)
    ties = ["  " + " <-> ".join(c) + ": " + "; ".join(f"{a} -> {b}" for a in c for b in sorted(GRAPH[a]) if b in c)
            for c in circles]
    assert not circles, "modules that import each other in a circle:\n" + "\n".join(ties)


def room(module: str) -> str:
    """The room a module stands in: its package under relreason (`relreason.runs.stats` -> `relreason.runs`),
    or the module itself where it stands directly in relreason/ (`relreason.config`, `relreason`)."""
    return ".".join(module.split(".")[:2])


def rooms_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph seen from the rooms: room A -> room B when a module of A imports one of B."""
    out: dict[str, set[str]] = {}
    for m, targets in graph.items():
        out.setdefault(room(m), set()).update(room(t) for t in targets if room(t) != room(m))
    return out


ROOMS = rooms_graph(GRAPH)


def test_no_room_imports_a_higher_layer():
    upward = [f"{a} ({layer(a)}) imports {b} ({layer(b)})" for a in sorted(ROOMS) for b in sorted(ROOMS[a])
              if LAYERS.index(layer(b)) > LAYERS.index(layer(a))]
    assert not upward, "rooms that import a room above them:\n" + "\n".join(upward)


def test_no_circle_between_rooms():
    """Files may each stand clear of any circle while their packages lean on each other (a module of A
    imports B, a module of B imports A): that is still a circle of the house."""
    circles = _cycles(ROOMS)
    ties = ["  " + " <-> ".join(c) + ": " + "; ".join(f"{m} -> {t}" for m in sorted(GRAPH) if room(m) in c
                                                      for t in sorted(GRAPH[m]) if room(t) in c and room(t) != room(m))
            for c in circles]
    assert not circles, "rooms that import each other in a circle:\n" + "\n".join(ties)


def test_the_rooms_are_packages_and_top_level_modules():
    assert room("relreason.runs.stats") == "relreason.runs" and room("relreason.config") == "relreason.config"
    assert room("relreason") == "relreason" and room("relreason.models.processors.gnn") == "relreason.models"
    assert {"relreason.runs", "relreason.studies", "relreason.eval", "relreason.recipes"} <= set(ROOMS)
    # no file circle, but a circle of rooms: a.x -> b.y and b.z -> a.w
    files = {"relreason.a.x": {"relreason.b.y"}, "relreason.b.z": {"relreason.a.w"}, "relreason.a.w": set(),
             "relreason.b.y": set()}
    assert _cycles(files) == [] and _cycles(rooms_graph(files)) == [["relreason.a", "relreason.b"]]


def test_the_reader_sees_lazy_and_relative_imports():
    """The graph is only as good as its reader: a function-level import and a package's own relative
    import are edges too."""
    assert "relreason.errors" in GRAPH["relreason.registry"]
    code = ast.parse("from . import specs\nfrom ..errors import RelreasonError\n"
                     "def f():\n    from relreason.models import text\n    import relreason.tasks\n"
                     "    importlib.import_module('relreason.eval.metrics')\n")
    assert _imports_in(code, "relreason.data.store") == {"relreason.data.specs", "relreason.errors",
                                                         "relreason.models.text", "relreason.tasks",
                                                         "relreason.eval.metrics"}
    assert _imports_in(ast.parse("from . import store"), "relreason.data", is_package=True) == {"relreason.data.store"}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    lazy = [m for m in MODULES for node in ast.walk(ast.parse(MODULES[m][0].read_text()))
            if isinstance(node, ast.FunctionDef) for inner in ast.walk(node)
            if isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith("relreason")]
    assert lazy, "no function-level import found: the reader would miss them"
    assert all(GRAPH[m] for m in lazy)


REASONED = ("relreason", "torch", "numpy")  # a function-level import of these must say why it is not at the top


def _unreasoned_lazy_imports(source: str) -> list[int]:
    """Lines of the function-level imports of our own code, torch or numpy that carry no trailing `# reason`
    (kept lazy only to keep an optional extra optional, the CLI quick to start, or a circle out of loading)."""
    lines = source.splitlines()
    out = []
    for func in ast.walk(ast.parse(source)):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Import):
                tops = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                tops = {"relreason" if node.level else (node.module or "").split(".")[0]}
            else:
                continue
            if tops & set(REASONED) and "# " not in lines[node.end_lineno - 1]:
                out.append(node.lineno)
    return sorted(set(out))


def test_every_function_level_import_says_why():
    """Issue 41: imports of relreason, torch and numpy stand at the top of their module, where the dependency
    graph shows; one written inside a function says why on its line (`# optional: ...`, `# CLI start-up: ...`,
    `# import circle: ...`)."""
    bare = [f"{MODULES[m][0].relative_to(PACKAGE.parent)}:{line}" for m in sorted(MODULES)
            for line in _unreasoned_lazy_imports(MODULES[m][0].read_text())]
    assert not bare, "function-level imports without a `# reason` comment (move them to the top or say why):\n" + \
        "\n".join(bare)
    assert _unreasoned_lazy_imports("def f():\n    import torch\n    from . import x  # import circle: x\n") == [2]
