"""Plugins through entry points (relreason.plugins): loaded lazily, once, after the built-ins; each
name's origin kept; a plugin that fails or clashes skipped with one line, the built-ins untouched; and
the example plugin (examples/relreason-example-plugin) installed for real, listed, trained, evaluated
and ablated through the CLI, its checkpoints refusing to load without it.

Installing: the in-process tests write installed distributions (a `*.dist-info` with its
entry_points.txt, as pip leaves them) into a temporary directory on sys.path; the CLI tests build the
example and two broken plugins with pip (`--no-index --no-build-isolation --no-deps`: no network) into
temporary `--target` directories that the commands see through PYTHONPATH, so nothing is installed
into .venv and nothing needs uninstalling.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import types
import uuid
from pathlib import Path

import pytest

from relreason.errors import RelreasonError
from relreason.plugins import BUILT_IN, GROUPS, Origin, require_plugins
from relreason.rundir import read_results, read_run_record
from relreason.registry import Registry

sys.path.insert(0, str(Path(__file__).parent / "cli"))  # the CLI tests' runner (tests/cli/cli_run.py)

from cli_run import fails, relreason, succeeds, tiny_sets  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "relreason-example-plugin"
GUIDE = ROOT / "docs" / "plugins.md"
EXAMPLE_ORIGIN = "relreason-example-plugin 0.1.0"


# -- in process: a registry's plugins ----------------------------------------------------------------

@pytest.fixture
def site(tmp_path, monkeypatch):
    """install(dist, version, {group: {name: value}}, {module: source}): an installed distribution in a
    directory on sys.path. Its modules reach the test's registries as `import plugin_test_registries`."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    shared = types.ModuleType("plugin_test_registries")
    monkeypatch.setitem(sys.modules, "plugin_test_registries", shared)
    modules: list[str] = []

    def install(dist: str, version: str, entry_points: dict[str, dict[str, str]], sources: dict[str, str]) -> None:
        info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text("".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in eps.items()) + "\n"
            for group, eps in entry_points.items()))
        for module, source in sources.items():
            (root / f"{module}.py").write_text(textwrap.dedent(source))
            modules.append(module)

    install.shared = shared
    yield install
    for module in modules:
        sys.modules.pop(module, None)


def fresh(site) -> tuple[str, Registry]:
    """A new entry-point group (unique to the test) and a registry of things, its built-in registered,
    that accepts that group's plugins."""
    group = f"relreason.test_{uuid.uuid4().hex}"
    registry: Registry = Registry("thing", "relreason list things")
    registry.register("builtin_thing", 0)
    registry.accept_plugins(group)
    site.shared.THINGS = registry
    return group, registry


def unique(name: str) -> str:
    return f"{name}_{uuid.uuid4().hex[:8]}"


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Warning: plugin")]


def install_for_commands(site: Path, monkeypatch) -> None:
    """The relreason commands run from now on see the distributions installed in `site`."""
    monkeypatch.setenv("PYTHONPATH", str(site), prepend=os.pathsep)


def uninstall_for_commands(site: Path, monkeypatch) -> None:
    """... and from now on they no longer do."""
    kept = [p for p in os.environ["PYTHONPATH"].split(os.pathsep) if p != str(site)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(kept))


def test_every_plugin_group_feeds_a_registry():
    from relreason.studies.ablations import ABLATIONS
    from relreason.config import RECIPES
    from relreason.data.algorithms import ALGORITHMS
    from relreason.models.processors import PROCESSORS
    from relreason.models.text import TEXT_MODELS

    assert {r.plugin_group for r in (ALGORITHMS, PROCESSORS, TEXT_MODELS, RECIPES, ABLATIONS)} == set(GROUPS)
    assert TEXT_MODELS.plugin_group == PROCESSORS.plugin_group  # a processor plugin may add a text model


def test_plugins_load_once_when_first_read_after_the_built_ins(site, capsys):
    group, things = fresh(site)
    module = unique("counting_plugin")
    site("counting-plugin", "2.1", {group: {"counting": module}}, {module: """
        import plugin_test_registries as shared
        shared.imports = getattr(shared, "imports", 0) + 1
        shared.THINGS.register("plugin_thing", 1)
        """})
    assert not hasattr(site.shared, "imports")  # nothing loaded before the registry is read
    assert things.names() == ["builtin_thing", "plugin_thing"]  # built-ins first
    assert "plugin_thing" in things and things.get("plugin_thing") == 1 and len(things) == 2
    assert site.shared.imports == 1  # once, however often the registry is read
    assert str(things.origin("plugin_thing")) == "counting-plugin 2.1"
    assert things.origin("plugin_thing").entry_point == f"{group}: counting = {module}"
    assert things.origin("builtin_thing") is BUILT_IN
    assert capsys.readouterr().err == ""


