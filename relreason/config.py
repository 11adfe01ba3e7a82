"""Typed configuration, resolved from layers and auditable line by line.

A run's configuration has up to four sections:
- `data`: what the task trains and tests on; its dataclass depends on the task kind (CLRS graph
  algorithms, lobster graphs, CLRS-Text: `relreason.data.config`), so `--print-config` never shows
  keys that do not apply;
- `model`: for NAR models the encode-process-decode options (`relreason.models.config.ModelConfig`);
  for text models the text model's own config;
- `processor` (NAR models only): the processor's config dataclass, whose defaults are its paper's;
- `train`: optimisation and the validation schedule.

Layers, lowest first (each later one overrides; `Config.sources` records which layer set each key):
1. `default`: the dataclass defaults (the CLRS v2 defaults of the reference's clrs 2.0.3 run.py);
2. `model NAME`: what the model's paper sets unlike the CLRS defaults (e.g. the RT decodes pointers
   from edges);
3. `task NAME`: what the task needs (e.g. lobsters: no hints, many processor iterations);
4. `recipe NAME`: a YAML recipe (a diff; `inherit:` chains recipes, `inherit: paper` means the
   paper recipe of the model and task being trained). Without `--recipe` the paper recipe that the
   model's entry declares for the task's kind (relreason.models.entry: `rt` for CLRS tasks,
   `lobster_rt` for lobsters) is used, `default` where it declares none. A recipe may scope diffs
   to models or tasks (`models: {rt: {...}}`, `tasks: {lobster: {...}}`), and its line comments are
   the sources `--print-config` shows. Installed plugins add recipes (`RECIPES`, relreason.plugins);
5. `ablation NAME`: the variant's delta (ablate only);
6. `--set`: command-line overrides.

Everything is validated against the dataclasses before anything is built: unknown keys and wrong
types are all reported at once with their path (`train.lr: expected a number, got 'x'`), and range
checks reject values no run can use (never replaced by defaults).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

# the `data:` sections and the protocol's keys stand lower in the house (tasks and run records read
# them too); they are named here as well, as part of the configuration
from relreason.data.config import ClrsDataConfig, DataStream, LobsterDataConfig, TextDataConfig
from relreason.errors import RelreasonError
from relreason.files import MAX_INT_DIGITS, read_text
from relreason.protocol import NOT_PROTOCOL_KEYS
from relreason.runtime import recipe_dir
from relreason.schedules import schedule_problems
from relreason.tracking import log_problems
from relreason.registry import Registry


def _package_dir(package: types.ModuleType | str) -> Path:
    import importlib.resources

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


# Where the built-in recipes live: the top-level `recipes/` of a source checkout, shipped inside the
# wheel as the `relreason.recipes` package data.
RECIPE_DIR = recipe_dir()  # relreason.runtime: the checkout's recipes/, else the installed package data
# recipe name -> its YAML file: the built-ins, then those of plugins (a package named by an entry point
# of the group relreason.recipes: see relreason.plugins and docs/plugins.md)
RECIPES: Registry[Path] = Registry("recipe", "relreason list recipes")
for _path in sorted(RECIPE_DIR.glob("*.yaml")):
    RECIPES.register(_path.stem, _path)
RECIPES.accept_plugins("relreason.recipes", adopt=_adopt_recipes)

PAPER = "paper"  # `inherit: paper`: the paper recipe of the model and task being trained


PRECISIONS = ("fp32", "bf16")  # train.precision (relreason.models.precision)


@dataclass
class TrainConfig:
    batch_size: int = 32  # reference default
    lr: float = 1e-3  # reference Adam learning rate
    grad_clip: float | None = 1.0  # global-norm clipping, reference default; null: no clipping
    train_examples: int = 320_000  # 10,000 steps x batch 32, the reference schedule
    eval_every_examples: int = 1_600  # every 50 steps x batch 32, as the reference
    eval_batch_size: int | None = None  # evaluation batch; null: as large as memory allows (scores do not change)
    seed: int = 42  # model init and every noise draw derive from it, and the batch order under data.order seeded
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    threads: int = 0  # torch intra-op threads; 0 leaves torch's default
    precision: str = "fp32"  # fp32 | bf16: bf16 autocast of the training forward (weights, Adam, evaluation stay fp32)
    lr_schedule: str = "constant"  # constant | cosine | linear (relreason.schedules): every paper reproduced here keeps lr constant
    warmup_examples: int = 0  # linear warm-up of lr over this many examples first; 0: none (no paper reproduced here warms up)
    min_lr: float = 0.0  # the rate cosine / linear decay reaches at train.train_examples; must stay 0 under constant
    # none | tensorboard (event files in the run directory) | wandb (a W&B run), or several: tensorboard,wandb
    # (pip install 'relreason[tensorboard]' / 'relreason[wandb]'); a view of metrics.jsonl, never the protocol
    log: str = "none"
    # the shape-static step: samples whose trajectory ended are masked, not dropped, so every shape is fixed
    # and nothing is read back to the host (seed groups and CUDA graphs need it); the same numbers to float
    # rounding, a little more work on CPU (finished samples still compute); dense graphs only
    static_step: bool = False
    # CUDA graphs: the static step's forward and backward captured once per batch shape and replayed with
    # one launch (relreason.train.cuda_graphs); the same numbers to float rounding. CUDA, one process, one graph
    # task, not seed groups; needs static_step
    cuda_graph: bool = False
    # fine-tuning: the checkpoint (a run directory -> its best/, a checkpoint or `export --hub` folder) whose
    # weights start the run instead of a fresh initialisation, loaded strictly; null: a fresh start
    init: str | None = None

    def problems(self) -> list[str]:
        out = [f"train.{k} must be positive, got {getattr(self, k)}"
               for k in ("batch_size", "train_examples", "eval_every_examples") if getattr(self, k) <= 0]
        if self.cuda_graph and not self.static_step:
            out.append("train.cuda_graph needs train.static_step: true (a CUDA graph needs fixed shapes and no "
                       "host reads)")
        if self.eval_batch_size is not None and self.eval_batch_size <= 0:
            out.append(f"train.eval_batch_size must be positive or null (automatic), got {self.eval_batch_size}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            out.append(f"train.lr must be a positive finite number, got {self.lr}")
        if self.grad_clip is not None and not (math.isfinite(self.grad_clip) and self.grad_clip > 0):
            out.append(f"train.grad_clip must be positive (or null for no clipping), got {self.grad_clip}")
        if self.seed < 0:
            out.append(f"train.seed must be non-negative, got {self.seed}")
        if self.threads < 0:
            out.append(f"train.threads must be 0 (torch's default) or positive, got {self.threads}")
        if self.precision not in PRECISIONS:
            out.append(f"train.precision must be {' or '.join(PRECISIONS)}, got {self.precision!r}")
        if self.device not in ("auto", "cpu", "cuda") and not re.fullmatch(r"cuda:\d+", self.device):
            out.append(f"train.device {self.device!r} must be auto, cpu, cuda or cuda:N")
        if self.init is not None and not self.init.strip():
            out.append("train.init must name a checkpoint directory, or be null (a fresh start)")
        out.extend(schedule_problems(self))
        out.extend(log_problems(self.log))
        return out


SECTIONS = ("data", "model", "processor", "train")


@dataclass
class Config:
    """A resolved run configuration (what `--print-config` shows and checkpoints store)."""

    model_name: str  # model registry name, e.g. "mpnn", "rt", "text_transformer"
    task: str  # a task, or a comma list / group of tasks for multi-task training ("core8")
    data: Any = None  # the task kind's data config
    model: Any = None  # ModelConfig (NAR models) or the text model's config
    processor: Any = None  # NAR models: the processor's config dataclass; text models: None
    train: TrainConfig = field(default_factory=TrainConfig)
    recipe: str | None = None  # the recipe that was applied (resolved name; "default" when none)
    # "section.key" -> the layer that set it ("recipe rt: paper Table 5"); not part of the config itself
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    # the recipe's own `deviation:` statement, read when the recipe was resolved: a run stores it, so
    # no later step looks the recipe up again (a YAML path may be gone); not part of the config itself
    deviation: str | None = field(default=None, compare=False, repr=False)

    def sections(self) -> tuple[str, ...]:
        return tuple(s for s in SECTIONS if getattr(self, s) is not None)

    def to_dict(self) -> dict:
        return {"model_name": self.model_name, "task": self.task, "recipe": self.recipe,
                **{s: to_plain(getattr(self, s)) for s in self.sections()}}

    @property
    def tasks(self) -> list[str]:
        """The task names this config trains on (groups expanded)."""
        from relreason.tasks import expand_tasks

        return expand_tasks(self.task)


def to_plain(obj: Any) -> Any:
    """Dataclasses/enums -> plain YAML/JSON values."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [to_plain(x) for x in obj]
    return obj


