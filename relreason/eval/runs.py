"""Runs as records: find the run directories under a folder (ablation cells included), read what
each holds, tell finished from running from interrupted, and aggregate seeds as mean ± std.

    from relreason.eval.runs import compare, discover_runs, render_comparison
    runs = discover_runs("runs")                  # newest first
    cmp = compare(runs, group_by="task")          # tasks as rows, models side by side
    print(render_comparison(cmp, "md"))

`relreason runs | compare | plot` are thin layers over these names, gathered here from the modules
that hold one concern each:

    relreason.rundir             the run directory: layout and the validated records of its files
    relreason.eval.metric_kinds  what a score means: unit and direction (Metric, METRICS)
    relreason.eval.records       one run as a record (RunInfo, Status, read_run)
    relreason.eval.discovery     finding runs under a folder (discover_runs, load_runs)
    relreason.eval.grouping      seeds of one setting pooled (group_runs; settings: relreason.protocol)
    relreason.eval.comparison    the comparison table's content (compare, GroupBy, Cell)
    relreason.eval.run_tables    the `runs` listing and the renderings (runs_table, render_comparison)
"""

from __future__ import annotations

from relreason.eval.comparison import Cell, Comparison, GroupBy, compare, parse_group_by
from relreason.eval.discovery import discover_runs, load_runs, sort_runs
from relreason.eval.grouping import Group, group_runs
from relreason.eval.metric_kinds import METRICS, UNKNOWN_METRIC, Metric, MetricLookup, format_score, resolve_metric
from relreason.eval.records import RunInfo, Status, is_run_dir, read_ablation, read_run, run_status
from relreason.eval.run_tables import (RUN_COLUMNS, Format, comparison_table, format_age, parse_format,
                                       render_comparison, run_rows, runs_table)
from relreason.eval.stats import Summary as Stat
from relreason.rundir import read_metrics, validations as validation_records

__all__ = ["Metric", "METRICS", "UNKNOWN_METRIC", "MetricLookup", "resolve_metric", "format_score", "Status",
           "RunInfo", "read_metrics", "validation_records", "run_status", "is_run_dir", "read_run", "discover_runs",
           "load_runs", "sort_runs", "runs_table", "run_rows", "RUN_COLUMNS", "GroupBy", "parse_group_by", "Format",
           "parse_format", "Stat", "Cell", "Group", "group_runs", "Comparison", "compare", "comparison_table",
           "render_comparison", "read_ablation", "format_age"]