def test_no_plugin_loads_before_the_built_ins_are_all_in(site):
    group = f"relreason.test_{uuid.uuid4().hex}"
    things: Registry = Registry("thing")
    site.shared.THINGS = things
    module = unique("eager_plugin")
    site("eager-plugin", "1.0", {group: {"eager": module}}, {module: "import plugin_test_registries as s\n"
                                                                  "s.THINGS.register('plugin_thing', 1)\n"})
    things.register("first_builtin", 0)
    assert things.names() == ["first_builtin"]  # read while the built-ins register: no plugin yet
    things.register("last_builtin", 0)
    things.accept_plugins(group)
    assert things.names() == ["first_builtin", "last_builtin", "plugin_thing"]


def test_what_relreason_registers_while_a_plugin_loads_stays_built_in(site, tmp_path):
    """A module of relreason that a plugin imports first registers relreason's own things: built in,
    and kept when the plugin fails."""
    group, things = fresh(site)
    inner = tmp_path / "inner.py"
    inner.write_text("import plugin_test_registries as s\ns.THINGS.register('relreason_thing', 1)\n")
    module = unique("importing_plugin")
    site("importing-plugin", "1.0", {group: {"p": module}}, {module: f"""
        import importlib.util
        import plugin_test_registries as shared
        spec = importlib.util.spec_from_file_location("relreason._plugin_test_{module}", {str(inner)!r})
        spec.loader.exec_module(importlib.util.module_from_spec(spec))   # as `import relreason.<module>` does
        shared.THINGS.register("plugin_thing", 2)
        raise ImportError("and then the plugin fails")
        """})
    assert things.names() == ["builtin_thing", "relreason_thing"]
    assert things.origin("relreason_thing") is BUILT_IN


@pytest.mark.parametrize("read", [lambda r: r.names(), lambda r: "x" in r, lambda r: list(r), lambda r: len(r),
                                  lambda r: r.items(), lambda r: r.get("builtin_thing")])
def test_every_way_of_reading_a_registry_loads_its_plugins(site, read):
    group, things = fresh(site)
    module = unique("lazy_plugin")
    site("lazy-plugin", "1.0", {group: {"lazy": module}}, {module: "import plugin_test_registries as s\n"
                                                                 "s.THINGS.register('plugin_thing', 1)\n"})
    read(things)
    assert "plugin_thing" in things._items


def test_a_function_entry_point_is_called(site):
    group, things = fresh(site)
    module = unique("function_plugin")
    site("function-plugin", "0.3", {group: {"fn": f"{module}:setup"}}, {module: """
        import plugin_test_registries as shared
        def setup():
            shared.THINGS.register("plugin_thing", 7)
        """})
    assert things.get("plugin_thing") == 7 and str(things.origin("plugin_thing")) == "function-plugin 0.3"


def test_a_plugin_that_fails_to_import_is_one_line_and_the_rest_loads(site, capsys):
    group, things = fresh(site)
    broken, good = unique("broken_plugin"), unique("good_plugin")
    site("broken-plugin", "1.0", {group: {"broken": broken}}, {broken: """
        import plugin_test_registries as shared
        shared.THINGS.register("half_thing", 1)      # registered before the failure: taken back
        import relreason_missing_dependency
        """})
    site("good-plugin", "1.0", {group: {"good": good}}, {good: "import plugin_test_registries as s\n"
                                                               "s.THINGS.register('good_thing', 2)\n"})
    assert things.names() == ["builtin_thing", "good_thing"]
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"Warning: plugin broken-plugin 1.0 (entry point {group}: broken = {broken}) failed to load: "
                     "ModuleNotFoundError: No module named 'relreason_missing_dependency'; relreason runs without it"]


