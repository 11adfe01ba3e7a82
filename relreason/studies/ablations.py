"""Named ablations from the papers: a base configuration plus a delta per variant (registry ABLATIONS).

    relreason ablate no-edge-updates --tasks core8 --seeds 3

runs every (task, variant, seed) cell through the same `relreason.train.run` that `train` uses,
with the paper recipe of each variant's model unless `--recipe` is given, stores each cell under
`OUT/<ablation>/<variant>/<task>/seed<k>/run/`, and tabulates test scores per task as mean ± sample
std beside the paper's per-task figures (relreason.studies.sweep.run_ablation).

A finished cell is read back only when its stored resolved config (budget, recipe, overrides) and
spec hash equal what the cell would train now; a cell computed under another configuration is
never mixed in: `ablate` refuses with a hint, and `--rerun-stale` moves it aside and trains it again.
"""

from __future__ import annotations

from relreason.registry import Registry
from relreason.runs.stats import Spread
from relreason.studies.figures import CORE8_MEAN, RT_ABLATION_TABLES, RT_FIGURES, RT_PAPER, RT_SEEDS
from relreason.studies.variants import Published, Study, Variant

ABLATIONS: Registry[Study] = Registry("ablation", "relreason list ablations")


def register_ablation(name: str, description: str, *variants: Variant, tasks: str = "core8", source: str = "",
                      figures: dict | None = None, averages: dict | None = None, paper_scope: str = "",
                      not_comparable: dict | None = None) -> None:
    ABLATIONS.register(name, Study(name, description, tuple(variants), tasks, source, figures or {}, averages or {},
                                   paper_scope, not_comparable or {}))


_RT = Variant("rt", "rt")


def _rt_ablation(name: str, description: str, variant: Variant, table: int, tasks: str = "core8",
                 paper_scope: str = CORE8_MEAN) -> None:
    """One of the RT paper's Tables 13-17: the RT beside `variant`, with both columns' published figures (mean ±
    std over 20 seeds, as the tables' captions and its Appendix D say)."""
    column, (rt_average, average) = RT_ABLATION_TABLES[table]
    figures = {(_RT.label, t): Published(*RT_FIGURES[t], RT_SEEDS, Spread.STD) for t in column}
    figures.update({(variant.label, t): Published(m, s, RT_SEEDS, Spread.STD) for t, (m, s) in column.items()})
    register_ablation(name, description, _RT, variant, tasks=tasks, source=f"{RT_PAPER}, Table {table}",
                      figures=figures, paper_scope=paper_scope,
                      averages={_RT.label: Published(rt_average, None, RT_SEEDS),
                                variant.label: Published(average, None, RT_SEEDS)})


_rt_ablation("no-edge-updates", "RT with vs without edge updates",
             Variant("rt without edge updates", "rt", {"processor": {"edge_updates": False}}), 17)
_rt_ablation("no-edges", "RT vs a standard transformer without edge vectors or edge features",
             Variant("transformer", "transformer", caveat="the paper re-tuned this baseline; its tuned values are not "
                     "published, ours keeps the RT's (relreason/recipes/transformer.yaml)"), 13)
_rt_ablation("single-layer", "RT with its 3 layers per step vs a single layer",
             Variant("rt 1 layer", "rt", {"processor": {"layers": 1}}, caveat="the paper re-tuned the single-layer RT; "
                     "its tuned values are not published, ours keeps the RT's"), 14)
_rt_ablation("core-node", "RT global vector tiled onto inputs (cat, the paper's choice) vs an extra core node",
             Variant("rt core node", "rt", {"processor": {"global_vector": "core"}}), 16,
             tasks="binary_search,find_maximum_subarray_kadane,graham_scan,heapsort,kmp_matcher,mst_kruskal,"
                   "task_scheduling", paper_scope="mean test score over the 7 tasks of Table 16 (n=64)")
_rt_ablation("node-ptr-decoding", "RT pointers decoded from edges vs from node pairs",
             Variant("rt node pointers", "rt", {"model": {"pointer_decoding": "node"}}), 15)

_ET = Variant("et", "et")  # the paper recipe: Mueller et al.'s protocol, whose 3 layers are untied
register_ablation("et-untied", "Edge Transformer with tied vs untied layers",
                  Variant("et tied", "et", {"processor": {"tied": True}}),
                  Variant("et untied", "et", {"processor": {"tied": False}}))
register_ablation("et-value-ablation", "Edge Transformer value from e_xl * e_ly vs from e_xl only", _ET,
                  Variant("et value from e_xl", "et", {"processor": {"value_ablation": True}}))
register_ablation("et-attention-ablation", "Edge Transformer key from e_ly vs from e_xy", _ET,
                  Variant("et key from e_xy", "et", {"processor": {"attention_ablation": True}}))
_DAT = Variant("dat", "dat")
register_ablation("dat-asymmetric", "Dual Attention Transformer with symmetric vs asymmetric relations",
                  Variant("dat symmetric", "dat", {"processor": {"symmetric_relations": True}}),
                  Variant("dat asymmetric", "dat", {"processor": {"symmetric_relations": False}}))
register_ablation("dat-symbols", "Dual Attention Transformer symbol kinds",
                  Variant("symbolic attention", "dat", {"processor": {"symbols": "symbolic_attention"}}),
                  Variant("positional", "dat", {"processor": {"symbols": "positional"}}),
                  Variant("position-relative", "dat", {"processor": {"symbols": "position_relative"}}))
# The paper's single-kind baselines keep the total head count: 8 heads of one kind instead of 4 + 4.
register_ablation("dat-relational-only", "Dual Attention Transformer vs relational heads only (8 of them)", _DAT,
                  Variant("dat relational only", "dat", {"processor": {"n_heads_sa": 0, "n_heads_ra": 8}}))
register_ablation("dat-sensory-only", "Dual Attention Transformer vs sensory heads only (8: a transformer)", _DAT,
                  Variant("dat sensory only", "dat", {"processor": {"n_heads_sa": 8, "n_heads_ra": 0}}))
# TransNAR (Bounsi et al. 2024): the paper's comparison is TransNAR against the same text transformer trained
# on the same CLRS-Text data; it reports TransNAR better on most algorithms in and out of distribution, mostly by
# getting the output's shape right, but not on binary_search, find_maximum_subarray, minimum and quickselect.
# Both need the frozen NAR: --set model.nar=runs/NAME. Cells keep per-size shape/parse/CLRS in `per_task`.
# `relreason reproduce transnar-ood` is the first as a study that pre-trains a NAR per algorithm and seed itself.
_TRANSNAR = Variant("transnar", "transnar")
register_ablation("transnar-vs-text", "TransNAR vs the same text transformer without the NAR (same data and budget)",
                  _TRANSNAR, Variant("text transformer", "transnar", {"model": {"use_nar": False}}))
register_ablation("transnar-nodes-only", "TransNAR cross-attending to NAR nodes and edges vs to nodes only",
                  _TRANSNAR, Variant("transnar nodes only", "transnar", {"model": {"nodes_only": True}}))
ABLATIONS.accept_plugins("relreason.ablations")  # the built-ins are all in: installed plugins may add theirs
