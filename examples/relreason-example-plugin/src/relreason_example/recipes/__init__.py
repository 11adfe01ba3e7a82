"""The example plugin's recipes: every *.yaml file here becomes a recipe (entry point relreason.recipes)."""