def _coerce(value: Any, tp: Any, path: str, errors: list[str]) -> Any:
    """Checks/coerces one value against a type annotation; appends an error message on failure."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            sub: list[str] = []
            out = _coerce(value, arg, path, sub)
            if not sub:
                return out
        errors.append(f"{path}: expected {_type_name(tp)}, got {value!r}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            errors.append(f"{path}: expected a list, got {value!r}")
            return value
        (arg, *_) = typing.get_args(tp) or (Any,)
        return tuple(_coerce(v, arg, f"{path}[{i}]", errors) for i, v in enumerate(value))
    if tp is Any:
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            errors.append(f"{path}: expected one of {[m.value for m in tp]}, got {value!r}")
            return value
    if tp is bool:
        if isinstance(value, bool):
            return value
        errors.append(f"{path}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        errors.append(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        errors.append(f"{path}: expected a number, got {value!r}")
        return value
    if tp is str:
        if isinstance(value, str):
            return value
        errors.append(f"{path}: expected a string, got {value!r}")
        return value
    return value


def _type_name(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if args and len(args) < len(typing.get_args(tp)):
        return " or ".join(_type_name(a) for a in args) + " or null"
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def apply_updates(obj: Any, updates: dict, prefix: str, errors: list[str]) -> Any:
    """Returns a copy of dataclass `obj` with `updates` applied, validating keys and types."""
    if not isinstance(updates, dict):
        errors.append(f"{prefix}: expected a mapping of keys to values, got {updates!r}")
        return obj
    hints = typing.get_type_hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    changes = {}
    for key, value in updates.items():
        path = f"{prefix}.{key}"
        if key not in names:
            import difflib

            close = difflib.get_close_matches(str(key), names, n=1)
            errors.append(f"{path}: unknown key" + (f" (did you mean {prefix}.{close[0]}?)" if close else
                                                    f" (known: {', '.join(sorted(names))})"))
            continue
        changes[key] = _coerce(value, hints[key], path, errors)
    if not changes:
        return obj
    try:
        return dataclasses.replace(obj, **changes)
    except RelreasonError as e:  # a dataclass's own range check (__post_init__)
        errors.append(e.message)
        return obj


# -- recipes -------------------------------------------------------------------------------------

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
        import difflib

        names = recipe_names()
        close = difflib.get_close_matches(recipe, names, n=2)
        hint = (f"did you mean {' or '.join(close)}? " if close else "") + f"known recipes: {', '.join(names)}"
        raise RelreasonError(f"unknown recipe {recipe!r}", hint)
    return RECIPES.get(recipe)


def recipe_names() -> list[str]:
    return sorted(RECIPES.names())


RECIPE_KEYS = ("inherit", "deviation", "models", "tasks") + SECTIONS  # what a recipe file may hold


@dataclass
class Layer:
    """One source of configuration values, with the comments that justify them."""

    label: str  # "recipe rt", "--set", ...
    tree: dict  # {section: {key: value}}
    comments: dict[tuple[str, ...], str] = field(default_factory=dict)  # key path -> line comment


MAX_YAML_NODES = 100_000  # a recipe holds a few hundred values; aliases may not expand it beyond this
MAX_RECIPE_BYTES = 1 << 20  # a recipe is a few KiB: a larger file is refused before YAML parses it


def read_recipe_text(path: Path) -> str:
    """The text of the recipe file `path` (a path the user named: a link is followed), by the guarded
    reader: a regular file of at most MAX_RECIPE_BYTES (relreason.files)."""
    try:
        return read_text(path, MAX_RECIPE_BYTES, follow=True, hint="give a YAML recipe of a few KiB")
    except RelreasonError as e:
        raise RelreasonError(f"recipe {e.message}", e.hint) from None


class _StrictLoader(yaml.SafeLoader):
    """Safe loading (no `!!python` tags) that also refuses a key given twice in one mapping (YAML keeps
    the last silently) and, in `load_yaml`, documents whose aliases expand past MAX_YAML_NODES nodes."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    line = key_node.start_mark.line + 1
                    if key_node.value in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key_node.value!r} is given twice (lines {seen[key_node.value]} "
                            f"and {line}): remove one", key_node.start_mark)
                    seen[key_node.value] = line
        return super().construct_mapping(node, deep)


