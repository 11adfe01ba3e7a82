"""The papers' tables as data (registry TABLES): `relreason reproduce TABLE` runs their cells at the paper's protocol.

One declarative entry per table (a `relreason.studies.variants.Study` with the "protocol" cell layout):
where it is printed, its columns (model x the recipe that is the paper's protocol for it), its tasks,
and the published mean, "±" (with what the paper says it is: a std, a standard error, or undefined) and
seed count per cell (relreason.studies.figures); the verdicts' equivalence margin is the Study's
(1 point unless it declares one).

    relreason reproduce --list
    relreason reproduce rt-table19 --models rt --tasks bellman_ford --seeds 1
    relreason reproduce clrs30 --models mpnn --tasks bellman_ford --seeds 3 --jobs 2

Tables 13-17 of the RT paper are the ablations `relreason ablate` knows (relreason.studies.ablations),
laid out as tables here: the same variants, figures and machinery.
"""

from __future__ import annotations

import dataclasses

from relreason.registry import Registry
from relreason.runs.stats import Spread
from relreason.studies.ablations import ABLATIONS
from relreason.studies.figures import (CLRS30_AVERAGES, IBARZ, IBARZ_AVERAGE, IBARZ_TABLE2, IBARZ_TABLE2_COLUMNS,
                                       RT_PAPER, RT_SEEDS, RT_TABLE9, RT_TABLE9_COLUMNS, RT_TABLE19,
                                       RT_LOBSTER, RT_LOBSTER_MARGIN, RT_TABLE19_AVERAGES,
                                       RT_TABLE19_COLUMNS)
from relreason.studies.variants import Published, Study, Variant

TABLES: Registry[Study] = Registry("table", "relreason reproduce --list")

# -- RT paper (Diao & Loynd, ICLR 2023) -----------------------------------------------------------------------
_RT_MODELS = {"deep sets": "deepsets", "gat-v1": "gat", "gat-v2": "gatv2", "mpnn": "mpnn", "pgn-u": "pgn",
              "pgn-m": "pgn_masked", "rt": "rt"}  # the RT paper's column -> our model
TABLES.register("rt-table19", Study(
    "rt-table19", "RT paper Table 19: tuned models on the 30 CLRS-30 algorithms (OOD test, n=64)",
    tuple(Variant(label, _RT_MODELS[label], recipe="rt" if label == "rt" else "rt_table2")
          for label in RT_TABLE19_COLUMNS),
    tasks="clrs30", source=f"{RT_PAPER}, Table 19 (means) and Table 18 (std)",
    figures={(label, task): Published(*row[i], RT_SEEDS, Spread.STD) for task, row in RT_TABLE19.items()
             for i, label in enumerate(RT_TABLE19_COLUMNS)},
    averages={label: Published(avg, None, RT_SEEDS) for label, avg in zip(RT_TABLE19_COLUMNS, RT_TABLE19_AVERAGES)},
    paper_scope="mean over the 30 algorithms", layout="protocol",
    note="every model at the RT paper's protocol: batch 4, 10,000 training samples, 320,000 examples; baselines "
         "with their Table 2 tuned hyperparameters (relreason/recipes/rt_table2.yaml), the RT with its authors' run.py "
         "(relreason/recipes/rt.yaml); PGN-c (best of PGN-u and PGN-m per task) is not a model and has no cells"))

TABLES.register("rt-table9", Study(
    "rt-table9", "RT paper Table 9: untuned baselines trained on 1,000 vs 10,000 samples (core 8)",
    tuple(Variant(f"{label} ({size:,} samples)", _RT_MODELS[label], {"data": {"train_num": size}}, recipe="rt_untuned")
          for size in RT_TABLE9 for label in RT_TABLE9_COLUMNS),
    tasks="core8", source=f"{RT_PAPER}, Table 9",
    averages={f"{label} ({size:,} samples)": Published(avg, None, RT_SEEDS)
              for size, avgs in RT_TABLE9.items() for label, avg in zip(RT_TABLE9_COLUMNS, avgs)},
    paper_scope="mean over the 8 core tasks (the paper prints no per-task figures)",
    layout="protocol", note="the RT authors' untuned baseline settings (relreason/recipes/rt_untuned.yaml)"))