def test_a_plugin_whose_name_clashes_is_skipped_whole(site, capsys):
    group, things = fresh(site)
    module = unique("clashing_plugin")
    site("clashing-plugin", "1.0", {group: {"clash": module}}, {module: """
        import plugin_test_registries as shared
        shared.THINGS.register("own_thing", 1)
        shared.THINGS.register("builtin_thing", 2)
        """})
    assert things.names() == ["builtin_thing"] and things.get("builtin_thing") == 0
    (line,) = warnings(capsys.readouterr().err)
    assert line.startswith(f"Warning: plugin clashing-plugin 1.0 (entry point {group}: clash = {module}) failed")
    assert "NameClash: thing 'builtin_thing' is registered twice: first by relreason (built-in)" in line


def test_the_first_of_two_clashing_plugins_keeps_the_name(site, capsys):
    group, things = fresh(site)
    a, b = unique("a_plugin"), unique("b_plugin")
    for dist, module in (("b-plugin", b), ("a-plugin", a)):
        site(dist, "1.0", {group: {"p": module}}, {module: "import plugin_test_registries as s\n"
                                                         "s.THINGS.register('shared_name', __name__)\n"})
    assert things.get("shared_name") == a and str(things.origin("shared_name")) == "a-plugin 1.0"
    (line,) = warnings(capsys.readouterr().err)
    assert "b-plugin 1.0" in line
    assert "thing 'shared_name' is registered twice: first by the plugin a-plugin 1.0" in line


def test_a_built_in_registered_after_a_plugin_took_its_name_wins(site, capsys):
    """A registry read before every built-in of its kind was imported: the built-in still gets its name."""
    group, things = fresh(site)
    module = unique("early_plugin")
    site("early-plugin", "1.0", {group: {"early": module}}, {module: """
        import plugin_test_registries as shared
        shared.THINGS.register("late_builtin", "plugin's")
        shared.THINGS.register("other", "plugin's too")
        """})
    assert things.names() == ["builtin_thing", "late_builtin", "other"]
    things.register("late_builtin", "built-in's")
    assert things.names() == ["builtin_thing", "late_builtin"] and things.get("late_builtin") == "built-in's"
    assert things.origin("late_builtin") is BUILT_IN
    (line,) = warnings(capsys.readouterr().err)
    assert "early-plugin 1.0" in line and "is withdrawn: thing 'late_builtin' is built into relreason" in line


def test_a_failing_plugin_shows_its_traceback_with_relreason_debug(site, capsys, monkeypatch):
    monkeypatch.setenv("RELREASON_DEBUG", "1")
    group, things = fresh(site)
    module = unique("raising_plugin")
    site("raising-plugin", "1.0", {group: {"r": module}}, {module: "raise RuntimeError('boom')\n"})
    things.names()
    err = capsys.readouterr().err
    assert len(warnings(err)) == 1 and "Traceback" in err and "RuntimeError: boom" in err


def test_require_plugins_names_the_missing_plugin():
    record = [{"kind": "model", "name": "max_gnn", "distribution": "relreason-example-plugin", "version": "0.1.0"}]
    here = {"max_gnn": Origin("relreason-example-plugin", "0.2.0", "relreason.processors: example = x")}
    require_plugins(record, "runs/a/best", lambda kind, name: here.get(name))  # another version: it loads
    with pytest.raises(RelreasonError) as e:
        require_plugins(record, "runs/a/best", lambda kind, name: None)
    assert e.value.message == ("runs/a/best needs the plugin relreason-example-plugin 0.1.0 (its model 'max_gnn'), "
                               "which is not installed")
    assert e.value.hint == "install it (pip install 'relreason-example-plugin==0.1.0') and run again"
    with pytest.raises(RelreasonError, match="needs the model 'max_gnn' of the plugin relreason-example-plugin "
                                             "0.1.0, but 'max_gnn' here is built in"):
        require_plugins(record, "runs/a/best", lambda kind, name: BUILT_IN)


def test_a_plugin_at_another_version_is_named():
    from relreason.plugins import plugin_version_changes

    record = [{"kind": "model", "name": "max_gnn", "distribution": "relreason-example-plugin", "version": "0.1.0"},
              {"kind": "algorithm", "name": "running_max", "distribution": "relreason-example-plugin",
               "version": "0.1.0"}]
    newer = Origin("relreason-example-plugin", "0.2.0", "relreason.processors: example = x")
    assert plugin_version_changes(record, lambda kind, name: newer) == [
        "relreason-example-plugin 0.1.0 (installed: 0.2.0)"]  # one plugin, named once
    same = Origin("relreason-example-plugin", "0.1.0", "relreason.processors: example = x")
    assert plugin_version_changes(record, lambda kind, name: same) == []
    assert plugin_version_changes(None, lambda kind, name: newer) == []  # a record written before the key


