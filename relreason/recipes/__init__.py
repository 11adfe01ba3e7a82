"""The YAML recipes, shipped inside the wheel as the package data of `relreason.recipes` (read from relreason.runtime.recipe_dir)."""