for _table, _ablation in (("rt-table13", "no-edges"), ("rt-table14", "single-layer"),
                          ("rt-table15", "node-ptr-decoding"), ("rt-table16", "core-node"),
                          ("rt-table17", "no-edge-updates")):
    _a = ABLATIONS.get(_ablation)
    TABLES.register(_table, dataclasses.replace(
        _a, name=_table, description=f"RT paper {_a.source.split(', ')[-1]}: {_a.description}",
        layout="protocol", note=f"the ablation `relreason ablate {_ablation}` as a table, cells shared with "
                                "every table of the same configuration"))

# -- CLRS-30 (Veličković et al., ICML 2022) and Ibarz et al. (LoG 2022) ---------------------------------------
TABLES.register("clrs30", Study(
    "clrs30", "CLRS-30 paper baselines (Veličković et al. 2022) on the 30 algorithms, as Ibarz et al. quote them",
    (Variant("mpnn", "mpnn", recipe="clrs30"),
     Variant("pgn", "pgn", recipe="clrs30")),  # the release's adjacency-product maximum (relreason/recipes/clrs30.yaml)
    tasks="clrs30", source=f"Veličković et al. 2022, quoted in {IBARZ}",
    figures={(label, task): Published(*row[IBARZ_TABLE2_COLUMNS.index(label)], 3, Spread.UNDEFINED)
             for task, row in IBARZ_TABLE2.items() for label in CLRS30_AVERAGES},
    averages={label: Published(avg, None, 3) for label, avg in CLRS30_AVERAGES.items()},
    paper_scope="mean over the 30 algorithms", layout="protocol",
    note="the published ± is not defined in Ibarz et al.'s captions; the CLRS-30 paper's per-algorithm tables "
         "for Deep Sets and GAT were not found (no columns for them); the string matchers train and test on "
         "the CLRS30 v1.0.0 dataset's splits (20 and 80 nodes), as the paper's code read them, and quickselect "
         "without the pivot hint, which v1 did not record"))
TABLES.register("ibarz2022", Study(
    "ibarz2022", "Triplet-GMPNN single-task (Ibarz et al. 2022) on the 30 algorithms",
    (Variant("triplet-gmpnn", "triplet_gmpnn", recipe="triplet_gmpnn"),),
    tasks="clrs30", source=IBARZ,
    figures={("triplet-gmpnn", task): Published(*row[IBARZ_TABLE2_COLUMNS.index("triplet-gmpnn")], 10,
                                                   Spread.UNDEFINED)
             for task, row in IBARZ_TABLE2.items()},
    averages={"triplet-gmpnn": Published(IBARZ_AVERAGE, None, 10)}, paper_scope="mean over the 30 algorithms",
    layout="protocol", note="the published ± is not defined in the paper's captions (its Fig. 2 bars are standard "
                            "errors); 10 seeds; the string matchers are tested on the CLRS30 v1.0.0 archive's split "
                            "(80 nodes), as run.py read it (relreason/recipes/triplet_gmpnn.yaml)"))

# -- Mueller et al. (NeurIPS 2024): the Edge Transformer on CLRS-30 -----------------------------------------
TABLES.register("mueller2024", Study(
    "mueller2024", "Edge Transformer on the 30 algorithms at Mueller et al.'s protocol (relreason/recipes/et.yaml)",
    (Variant("et", "et", recipe="et"),), tasks="clrs30",
    source="Mueller et al. 2024, \"Towards Principled Graph Transformers\" (its per-algorithm CLRS figures "
           "could not be read here: none are printed beside ours)", layout="protocol",
    note="the protocol is the authors' CLRS fork's defaults (ksmdnl/clrs 42a5de5), see relreason/recipes/et.yaml"))

