"""An example relreason plugin: relreason finds its parts through the entry points of pyproject.toml.

- `processors`: `max_gnn`, a tiny max-aggregation GNN over the adjacency;
- `algorithms`: `running_max`, for every position the index of the largest key so far, with hints;
- `recipes/`: `max_gnn.yaml`, the processor's own protocol (its paper recipe);
- `ablations`: `max-gnn-vs-mpnn`, the processor beside relreason's MPNN.

This package imports nothing from here on purpose: relreason imports each module when it needs it.
"""
