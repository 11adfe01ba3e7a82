"""Checkpoints: a directory with `model.safetensors`, `config.json`, and for resuming
`optimizer.safetensors` + `trainer_state.json`.

config.json records, under `plugins`, which installed plugin (distribution and version) the model
and each algorithm came from, built-ins left out:

    "plugins": [{"kind": "model", "name": "max_gnn", "distribution": "relreason-example-plugin", "version": "0.1.0"}]

Loading a checkpoint whose plugin is not installed fails with one line naming that plugin.

Weights are never pickled. The whole directory is written under a temporary name and swapped in,
so a run killed at any moment leaves either the previous checkpoint or the new one, never a mix.
It gets the permissions the user's umask gives new directories and files. Loading is strict and
names missing or unexpected keys; an unreadable file is reported as such, never as corrupt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from relreason import __version__
from relreason.config import Config, config_from_dict
from relreason.data.store import current_umask, owned_temporary, remove_stale_temporaries
from relreason.errors import RelreasonError, write_error
from relreason.files import fd_path, open_regular, read_json_object, safetensors_header, shown
from relreason.rundir import (CHECKPOINT_CONFIG, OPTIMIZER, OPTIMIZER_META, TRAINER_STATE, WEIGHTS, TrainerState,
                              old_checkpoint, read_object)
from relreason.data.algorithms import ALGORITHMS
from relreason.models.build import build_nar
from relreason.models.catalog import Family, find_model, model_names, model_origin
from relreason.plugins import Origin, plugin_version_changes, require_plugins
from relreason.rundir import RunDir
from relreason.tasks import task_entries

FORMAT = 1  # bump when the checkpoint layout changes incompatibly


def tensors_digest(arrays: dict) -> str:
    """sha256 of named tensors or arrays (each name, dtype, shape and bytes, in name order), 16 hex digits: a run's
    initial weights (`init_weights` in its trainer state and results), a validation set's samples
    (scripts/step0_check.py). Tensors are read on the CPU, so a device's weights digest as the CPU's."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = arrays[name]
        a = a.detach().cpu().contiguous().numpy() if isinstance(a, torch.Tensor) else np.ascontiguousarray(a)
        h.update(name.encode())
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _state_for_safetensors(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Contiguous CPU copies; tensors sharing storage (tied layers) are cloned to separate ones."""
    return {k: v.detach().to("cpu").contiguous().clone() for k, v in state.items()}


def _flatten_optimizer(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    sd = opt.state_dict()
    tensors, scalars = {}, {}
    for pid, st in sd["state"].items():
        for key, val in st.items():
            if torch.is_tensor(val):
                tensors[f"{pid}.{key}"] = val.detach().to("cpu").contiguous().clone()
            else:
                scalars[f"{pid}.{key}"] = val
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    state: dict[int, dict] = {}
    for name, val in tensors.items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = val
    for name, val in meta["scalars"].items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = val
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(path: Path, model: torch.nn.Module, cfg: Config, spec_hash: str, extra: dict | None = None,
                    optimizer: torch.optim.Optimizer | None = None, trainer_state: dict | None = None) -> Path:
    """Writes a checkpoint directory atomically (temp dir + rename).

    Raises:
        RelreasonError: it could not be written (a full disk, a read-only file system: the path and the
            cause); the previous checkpoint is left as it was and nothing half-written remains."""
    path = Path(path)
    try:
        return _save_checkpoint(path, model, cfg, spec_hash, extra, optimizer, trainer_state)
    except (OSError, SafetensorError) as e:
        raise write_error(path, e) from None


def _save_checkpoint(path: Path, model: torch.nn.Module, cfg: Config, spec_hash: str, extra: dict | None,
                     optimizer: torch.optim.Optimizer | None, trainer_state: dict | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent)  # of a writer killed before its rename
    with owned_temporary(path.parent, f".{path.name}.", ".tmp", directory=True) as tmp:
        save_file(_state_for_safetensors(model.state_dict()), tmp / WEIGHTS)
        meta = {"format": FORMAT, "relreason": __version__, "spec_hash": spec_hash, "config": cfg.to_dict(),
                "plugins": plugin_record(cfg), **(extra or {})}
        (tmp / CHECKPOINT_CONFIG).write_text(json.dumps(meta, indent=2))
        if optimizer is not None:
            tensors, opt_meta = _flatten_optimizer(optimizer)
            save_file(tensors, tmp / OPTIMIZER)
            (tmp / OPTIMIZER_META).write_text(json.dumps(opt_meta))
        if trainer_state is not None:
            (tmp / TRAINER_STATE).write_text(json.dumps(trainer_state, indent=2))
        umask = current_umask()  # made 0700 and safetensors writes 0600: give the usual modes
        for f in tmp.iterdir():
            os.chmod(f, 0o666 & ~umask)
        os.chmod(tmp, 0o777 & ~umask)
        old = None
        if path.exists() or path.is_symlink():
            old = old_checkpoint(path)
            _remove(old)
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            _remove(old, ignore_errors=True)
    return path


def _remove(path: Path, ignore_errors: bool = False) -> None:
    """Removes a checkpoint directory; a link in its place is unlinked, never followed."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=ignore_errors)


def recover(path: Path) -> None:
    """If a kill struck between the two renames of `save_checkpoint`, put the old checkpoint back."""
    path = Path(path)
    old = old_checkpoint(path)
    if not path.exists() and old.exists():
        os.replace(old, path)


def read_checkpoint_meta(path: Path) -> dict:
    path = Path(path)
    recover(path)
    cfg_file = path / CHECKPOINT_CONFIG
    if not os.path.lexists(cfg_file) or not path.is_dir():
        raise RelreasonError(f"{path} is not a checkpoint (no config.json)",
                             "give a run directory (runs/NAME) or a checkpoint directory (runs/NAME/best)")
    meta = read_json_object(cfg_file, "use another checkpoint, e.g. best/ or last/")
    if meta.get("format") != FORMAT:
        raise RelreasonError(f"{cfg_file} has checkpoint format {shown(meta.get('format'))}, this relreason reads "
                             f"{FORMAT}", f"evaluate it with the relreason version that wrote it "
                             f"({shown(meta.get('relreason'))})")
    return meta


def load_config(path: Path, warn: bool = True) -> Config:
    """The config a checkpoint stores, once the plugins it needs are found installed; a plugin installed at
    another version than the one that made it is named in one warning line (`warn`), as it may compute
    otherwise (`plugin_changes` says it to callers that refuse instead)."""
    meta = read_checkpoint_meta(path)
    require_plugins(meta.get("plugins", []), str(path), _origin_here)
    changed = plugin_changes(meta.get("plugins"))
    if warn and changed:
        print(f"relreason: warning: {path} was made with the plugin {', '.join(changed)}; its results may not be "
              f"what the installed version computes", file=sys.stderr)
    stored, file = meta.get("config"), Path(path) / CHECKPOINT_CONFIG
    hint = "the checkpoint is damaged: use another one (best/ or last/), or train the run again"
    if not isinstance(stored, dict) or not all(isinstance(stored.get(k), str) for k in ("model_name", "task")):
        raise RelreasonError(f"{file}: field 'config' must be a JSON object naming model_name and task", hint)
    try:
        return config_from_dict(stored)
    except RelreasonError as e:
        raise RelreasonError(f"{file}: {e.message}", hint) from None


def plugin_changes(record: list[dict] | None) -> list[str]:
    """The plugins of a run's record installed here at another version (relreason.plugins.plugin_version_changes)."""
    return plugin_version_changes(record, _origin_here)


def plugin_record(cfg: Config) -> list[dict]:
    """The plugins that a run's model (and a TransNAR's NAR) and its tasks' algorithms come from:
    [{"kind": "model" | "algorithm", "name", "distribution", "version"}], built-ins left out."""
    models = [cfg.model_name]
    nar = getattr(cfg.model, "nar_config", None)
    if nar is not None:
        models.append(nar["config"]["model_name"])
    algorithms = dict.fromkeys(t.algorithm for t in task_entries(cfg.task) if t.algorithm is not None)
    named = [("model", m, model_origin(m)) for m in models] + [("algorithm", a, ALGORITHMS.origin(a))
                                                                for a in algorithms]
    return [{"kind": kind, "name": name, **origin.record()} for kind, name, origin in named if not origin.built_in]


def _origin_here(kind: str, name: str) -> Origin | None:
    """Where the model or algorithm `name` comes from in this installation; None when it is unknown."""
    if kind == "model":
        return model_origin(name) if name in model_names() else None
    return ALGORITHMS.origin(name) if name in ALGORITHMS else None


def load_weights(path: Path, model: torch.nn.Module) -> None:
    """Loads model.safetensors strictly into `model`, naming missing/unexpected keys."""
    file = Path(path) / WEIGHTS
    own = model.state_dict()
    state = read_weights(path, own)
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise RelreasonError(f"{file} does not fit this model: missing {missing[:5]}, unexpected {unexpected[:5]}",
                             "was it written for another model or task?")
    bad = [k for k in own if own[k].shape != state[k].shape]
    if bad:
        raise RelreasonError(f"{file} does not fit this model: shape mismatch in {bad[:5]}",
                             "was it written with another configuration?")
    model.load_state_dict(state, strict=True)


def init_source(target: str | Path) -> Path:
    """The checkpoint directory `train.init` names: a run directory's best/, else the directory itself (a
    checkpoint, an `export` bundle or an `export --hub` folder). Raises RelreasonError when there is none."""
    path = Path(target)
    if not path.is_dir():
        raise RelreasonError(f"--init {target}: {'no such directory' if not path.exists() else 'not a directory'}",
                             "give a run directory (runs/NAME), a checkpoint or an exported folder")
    best = RunDir(path).best
    return best.path if best.config.is_file() else path


def load_init(target: str | Path, cfg: Config, model: torch.nn.Module) -> Path:
    """Loads the weights of the checkpoint `target` (init_source) strictly into `model`, a new run of `cfg`:
    the source must be the same model on tasks of the same shape (its stored config names them; its
    plugins must be installed), and every tensor must fit. Returns the checkpoint read.

    Raises:
        RelreasonError: one line naming --init and what does not fit (model, tasks, keys or shapes)."""
    path = init_source(target)
    try:
        stored = load_config(path)
        if stored.model_name != cfg.model_name:
            raise RelreasonError(f"it holds a {stored.model_name} model, this run trains {cfg.model_name}",
                                 f"fine-tune it as {stored.model_name}, or give a {cfg.model_name} checkpoint")
        load_weights(path, model)
    except RelreasonError as e:
        raise RelreasonError(f"--init {target}: {e.message}", e.hint) from None
    return path


def check_finite(tensors: dict[str, torch.Tensor], file: Path) -> None:
    """Refuses weights (or optimizer moments) holding NaN or infinity: training never saves such a
    tensor (a non-finite loss stops it before the update), so the file is damaged."""
    bad = [k for k, v in tensors.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise RelreasonError(f"{file} is damaged: tensor {bad[0]} holds NaN or infinite values"
                             + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""),
                             "use another checkpoint (best/ or last/), or train the run again")


def read_weights(path: Path, like: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """The tensors of a checkpoint's model.safetensors, read by the guarded reader: a regular file (no
    link, no FIFO), its header checked whole before it is mapped (relreason.files.safetensors_header),
    of the dtypes and shapes of `like` (a model's state dict) when given, and finite (RelreasonError)."""
    file = Path(path) / WEIGHTS
    return _read_tensors(file, "the checkpoint is incomplete; use another one",
                         "use another checkpoint (best/ or last/)", like)


def _read_tensors(file: Path, hint_missing: str, hint: str, like: dict[str, torch.Tensor] | None = None,
                  strict: bool = False) -> dict[str, torch.Tensor]:
    """The tensors of the safetensors `file`, each checked: dtypes and shapes against `like`, values
    finite; a name that `like` lacks is refused with `strict` (else the caller names it). RelreasonError
    naming the file."""
    fd = open_regular(file, hint=hint_missing)
    try:
        header = safetensors_header(fd, file, hint)
        if like is not None:
            _check_like(file, header, like, strict, hint)
        try:
            state = load_file(fd_path(fd, file))
        except (SafetensorError, OSError) as e:
            raise RelreasonError(f"{file} is corrupt: {e}", hint) from None
    finally:
        os.close(fd)
    check_finite(state, file)
    return state


_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
           torch.int64: "I64", torch.int32: "I32", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def _check_like(file: Path, header: dict, like: dict[str, torch.Tensor], strict: bool, hint: str) -> None:
    """Refuses the tensors of `header` ({name: (dtype, shape)}) unless each has the shape and dtype of
    the same name in `like` (weights of another dtype would be cast and scored as the model's), shape
    mismatches named in the model's order; `strict`: a name `like` lacks is refused too."""
    stray = [name for name in header if name not in like]
    if strict and stray:
        raise RelreasonError(f"{file}: tensor {stray[0]!r} belongs to no parameter of this model", hint)
    bad = [name for name, own in like.items() if name in header and tuple(own.shape) != header[name][1]]
    if bad:
        raise RelreasonError(f"{file} does not fit this model: shape mismatch in {bad[:5]} "
                             f"({list(header[bad[0]][1])}, the model's {list(like[bad[0]].shape)})",
                             "was it written with another configuration?")
    for name, own in like.items():
        if name in header and _DTYPES.get(own.dtype) != header[name][0]:
            raise RelreasonError(f"{file} does not fit this model: tensor {name} is {header[name][0]}, the model's "
                                 f"is {_DTYPES.get(own.dtype, own.dtype)}", "was it written for another model, "
                                 "or converted? use the checkpoint relreason wrote")


def verify_checkpoint(path: Path) -> Config:
    """A checkpoint directory whose config.json reads back as a valid config and whose weights load and
    are finite (what `export` checks before copying); returns the config. Raises RelreasonError."""
    cfg = load_config(path)
    like = _model_like(cfg)
    state = read_weights(path, like)
    if like is not None and set(state) != set(like):
        missing, unexpected = sorted(set(like) - set(state)), sorted(set(state) - set(like))
        raise RelreasonError(f"{Path(path) / WEIGHTS} does not fit this model: missing {missing[:5]}, unexpected "
                             f"{unexpected[:5]}", "was it written for another model or task?")
    return cfg


def _model_like(cfg: Config) -> dict[str, torch.Tensor] | None:
    """The state dict of the model `cfg` builds, on the meta device (shapes and dtypes, no memory), so
    that weights are checked against the model they claim to be before `export` bundles them; None
    for a text model, whose weights `eval` checks when it loads them."""
    if find_model(cfg.model_name)[0] is not Family.NAR:
        return None
    meta = torch.device("meta")
    with meta:
        return build_nar(cfg, task_entries(cfg.task), meta).model.state_dict()


def load_optimizer(path: Path, optimizer: torch.optim.Optimizer) -> None:
    """Loads optimizer.safetensors + optimizer.json into `optimizer`, a fresh optimizer of the run's
    config and model. Nothing of the files is trusted: the hyperparameters must be the optimizer's own
    (other betas, eps or weight decay would train on to another result; the learning rate may differ:
    the schedule sets it each step), the parameter ids those of the model, and each moment of its
    parameter's dtype and shape, finite. RelreasonError (one line naming the file and what is wrong)."""
    path = Path(path)
    meta_file = path / OPTIMIZER_META
    hint = "the checkpoint is damaged: start a new run without --resume"
    meta = read_json_object(meta_file, hint)
    own = optimizer.state_dict()
    _check_groups(meta_file, meta, own["param_groups"], hint)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    ids = [pid for group in own["param_groups"] for pid in group["params"]]
    like = {}
    for pid, param in zip(ids, params):
        like.update({f"{pid}.{key}": param for key in _MOMENTS})
        like[f"{pid}.step"] = torch.zeros((), dtype=torch.float32)
    tensors = _read_tensors(path / OPTIMIZER, "start a new run without --resume", hint, like, strict=True)
    stray = sorted(k for k in meta["scalars"] if k.partition(".")[0] not in {str(i) for i in ids})
    if stray:
        raise RelreasonError(f"{meta_file}: scalar {stray[0]!r} belongs to no parameter of this model", hint)
    try:
        optimizer.load_state_dict(_unflatten_optimizer(tensors, meta))
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise RelreasonError(f"{meta_file} does not fit this model's optimizer: {e}", hint) from None


_MOMENTS = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")  # Adam's per-parameter state, shaped as the parameter
_GROUP_KEYS = ("params", "lr", "betas", "eps", "weight_decay")  # what every saved group must hold
_SCHEDULED = ("lr", "initial_lr")  # set by the schedule each step: any positive number may stand in the file


def _check_groups(file: Path, meta: dict, own: list[dict], hint: str) -> None:
    """Refuses optimizer.json's groups unless each matches the run's optimizer `own` (its state_dict's
    param_groups): the same parameter ids and hyperparameters; a scheduled rate finite and positive."""
    if not isinstance(meta.get("scalars"), dict):
        raise RelreasonError(f"{file}: field 'scalars' must be a JSON object", hint)
    groups = meta.get("param_groups")
    if not isinstance(groups, list) or len(groups) != len(own) or not all(isinstance(g, dict) for g in groups):
        raise RelreasonError(f"{file}: field 'param_groups' must be a list of {len(own)} parameter group(s), "
                             f"not {json.dumps(groups)[:40]}", hint)
    for i, (saved, mine) in enumerate(zip(groups, own)):
        where = f"{file}: param_groups[{i}]"
        missing = [k for k in _GROUP_KEYS if k not in saved]
        if missing:
            raise RelreasonError(f"{where} has no {missing[0]!r}", hint)
        for key, value in saved.items():
            if key in _SCHEDULED:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                    raise RelreasonError(f"{where}.{key} must be a positive number, not {json.dumps(value)[:40]}",
                                         hint)
            elif key not in mine:
                raise RelreasonError(f"{where}.{key} is no setting of this run's optimizer", hint)
            elif _plain_value(value) != _plain_value(mine[key]):
                raise RelreasonError(f"{where}.{key} is {json.dumps(value)[:40]}, the run's optimizer has "
                                     f"{json.dumps(_plain_value(mine[key]))}" + (
                                         " (the ids of the model's parameters)" if key == "params" else ""),
                                     "the file was edited or belongs to another run: restore it, or start a new "
                                     "run without --resume")


def _plain_value(value):
    """A hyperparameter as JSON holds it (a tuple as a list) to compare a file's with the optimizer's."""
    return json.loads(json.dumps(value)) if isinstance(value, (tuple, list)) else value


def load_trainer_state(path: Path) -> dict:
    """The loop's counters in the checkpoint `path`, validated (relreason.rundir.TrainerState): a
    missing, ill-typed or out-of-range field is a one-line RelreasonError naming the file and field."""
    file = Path(path) / TRAINER_STATE
    hint = "the checkpoint is damaged: restore it, or start a new run without --resume"
    return TrainerState.from_dict(read_object(file, hint), str(file)).to_dict()
