"""Studies: published tables and ablations as grids of cells (column x task x seed), one machinery.

A study is a set of columns (`Variant`: a model, the recipe that is its protocol, and a config
delta), the tasks it runs on and, where a paper printed them, the published figures per column and
task. `relreason ablate NAME` and `relreason reproduce TABLE` both run one through `run_study`, and
print and write its table the same way. The modules, by concern:

- `variants`: what a study declares (Variant, Published, Study);
- `cells`: its cells planned (every resolved config before anything trains), their state on disk
  (done, partial, stale, new) and the finished ones read back into one result format;
- `training`: the cells trained here or in `--jobs` worker processes, each claimed with its run lock;
- `sweep`: `SweepOptions` (what the two commands ask for, built once and passed down), `run_study` (plan,
  shard, refuse stale cells, train, collect) and the two commands' core functions, `run_ablation` and
  `run_table`, which also write the tables;
- `costs`: what cells cost, predicted from the measured cells shipped in costs.json (printed before a
  study trains, by `ablate --list` and on the progress bar across cells);
- `report`: the one table of a study's result (ours beside the published figures), the per-size
  text table, the files written (CSV, JSON, Markdown) and what the commands print;
- `figures`: the papers' published numbers, with their sources;
- `ablations` (registry ABLATIONS) and `tables` (registry TABLES): the studies `ablate` and
  `reproduce` know.
- `results`: the result files `relreason results` copies from finished cells (and `reproduce --verify`
  re-trains against), read back; `results_report`: RESULTS.md from them, and the sections the HTML page of
  `html_report` shows;
"""
