"""Strict YAML: what recipes and `--set` values are read with (`load_yaml`).

    load_yaml("train: {lr: 1e-4}")  ->  {"train": {"lr": 0.0001}}

Safe loading (no `!!python` tags) that also refuses a key given twice in one mapping (plain YAML keeps
the last silently) and aliases that expand past MAX_YAML_NODES values (a few lines of anchors can
otherwise stand for billions).
"""

from __future__ import annotations

from typing import Any

import yaml

from relreason.files import MAX_INT_DIGITS

MAX_YAML_NODES = 100_000  # a recipe holds a few hundred values; aliases may not expand it beyond this


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


__all__ = ["MAX_YAML_NODES", "load_yaml"]
