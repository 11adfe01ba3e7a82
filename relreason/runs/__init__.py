"""Runs: what finished and unfinished trainings left on disk, read back, pooled over seeds, compared and drawn.

The modules, by concern (the run directory's files themselves are relreason.rundir's):

- `records`: one run as a record (RunInfo, Status, read_run, read_ablation);
- `discovery`: finding runs under a folder and the runs a command line names (discover_runs, load_runs);
- `grouping`: seeds of one setting pooled as one experiment (group_runs; settings: relreason.protocol);
- `stats`: statistics over seeds (Summary: mean ± sample std, 95% intervals; `difference`: Welch's
  comparison of two figures, the verdict of every table);
- `comparison`: the comparison table's content (compare, GroupBy, Cell);
- `run_tables`: the `relreason runs` listing and the comparison's renderings (runs_table, render_comparison);
- `plot`: matplotlib figures (learning curves, ablation bars, scores against size);
- `svg`: line charts as inline SVG text for `relreason report`'s page.

What a score means (its metric, unit and direction) is relreason.eval.metric_kinds: runs are read with it.
"""