def test_a_built_in_run_records_no_plugin():
    from relreason.config import build_config
    from relreason.train.checkpoint import plugin_record

    assert plugin_record(build_config("mpnn", "bfs")) == []
    assert plugin_record(build_config("text_transformer", "text:insertion_sort")) == []


# -- through the CLI: the example plugin and two broken ones, installed with pip ------------------------

def pip_install(target: Path, *projects: Path) -> Path:
    """Builds and installs `projects` into `target` (offline, no build isolation: the setuptools beside
    relreason builds them); returns `target`."""
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                          "--quiet", "--disable-pip-version-check", "--target", str(target), *map(str, projects)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return target


@pytest.fixture(scope="session")
def example_plugin(tmp_path_factory) -> Path:
    """A directory holding the installed example plugin (built from a copy: the checkout stays clean)."""
    root = tmp_path_factory.mktemp("example-plugin")
    source = shutil.copytree(EXAMPLE, root / "source", ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                                      "__pycache__"))
    return pip_install(root / "site", source)


BROKEN = {  # distribution -> (module, source): one cannot import, one registers a taken name
    "relreason-broken-plugin": ("relreason_broken", "import relreason_missing_dependency  # never installed\n"),
    "relreason-clashing-plugin": ("relreason_clashing", textwrap.dedent("""\
        from relreason.models.processors import register_processor
        from relreason.models.processors.mpnn import MPNN, MPNNConfig

        register_processor("clash_gnn", MPNNConfig, "registered before the clash, taken back with it")(MPNN)
        register_processor("mpnn", MPNNConfig, "a second mpnn")(MPNN)
        """)),
}


