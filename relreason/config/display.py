"""Showing a resolved configuration (`--print-config`): `config_yaml`, with each key's source or the
reason written beside its default (`field_comments`).

    print(config_yaml(cfg, sources=True))   # "  lr: 0.001  # default: reference Adam learning rate"
"""

from __future__ import annotations

import inspect
import re

import yaml

from relreason.config.schema import Config


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
    """The `# reason` comment written beside each field's default in a config dataclass or the dataclass it
    extends (a subclass's own comment wins)."""
    out = {}
    for klass in reversed(cls.__mro__[:-1]):  # base classes first, `object` left out
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        for line in source.splitlines():
            m = re.match(r"^\s+(\w+)\s*:[^=#]+=[^#]*#\s?(.*)$", line)
            if m:
                out[m.group(1)] = m.group(2).strip()
    return out


__all__ = ["config_yaml", "field_comments"]