# -- RT paper: end-to-end shortest paths on lobster graphs (its Table 6 protocol for the RT) ---------------------
TABLES.register("rt-lobster", Study(
    "rt-lobster", "RT paper: end-to-end shortest-path distance on lobster graphs (relative loss, lower is better)",
    (Variant("rt", "rt", recipe="lobster_rt"), Variant("gat", "gat", recipe="lobster_gat"),
     Variant("gcn", "gcn", recipe="lobster_gcn")), tasks="lobster",
    source=f"{RT_PAPER}, the lobster experiment (30 layers, 20 seeds; the figures as this project's reference notes "
           "record them: the paper's table number was not re-read here)",
    figures={(label, "lobster"): Published(loss, None, RT_SEEDS, Spread.STD) for label, loss in RT_LOBSTER.items()},
    layout="protocol", margin=RT_LOBSTER_MARGIN,
    note="the RT at its Table 6 values (relreason/recipes/lobster_rt.yaml); the paper states neither batch size nor "
         "training length, and not the baselines' tuned values (each recipe's deviation line says what ours are); "
         "relative loss |y - y_hat| / |y| on backbones of 100 nodes"))

# -- today's strongest processors (issue 31): no figure of theirs at a protocol we can run -----------------------
TABLES.register("new-processors", Study(
    "new-processors", "FloydNet, RNAR and G-ForgetNet at Triplet-GMPNN's protocol (relreason/recipes/floydnet.yaml, "
                      "rnar.yaml, g_forgetnet.yaml)",
    (Variant("floydnet", "floydnet", recipe="floydnet"), Variant("rnar", "rnar", recipe="rnar"),
     Variant("g-forgetnet", "g_forgetnet", recipe="g_forgetnet")), tasks="core8",
    source="Yu et al. 2026 (arXiv 2601.19094), Xu & Veličković 2024 (arXiv 2409.07154), Bohde et al. ICLR 2024: "
           "no per-algorithm figure at a protocol these recipes can run was found (each recipe's deviation line "
           "says what could not be read), so none is printed beside ours",
    layout="protocol",
    note="each recipe is Triplet-GMPNN's Ibarz et al. protocol with the processor's own defaults (the papers' "
         "protocols could not be read here); ours stand alone, with no published figure to compare"))

# -- TransNAR (Bounsi et al. 2024): its headline claim, at a reduced scale (issue 39) --------------------------
# The claim: a text transformer cross-attending to a pre-trained NAR generalises out of distribution where the
# same transformer alone does not. The paper reports TransNAR ahead on most algorithms, not on binary_search,
# find_maximum_subarray, minimum and quickselect: these four are from the rest, one per family (sorting, graphs,
# greedy, strings), each cheap in text. The columns differ in the NAR alone (tests/studies/test_transnar_ood.py).
TRANSNAR_OOD_TASKS = "text:insertion_sort,text:bfs,text:activity_selector,text:naive_string_matcher"
TABLES.register("transnar-ood", Study(
    "transnar-ood", "REDUCED-SCALE study of TransNAR's claim, not the paper's protocol: the same 0.81M-parameter "
                    "text transformer and budget with and without a pre-trained NAR, scored in (n=12) and out of "
                    "(n=10, 14) distribution (relreason/recipes/transnar_ood.yaml)",
    (Variant("transnar", "transnar", recipe="transnar_ood",
             nar=Variant("triplet-gmpnn nar", "triplet_gmpnn", recipe="transnar_ood_nar")),
     Variant("text transformer", "transnar", {"model": {"use_nar": False}}, recipe="transnar_ood")),
    tasks=TRANSNAR_OOD_TASKS, seeds=3, layout="protocol",
    source="Bounsi et al. 2024, \"Transformers meet Neural Algorithmic Reasoners\" (arXiv 2406.09308): its "
           "per-algorithm figures could not be read here, none is printed beside ours",
    note="a reduced-scale test of the paper's claim, not its protocol (a 70M-parameter model trained on all "
         "algorithms at once with a NAR trained on all of CLRS-30): one 0.81M-parameter model per algorithm, "
         "64,000 examples, a Triplet-GMPNN pre-trained per algorithm and seed "
         "(relreason/recipes/transnar_ood_nar.yaml) and read by the TransNAR cell of that algorithm and seed; --set nar.SECTION.KEY=VALUE sets the NAR cells"))
