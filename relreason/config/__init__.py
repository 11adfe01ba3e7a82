"""Typed configuration, resolved from layers and auditable line by line.

    cfg = build_config("rt", "bellman_ford", recipe="quick", overrides=["train.lr=1e-4"])
    print(config_yaml(cfg, sources=True))

One module per job, every public name importable from here:
- relreason.config.schema: the `Config` of a run's sections, `TrainConfig`, range checks (`validate`);
- relreason.config.recipes: the recipes that exist, finding and reading one, the paper recipe of a model;
- relreason.config.strict_yaml: the YAML recipes and `--set` values are read with;
- relreason.config.resolve: the layers (defaults < model < task < recipe < ablation < --set) resolved
  into a validated `Config`, each key's source recorded;
- relreason.config.display: `--print-config`'s YAML.
"""

from relreason.config.display import config_yaml, field_comments
from relreason.config.recipes import (MAX_RECIPE_BYTES, PAPER, RECIPE_DIR, RECIPE_KEYS, RECIPES, find_recipe,
                                      paper_recipe, read_recipe, read_recipe_text, recipe_deviation, recipe_names)
from relreason.config.resolve import (MULTITASK, Layer, apply_updates, build_config, config_from_dict, keys_of, merge,
                                      parse_overrides, recipe_layers, resolve, run_deviation)
from relreason.config.schema import PRECISIONS, SECTIONS, Config, TrainConfig, to_plain, validate
from relreason.config.strict_yaml import MAX_YAML_NODES, IntegerTooLong, load_yaml
# the `data:` sections stand lower in the house (tasks read them too); they are named here as well, as
# part of the configuration
from relreason.data.config import ClrsDataConfig, DataStream, LobsterDataConfig, TextDataConfig

__all__ = ["Config", "TrainConfig", "SECTIONS", "PRECISIONS", "to_plain", "validate",
           "RECIPE_DIR", "RECIPES", "RECIPE_KEYS", "PAPER", "find_recipe", "recipe_names", "read_recipe",
           "recipe_deviation", "paper_recipe", "read_recipe_text", "MAX_RECIPE_BYTES",
           "MAX_YAML_NODES", "IntegerTooLong", "load_yaml",
           "Layer", "MULTITASK", "recipe_layers", "run_deviation", "apply_updates", "parse_overrides", "merge",
           "keys_of", "build_config", "resolve", "config_from_dict",
           "config_yaml", "field_comments",
           "ClrsDataConfig", "DataStream", "LobsterDataConfig", "TextDataConfig"]
