"""The YAML recipes, shipped inside the wheel as the package data of `relreason.recipes` (see config.py)."""
