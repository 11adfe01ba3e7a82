"""The recipes: which exist (`RECIPES`, `recipe_names`), where one is (`find_recipe`), what its file
holds (`read_recipe`, `recipe_deviation`), and which one reproduces a model's paper (`paper_recipe`).

    data, comments = read_recipe("quick")    # its mapping, and its line comments by key path
    recipe_deviation("rt")                    # the recipe's own statement of how it departs from the papers

A recipe is a YAML diff over the defaults (`inherit:` chains recipes, `inherit: paper` means the paper
recipe of the model and task being trained; `models:` / `tasks:` scope diffs), turned into layers by
relreason.config.resolve. Installed plugins add recipes (relreason.plugins, docs/plugins.md).
"""

from __future__ import annotations

import difflib
import importlib.resources
import re
import types
from pathlib import Path

import yaml

from relreason.config.schema import SECTIONS
from relreason.config.strict_yaml import load_yaml
from relreason.errors import RelreasonError
from relreason.files import read_text
from relreason.registry import Registry
from relreason.runtime import recipe_dir
from relreason.tasks import task_kind


def _package_dir(package: types.ModuleType | str) -> Path:
    return Path(str(importlib.resources.files(package)))


def _adopt_recipes(package: object) -> None:
    """A `relreason.recipes` entry point names a package: each of its *.yaml files becomes a recipe."""
    if not isinstance(package, types.ModuleType) or not hasattr(package, "__path__"):
        raise TypeError(f"{package!r} is not a package of YAML recipes")
    files = sorted(_package_dir(package).glob("*.yaml"))
    if not files:
        raise ValueError(f"package {package.__name__} holds no *.yaml recipe")
    for path in files:
        RECIPES.register(path.stem, path)


# Where the built-in recipes live: the package's own relreason/recipes/ (package data of the wheel).
RECIPE_DIR = recipe_dir()  # relreason.runtime: relreason/recipes/, in a checkout as in an installed wheel
# recipe name -> its YAML file: the built-ins, then those of plugins (a package named by an entry point
# of the group relreason.recipes: see relreason.plugins and docs/plugins.md)
RECIPES: Registry[Path] = Registry("recipe", "relreason list recipes")
for _path in sorted(RECIPE_DIR.glob("*.yaml")):
    RECIPES.register(_path.stem, _path)
RECIPES.accept_plugins("relreason.recipes", adopt=_adopt_recipes)

PAPER = "paper"  # `inherit: paper`: the paper recipe of the model and task being trained


def find_recipe(recipe: str) -> Path:
    """A recipe name (`quick`, `rt`) in recipes/, or a path to a YAML file."""
    if not recipe.strip():
        raise RelreasonError(f"recipe {recipe!r} is empty", "give a recipe name (relreason list recipes) or a YAML path")
    path = Path(recipe)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.exists():
            raise RelreasonError(f"recipe file {recipe} does not exist", "give a recipe name or an existing YAML path")
        if not path.is_file():
            raise RelreasonError(f"recipe {recipe} is a directory, not a YAML file", "give a recipe name or a YAML path")
        return path
    if recipe not in RECIPES:
        names = recipe_names()
        close = difflib.get_close_matches(recipe, names, n=2)
        hint = (f"did you mean {' or '.join(close)}? " if close else "") + f"known recipes: {', '.join(names)}"
        raise RelreasonError(f"unknown recipe {recipe!r}", hint)
    return RECIPES.get(recipe)


def recipe_names() -> list[str]:
    return sorted(RECIPES.names())


RECIPE_KEYS = ("inherit", "deviation", "models", "tasks") + SECTIONS  # what a recipe file may hold


MAX_RECIPE_BYTES = 1 << 20  # a recipe is a few KiB: a larger file is refused before YAML parses it


def read_recipe_text(path: Path) -> str:
    """The text of the recipe file `path` (a path the user named: a link is followed), by the guarded
    reader: a regular file of at most MAX_RECIPE_BYTES (relreason.files)."""
    try:
        return read_text(path, MAX_RECIPE_BYTES, follow=True, hint="give a YAML recipe of a few KiB")
    except RelreasonError as e:
        raise RelreasonError(f"recipe {e.message}", e.hint) from None


def read_recipe(recipe: str) -> tuple[dict, dict[tuple[str, ...], str]]:
    """A recipe file's mapping and its line comments by key path (("train", "lr") -> "paper Table 5")."""
    path = find_recipe(recipe)
    try:
        text = read_recipe_text(path)
        data = load_yaml(text) or {}
    except yaml.YAMLError as e:
        raise RelreasonError(f"recipe {path} is not valid YAML: {str(e).splitlines()[0]}", "fix the file") from None
    except UnicodeDecodeError:
        raise RelreasonError(f"recipe {path} is not a text file (not UTF-8)", "give a YAML recipe") from None
    except OSError as e:
        raise RelreasonError(f"cannot read recipe {path}: {e.strerror}", "check the path and its permissions") from None
    if not isinstance(data, dict):
        raise RelreasonError(f"recipe {path} must be a mapping of sections", f"sections: {', '.join(SECTIONS)}")
    unknown = [k for k in data if k not in RECIPE_KEYS]
    if unknown:
        raise RelreasonError(f"recipe {path}: unknown top-level key(s) {', '.join(map(str, unknown))}",
                             f"a recipe holds: {', '.join(RECIPE_KEYS)}")
    return data, _line_comments(text)


def _line_comments(text: str) -> dict[tuple[str, ...], str]:
    """Trailing `# comments` of a block-style YAML mapping, keyed by the path of the key on that line."""
    out: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing keys
    for line in text.splitlines():
        m = re.match(r"^(\s*)([A-Za-z_][\w\-]*)\s*:(.*)$", line)
        if not m:
            continue
        indent, key, rest = len(m.group(1)), m.group(2), m.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        comment = re.search(r"\s#\s?(.*)$", rest)
        if comment:
            out[tuple(k for _, k in stack)] = comment.group(1).strip()
    return out


def recipe_deviation(recipe: str) -> str | None:
    """The recipe's own statement of how it deviates from the papers' protocols (printed by train)."""
    data, _ = read_recipe(recipe)
    dev = data.get("deviation")
    return str(dev).strip() if dev else None


def paper_recipe(model: str, task: str) -> str:
    """The recipe that reproduces the model's paper on this task, as the model's entry declares it
    for the task's kind (relreason.models.entry: `rt` on CLRS tasks, `lobster_rt` on lobsters);
    `default` where it declares none."""
    from relreason.models.catalog import paper_recipe as declared  # CLI start-up: relreason.models loads torch

    return declared(model, task_kind(task))


__all__ = ["RECIPE_DIR", "RECIPES", "PAPER", "RECIPE_KEYS", "find_recipe", "recipe_names", "read_recipe",
           "recipe_deviation", "paper_recipe"]