class IntegerTooLong(yaml.YAMLError):
    """A YAML integer of more digits than relreason.files.MAX_INT_DIGITS (Python's int() would refuse
    4,300 with a ValueError; no setting needs more than 20)."""


def _construct_int(loader: _StrictLoader, node):
    digits = len(node.value.lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise IntegerTooLong(f"an integer of {digits} digits, more than the {MAX_INT_DIGITS} a setting may have")
    return loader.construct_yaml_int(node)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _expanded_size(node, sizes: dict[int, int]) -> int:
    """How many nodes `node` stands for with every alias expanded (each shared node counted once per use)."""
    if id(node) not in sizes:
        children = node.value if isinstance(node, yaml.SequenceNode) else \
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
        sizes[id(node)] = 1 + sum(_expanded_size(c, sizes) for c in children)
    return sizes[id(node)]


def load_yaml(text: str) -> Any:
    """The value of one YAML document, loaded by `_StrictLoader`. Raises yaml.YAMLError for a syntax
    error, a repeated key, aliases expanding past MAX_YAML_NODES nodes or nesting too deep."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {})
        if size > MAX_YAML_NODES:
            raise yaml.YAMLError(f"its aliases expand to {size:,} values, more than the {MAX_YAML_NODES:,} "
                                 "a configuration may hold")
        return loader.construct_document(node)
    except RecursionError:
        raise yaml.YAMLError("it is nested too deeply") from None
    finally:
        loader.dispose()


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


MULTITASK = "multitask"  # the recipe scope (`tasks: {multitask: ...}`) applied to every multi-task run


def recipe_layers(recipe: str, model: str, task: str, kind: str, _seen: tuple[str, ...] = ()) -> list[Layer]:
    """The layers of a recipe, its `inherit:` chain first, scoped `models:` / `tasks:` diffs after its own."""
    if recipe == PAPER:
        recipe = paper_recipe(model, task)
    if recipe in _seen:
        raise RelreasonError(f"recipe {recipe!r} inherits from itself through {' -> '.join(_seen)}", "break the cycle")
    data, comments = read_recipe(recipe)
    name = Path(recipe).stem if recipe.endswith((".yaml", ".yml")) else recipe
    layers: list[Layer] = []
    parent = data.get("inherit")
    if parent is not None:
        layers += recipe_layers(str(parent), model, task, kind, _seen + (recipe,))
    own = {k: v for k, v in data.items() if k in SECTIONS}
    layers.append(Layer(f"recipe {name}", own, comments))
    from relreason.tasks import expand_tasks

    scopes = [("models", model), ("tasks", task), ("tasks", kind)]
    if len(expand_tasks(task)) > 1 and kind != "text":  # text groups: the `text` scope sizes them per size
        scopes.append(("tasks", MULTITASK))  # any multi-task NAR run (a group or a comma list)
    for scope, key in scopes:
        scoped = data.get(scope) or {}
        if not isinstance(scoped, dict):
            raise RelreasonError(f"recipe {name}: `{scope}:` must map names to config diffs", "see recipes/quick.yaml")
        if key in scoped:
            sub = {(p[2:]): c for p, c in comments.items() if p[:2] == (scope, key)}
            layers.append(Layer(f"recipe {name} ({key})", scoped[key] or {}, sub))
    return layers


def run_deviation(cfg: "Config") -> str | None:
    """How a run departs from its recipe's protocol: the recipe's own statement (`cfg.deviation`, read
    when the config was built, never looked up again by the recipe's label), then every value `--set`
    changed on top of it (except NOT_PROTOCOL_KEYS). None when neither."""
    parts = [cfg.deviation] if cfg.deviation else []
    plain = cfg.to_dict()
    changed = [f"{key}={plain[section][name]}" for key, source in cfg.sources.items()
               if source.startswith("--set") and key not in NOT_PROTOCOL_KEYS and key.count(".") == 1
               for section, name in [key.split(".")]]
    if changed:
        parts.append("changed with --set over the recipe: " + ", ".join(changed))
    return "; ".join(parts) or None


def recipe_deviation(recipe: str) -> str | None:
    """The recipe's own statement of how it deviates from the papers' protocols (printed by train)."""
    data, _ = read_recipe(recipe)
    dev = data.get("deviation")
    return str(dev).strip() if dev else None


def paper_recipe(model: str, task: str) -> str:
    """The recipe that reproduces the model's paper on this task, as the model's entry declares it
    for the task's kind (relreason.models.entry: `rt` on CLRS tasks, `lobster_rt` on lobsters);
    `default` where it declares none."""
    from relreason.models.catalog import paper_recipe as declared
    from relreason.tasks import task_kind

    return declared(model, task_kind(task))


def parse_overrides(items: list[str]) -> dict:
    """`["train.lr=1e-4", "model.hidden=64"]` -> {"train": {"lr": 1e-4}, "model": {"hidden": 64}}."""
    tree: dict = {}
    for item in items:
        if "=" not in item:
            raise RelreasonError(f"--set {item!r} is not KEY=VALUE", "e.g. --set train.lr=1e-4")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if len(parts) != 2 or not all(parts):
            raise RelreasonError(f"--set key {key!r} must be SECTION.KEY", f"sections: {', '.join(SECTIONS)}")
        try:
            value = load_yaml(raw) if raw.strip() else ""
        except IntegerTooLong as e:
            raise RelreasonError(f"--set {key.strip()}: {e}", "give a number of a sensible size") from None
        except yaml.YAMLError:
            value = raw
        tree.setdefault(parts[0], {})[parts[1]] = value
    return tree


def merge(*trees: dict) -> dict:
    out: dict = {}
    for tree in trees:
        for section, values in tree.items():
            if isinstance(values, dict) and isinstance(out.get(section), dict):
                out[section] = {**out[section], **values}
            else:
                out[section] = values
    return out


def keys_of(tree: dict) -> set[str]:
    """{"section.key", ...} set by a config tree."""
    return {f"{s}.{k}" for s, values in tree.items() if isinstance(values, dict) for k in values}


# -- resolution ----------------------------------------------------------------------------------

def build_config(model_name: str, task: str, recipe: str | None = None, overrides: list[str] | dict | None = None,
                 ablation: tuple[str, dict] | None = None) -> Config:
    """Resolves the layers (see the module docstring) into a validated Config.

    Args:
        recipe: a recipe name or YAML path; None means the paper recipe of (model, task).
        overrides: `--set` items (["train.lr=1e-4"]) or an equivalent tree.
        ablation: (label, delta tree) of an ablation variant, applied between recipe and overrides.
    Raises:
        RelreasonError: every invalid key, type or range at once.
    """
    from relreason.tasks import task_defaults, task_kind

    family, entry = _model(model_name)
    kind = task_kind(task)
    _check_family(model_name, family, task, kind)
    recipe_name = recipe if recipe is not None else paper_recipe(model_name, task)
    layers = [Layer(f"model {model_name}", {"model": dict(getattr(entry, "model_defaults", {}))}),
              Layer(f"task {task}", task_defaults(task))]
    layers += recipe_layers(recipe_name, model_name, task, kind)
    if ablation is not None:
        layers.append(Layer(f"ablation {ablation[0]}", ablation[1]))
    over = overrides if isinstance(overrides, dict) else parse_overrides(list(overrides or []))
    layers.append(Layer("--set", over))
    label = Path(recipe_name).stem if str(recipe_name).endswith((".yaml", ".yml")) else recipe_name
    cfg = resolve(model_name, task, layers, label)
    # read from the file found now (a name or a path): the label alone may name no recipe (./mine.yaml -> mine)
    cfg.deviation = recipe_deviation(paper_recipe(model_name, task) if recipe_name == PAPER else recipe_name)
    return cfg


def resolve(model_name: str, task: str, layers: list[Layer], recipe_label: str | None) -> Config:
    """Applies `layers` over the defaults of (model, task); validates; records each key's source."""
    from relreason.tasks import data_config_class

    family, entry = _model(model_name)
    cfg = Config(model_name, task, data_config_class(task)(), *_model_sections(family, entry), TrainConfig(),
                 recipe_label)
    errors: list[str] = []
    sources: dict[str, str] = {}
    for layer in layers:
        for section, values in layer.tree.items():
            if section not in SECTIONS:
                errors.append(f"{section}: unknown section (known: {', '.join(cfg.sections())})")
                continue
            if getattr(cfg, section) is None:
                if values:
                    errors.append(f"{section}: this model has no {section} section (known: {', '.join(cfg.sections())})")
                continue
            setattr(cfg, section, apply_updates(getattr(cfg, section), values, section, errors))
            if isinstance(values, dict):
                for key in values:
                    note = layer.comments.get((section, key))
                    sources[f"{section}.{key}"] = layer.label + (f": {note}" if note else "")
    if errors:
        raise RelreasonError("invalid configuration: " + "; ".join(dict.fromkeys(errors)),
                             "see `relreason train MODEL TASK --print-config` for every key and its type")
    cfg.sources = sources
    validate(cfg)
    return cfg


def _model(name: str):
    from relreason.models.catalog import find_model

    return find_model(name)


def _model_sections(family, entry) -> tuple[Any, Any]:
    """(model section, processor section) defaults of a model."""
    from relreason.models.catalog import Family

    if family is Family.TEXT:
        return entry.config(), None
    from relreason.models.config import ModelConfig

    return ModelConfig(), entry.config()


def _check_family(model: str, family, task: str, kind: str) -> None:
    from relreason.models.catalog import Family

    if (family is Family.TEXT) != (kind == "text"):
        want = "a text: task (e.g. text:insertion_sort)" if family is Family.TEXT else "a graph task (e.g. bellman_ford)"
        raise RelreasonError(f"model {model!r} cannot train on {task!r}", f"{model} is a {family.value} model: give {want}")


def validate(cfg: Config) -> None:
    """Range checks that types alone cannot express, all reported at once."""
    problems = list(cfg.train.problems())
    problems += cfg.data.problems()
    task_check = getattr(cfg.data, "task_problems", None)  # e.g. a graph family given to non-graph algorithms
    if task_check is not None:
        problems += task_check(cfg.tasks)
    check = getattr(cfg.model, "problems", None)
    if check is not None:
        problems += check()
    if problems:
        raise RelreasonError("invalid configuration: " + "; ".join(problems), "fix the recipe or --set values")


def config_from_dict(d: dict) -> Config:
    """Rebuilds a Config stored in a checkpoint's config.json (every key as stored)."""
    tree = {s: d[s] for s in SECTIONS if d.get(s) is not None}
    return resolve(d["model_name"], d["task"], [Layer("stored", tree)], d.get("recipe"))


def config_yaml(cfg: Config, sources: bool = False) -> str:
    """The resolved config as YAML; with `sources`, each key is followed by the layer that set it
    (`default` when none did) and keys that do not apply are left out."""
    plain = cfg.to_dict()
    if not sources:
        return yaml.safe_dump(plain, sort_keys=False)
    unused = cfg.data.unused() if hasattr(cfg.data, "unused") else set()
    lines = [f"model_name: {cfg.model_name}", f"task: {cfg.task}", f"recipe: {cfg.recipe}"]
    for section in cfg.sections():
        lines.append(f"{section}:")
        notes = field_comments(type(getattr(cfg, section)))
        for key, value in plain[section].items():
            if section == "data" and key in unused:
                continue
            text = yaml.safe_dump({key: value}, default_flow_style=True, width=10_000).strip()[1:-1]
            source = cfg.sources.get(f"{section}.{key}") or ("default: " + notes[key] if key in notes else "default")
            lines.append(f"  {text}  # {source}")
    return "\n".join(lines) + "\n"


def field_comments(cls: type) -> dict[str, str]:
    """The `# reason` comment written beside each field's default in a config dataclass."""
    import inspect

    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    out = {}
    for line in source.splitlines():
        m = re.match(r"^\s+(\w+)\s*:[^=#]+=[^#]*#\s?(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out
