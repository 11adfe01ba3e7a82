"""`max-gnn-vs-mpnn`: the example processor beside relreason's MPNN, each with its paper recipe.

    relreason ablate max-gnn-vs-mpnn --seeds 3
"""

from relreason.studies.ablations import register_ablation
from relreason.studies.variants import Variant

register_ablation("max-gnn-vs-mpnn", "the example plugin's max_gnn vs the built-in MPNN",
                  Variant("max_gnn", "max_gnn"), Variant("mpnn", "mpnn"), tasks="bellman_ford")