@pytest.fixture(scope="session")
def broken_plugins(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("broken-plugins")
    projects = []
    for dist, (module, source) in BROKEN.items():
        project = root / dist
        project.mkdir()
        (project / f"{module}.py").write_text(source)
        (project / "pyproject.toml").write_text(textwrap.dedent(f"""\
            [build-system]
            requires = ["setuptools>=68"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "{dist}"
            version = "1.0"
            [project.entry-points."relreason.processors"]
            plugin = "{module}"
            [tool.setuptools]
            py-modules = ["{module}"]
            """))
        projects.append(project)
    return pip_install(root / "site", *projects)


def _new_algorithm_api() -> bool:
    from relreason.data.algorithms import register

    return "family" in inspect.signature(register).parameters


# The example's running_max is written against the one-@register algorithm API (issue 23); until that
# is merged, its entry point fails to load, with one line, and everything else of the plugin works.
NEW_ALGORITHM_API = _new_algorithm_api()
EXPECTED_WARNINGS = [] if NEW_ALGORITHM_API else ["entry point relreason.algorithms: example"]


def only_expected_warnings(stderr: str) -> None:
    """No plugin warning but the expected ones (a command that reads no algorithm loads none)."""
    lines = warnings(stderr)
    assert len(lines) <= len(EXPECTED_WARNINGS) and all(any(w in line for w in EXPECTED_WARNINGS)
                                                        for line in lines), stderr


@pytest.mark.parametrize("what, name", [("models", "max_gnn"), ("recipes", "max_gnn"),
                                        ("ablations", "max-gnn-vs-mpnn"),
                                        pytest.param("algorithms", "running_max", marks=pytest.mark.skipif(
                                            not NEW_ALGORITHM_API, reason="waits for the one-@register algorithm "
                                                                          "API (issue 23)"))])
def test_list_shows_where_each_thing_comes_from(example_plugin, monkeypatch, what, name):
    install_for_commands(example_plugin, monkeypatch)
    res = relreason("list", what, "--json")
    origins = {r["name"]: r["origin"] for r in json.loads(succeeds(res))[what]}
    assert origins[name] == EXAMPLE_ORIGIN
    assert {o for n, o in origins.items() if n != name} == {"built-in"}
    only_expected_warnings(res.stderr)
    table = succeeds(relreason("list", what))
    row = next(line for line in table.splitlines() if line.startswith(f"│ {name} "))
    assert row.rstrip(" │").endswith(EXAMPLE_ORIGIN)  # the origin column, last


def test_train_eval_and_ablate_through_the_plugin(example_plugin, tmp_path, monkeypatch):
    install_for_commands(example_plugin, monkeypatch)
    sets = tiny_sets(tmp_path / "data")
    res = relreason("train", "max_gnn", "bellman_ford", *sets, "--out", tmp_path / "runs", "--name", "mg", "--json")
    result = json.loads(succeeds(res))
    only_expected_warnings(res.stderr)
    run = Path(result["run"])
    meta = json.loads((run / "best" / "config.json").read_text())
    assert meta["config"]["recipe"] == "max_gnn"  # the plugin's recipe is its model's paper recipe
    record = [{"kind": "model", "name": "max_gnn", "distribution": "relreason-example-plugin", "version": "0.1.0"}]
    assert meta["plugins"] == record
    # the run itself says so too, not only its checkpoints: config.json from the start, results.json at the end
    assert read_run_record(run).plugins == record and read_results(run).plugins == record
    scores = json.loads(succeeds(relreason("eval", run, "--json")))
    assert scores["model"] == "max_gnn" and scores["score"] == pytest.approx(result["test"]["score"])
    bundle = Path(succeeds(relreason("export", run, "--out", tmp_path / "bundle")).strip().splitlines()[-1])
    assert "- `relreason-example-plugin==0.1.0` (its model `max_gnn`)" in (bundle / "MODEL_CARD.md").read_text()
    res = relreason("ablate", "max-gnn-vs-mpnn", "--seeds", "1", *sets, "--out", tmp_path / "abl", "--json")
    cells = json.loads(succeeds(res))["cells"]
    assert {(c["model"], c["task"]) for c in cells} == {("max_gnn", "bellman_ford"), ("mpnn", "bellman_ford")}
    assert all(0.0 <= c["score"] <= 1.0 for c in cells)

    # a run and a cell made under another version of the plugin: eval warns in one line, the cell is stale
    best_config = (run / "best" / "config.json").read_text()
    for file in (run / "best" / "config.json", *(tmp_path / "abl").glob("**/max_gnn*/**/results.json")):
        file.write_text(file.read_text().replace('"version": "0.1.0"', '"version": "0.0.9"'))
    res = relreason("eval", run, "--json")
    succeeds(res)
    assert [line for line in res.stderr.splitlines() if "0.0.9" in line] == [
        f"relreason: warning: {run / 'best'} was made with the plugin relreason-example-plugin 0.0.9 (installed: "
        "0.1.0); its results may not be what the installed version computes"]
    fails(relreason("ablate", "max-gnn-vs-mpnn", "--seeds", "1", *sets, "--out", tmp_path / "abl"), 1,
          "1 cell(s) were computed under another configuration or another version of a plugin")
    (run / "best" / "config.json").write_text(best_config)

    uninstall_for_commands(example_plugin, monkeypatch)  # the plugin is gone: its checkpoints say so in one line
    fails(relreason("eval", run), 1, "needs the plugin relreason-example-plugin 0.1.0 (its model 'max_gnn'), "
                                     "which is not installed")
    fails(relreason("train", "max_gnn", "bellman_ford", "--out", run.parent, "--name", run.name, "--resume"), 1,
          f"{run / 'last'} needs the plugin relreason-example-plugin 0.1.0")


@pytest.mark.skipif(not NEW_ALGORITHM_API, reason="waits for the one-@register algorithm API (issue 23)")
def test_a_plugin_algorithm_trains_and_evaluates(example_plugin, tmp_path, monkeypatch):
    install_for_commands(example_plugin, monkeypatch)
    res = relreason("train", "mpnn", "running_max", *tiny_sets(tmp_path / "data"), "--out", tmp_path / "runs",
                    "--name", "rm", "--json")
    run = Path(json.loads(succeeds(res))["run"])
    only_expected_warnings(res.stderr)
    meta = json.loads((run / "best" / "config.json").read_text())
    record = [{"kind": "algorithm", "name": "running_max", "distribution": "relreason-example-plugin",
               "version": "0.1.0"}]
    assert meta["plugins"] == record
    assert read_run_record(run).plugins == record and read_results(run).plugins == record
    assert 0.0 <= json.loads(succeeds(relreason("eval", run, "--json")))["score"] <= 1.0
    tasks = {r["name"]: r for r in json.loads(succeeds(relreason("list", "tasks", "--json")))["tasks"]}
    assert tasks["sequences"]["tasks"] == ["running_max"] and "text:running_max" in tasks  # its family, its text
    uninstall_for_commands(example_plugin, monkeypatch)
    fails(relreason("eval", run), 1, "needs the plugin relreason-example-plugin 0.1.0 (its algorithm 'running_max')")


def test_broken_plugins_are_one_line_each_and_the_built_ins_work(broken_plugins, tmp_path, monkeypatch):
    install_for_commands(broken_plugins, monkeypatch)
    res = relreason("list", "models", "--json")
    models = {r["name"]: r["origin"] for r in json.loads(succeeds(res))["models"]}
    assert models["mpnn"] == "built-in" and "clash_gnn" not in models  # the clashing plugin is taken back whole
    assert set(models.values()) == {"built-in"}
    assert warnings(res.stderr) == [
        "Warning: plugin relreason-broken-plugin 1.0 (entry point relreason.processors: plugin = relreason_broken) "
        "failed to load: ModuleNotFoundError: No module named 'relreason_missing_dependency'; relreason runs "
        "without it",
        "Warning: plugin relreason-clashing-plugin 1.0 (entry point relreason.processors: plugin = "
        "relreason_clashing) failed to load: NameClash: model 'mpnn' is registered twice: first by relreason "
        "(built-in); relreason runs without it"]
    assert len(res.stderr.splitlines()) == 2  # nothing else: no traceback
    res = relreason("train", "mpnn", "bellman_ford", *tiny_sets(tmp_path / "data"), "--out", tmp_path / "runs",
                    "--json")
    assert json.loads(succeeds(res))["examples"] == 8 and len(warnings(res.stderr)) == 2
    fails(relreason("train", "clash_gnn", "bellman_ford"), 1, "unknown model 'clash_gnn'")


def test_the_guide_builds_a_working_plugin(tmp_path, monkeypatch):
    """docs/plugins.md from an empty directory: its pyproject, each Python block (saved under the path
    its first line names) and its recipe, installed, listed and trained as the guide says."""
    blocks = re.findall(r"```(\w+)\n(.*?)```", GUIDE.read_text(), re.S)
    project = tmp_path / "my-plugin"
    (project / "src" / "my_plugin" / "recipes").mkdir(parents=True)
    for package in ("my_plugin", "my_plugin/recipes"):
        (project / "src" / package / "__init__.py").write_text("")
    (project / "pyproject.toml").write_text(next(code for lang, code in blocks if lang == "toml"))
    (project / "src" / "my_plugin" / "recipes" / "my_gnn.yaml").write_text(
        next(code for lang, code in blocks if lang == "yaml"))
    for code in (code for lang, code in blocks if lang == "python"):
        (project / code.splitlines()[0].removeprefix("# ")).write_text(code)
    install_for_commands(pip_install(tmp_path / "site", project), monkeypatch)
    models = {r["name"]: r for r in json.loads(succeeds(relreason("list", "models", "--json")))["models"]}
    assert models["my_gnn"]["origin"] == "my-plugin 0.1.0" and models["my_gnn"]["paper_recipe"] == "my_gnn"
    res = relreason("train", "my_gnn", "bellman_ford", "--recipe", "quick", *tiny_sets(tmp_path / "data"),
                    "--out", tmp_path / "runs", "--json")
    assert json.loads(succeeds(res))["examples"] == 8
    assert all("my-plugin 0.1.0 (entry point relreason.algorithms" in line for line in warnings(res.stderr))
    assert len(warnings(res.stderr)) == (0 if NEW_ALGORITHM_API else 1)
    # the guide's algorithm trains too, and docs/dataset-format.md declares it exactly as the guide does
    res = relreason("train", "mpnn", "running_max", "--recipe", "quick", *tiny_sets(tmp_path / "data"),
                    "--out", tmp_path / "runs", "--json")
    assert json.loads(succeeds(res))["examples"] == 8 and not warnings(res.stderr)
    readme = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "dataset-format.md").read_text(), re.S)
    declared = next(code for code in readme if '@register("running_max"' in code).strip().splitlines()
    guide = next(code for lang, code in blocks if '@register("running_max"' in code)
    assert declared == guide[guide.index('@register("running_max"'):].splitlines()[:3]  # decorator and signature
