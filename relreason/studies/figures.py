"""The papers' published figures, as `../shared/published-tables.md` records them, with their sources.

Numbers only, copied from the papers: per table, per column and task, the mean with its std and
seed count where printed, and the averages the papers print. The studies that set ours beside them
(relreason.studies.ablations, relreason.studies.tables) read them from here; ours are never typed
anywhere: they come from the cells' result files.
"""

from __future__ import annotations

# -- Diao & Loynd, "Relational Attention: Generalizing Transformers for Graph-Structured Tasks" (ICLR 2023) --
RT_PAPER = "Diao & Loynd 2023"
RT_SEEDS = 20  # every RT-paper figure is over 20 seeds (its Appendix D)
CORE8_MEAN = "mean test score over the 8 core tasks (n=64)"  # what most of its averages average over
# The RT column of Tables 13-17 (and Table 19 with Table 18's std), task by task: mean, std (20 seeds).
RT_FIGURES = {
    "activity_selector": (87.72, 2.7), "bellman_ford": (94.24, 1.5), "binary_search": (81.48, 6.7),
    "find_maximum_subarray_kadane": (66.52, 3.7), "graham_scan": (74.15, 7.4), "insertion_sort": (89.43, 9.0),
    "matrix_chain_order": (91.89, 1.2), "naive_string_matcher": (65.01, 32.3),  # Tables 13-17 print "32.", Table 18 32.3%
    "heapsort": (32.96, 14.8), "kmp_matcher": (0.03, 0.1), "mst_kruskal": (64.91, 11.8), "task_scheduling": (82.93, 1.8),
}

# The RT authors' fork is built on CLRS v1, whose data differ from the CLRS-30 (v2.0) splits for the string matchers
# and quickselect: the RT recipes reproduce both (data.matcher_v1_splits, model.drop_hints; relreason/recipes/rt.yaml),
# so every task of the RT tables compares.

# The lobster experiment (end-to-end shortest-path distance, Tang et al.'s lobster graphs, 30 layers, 20 seeds):
# relative loss, lower is better, as ../shared/clrs-reference.md records it (no spread printed).
RT_LOBSTER = {"rt": 0.22, "gat": 0.28, "gcn": 0.45}
RT_LOBSTER_MARGIN = 0.02  # relative loss: the verdicts' equivalence margin, a tenth of the RT's figure

# Tables 13-17: the ablated RT's column, task: (mean, std) over 20 seeds, and the paper's two averages
# (the RT's, the ablated RT's) over the table's tasks (n=64).
RT_ABLATION_TABLES = {
    13: ({  # a standard transformer: no edge vectors, no edge features
        "activity_selector": (68.01, 6.0), "bellman_ford": (39.79, 2.4), "binary_search": (2.84, 0.6),
        "find_maximum_subarray_kadane": (26.60, 6.0), "graham_scan": (58.84, 6.9), "insertion_sort": (60.57, 15.7),
        "matrix_chain_order": (80.54, 6.8), "naive_string_matcher": (1.51, 1.7)}, (81.30, 42.34)),
    14: ({  # a single RT layer per step
        "activity_selector": (83.41, 5.8), "bellman_ford": (93.52, 1.7), "binary_search": (61.61, 15.1),
        "find_maximum_subarray_kadane": (65.07, 4.0), "graham_scan": (74.80, 7.9), "insertion_sort": (77.54, 10.3),
        "matrix_chain_order": (91.05, 1.0), "naive_string_matcher": (16.50, 23.2)}, (81.30, 70.44)),
    15: ({  # pointers decoded from node pairs
        "activity_selector": (88.09, 5.0), "bellman_ford": (94.95, 1.1), "binary_search": (80.06, 6.6),
        "find_maximum_subarray_kadane": (67.44, 3.7), "graham_scan": (75.71, 10.3), "insertion_sort": (71.32, 11.0),
        "matrix_chain_order": (92.12, 0.9), "naive_string_matcher": (78.43, 22.5)}, (81.30, 81.00)),
    16: ({  # an extra core node instead of the global vector tiled onto the inputs
        "binary_search": (75.40, 11.0), "find_maximum_subarray_kadane": (66.96, 4.5), "graham_scan": (71.83, 10.2),
        "heapsort": (30.67, 18.9), "kmp_matcher": (0.02, 0.0), "mst_kruskal": (75.59, 5.8),
        "task_scheduling": (83.09, 1.8)}, (57.57, 57.65)),
    17: ({  # no edge updates
        "activity_selector": (82.13, 7.0), "bellman_ford": (91.03, 2.3), "binary_search": (60.29, 12.5),
        "find_maximum_subarray_kadane": (19.09, 1.6), "graham_scan": (69.19, 7.7), "insertion_sort": (22.30, 8.5),
        "matrix_chain_order": (85.68, 1.5), "naive_string_matcher": (2.22, 0.8)}, (81.30, 53.99)),
}

# Table 19 (means; Table 18 holds their std): tuned models on the 30 algorithms. PGN-c (the better of PGN-u
# and PGN-m per task) is not a model and is left out.
RT_TABLE19_COLUMNS = ("deep sets", "gat-v1", "gat-v2", "mpnn", "pgn-u", "pgn-m", "rt")
RT_TABLE19 = {  # task: one (Table 19 mean, Table 18 std) per column of RT_TABLE19_COLUMNS
    "activity_selector": ((72.22, 1.7), (68.89, 1.4), (67.45, 2.1), (95.45, 1.3), (67.05, 2.6), (69.83, 1.9), (87.72, 2.7)),
    "articulation_points": ((38.5, 6.0), (31.46, 8.0), (31.96, 6.3), (46.21, 6.1), (46.87, 3.5), (49.73, 7.5), (34.15, 14.6)),
    "bellman_ford": ((51.0, 2.4), (93.1, 1.5), (93.75, 1.6), (95.42, 1.9), (95.83, 0.9), (95.43, 1.3), (94.24, 1.5)),
    "bfs": ((98.14, 1.0), (99.76, 0.4), (99.49, 0.4), (99.78, 0.2), (99.71, 0.3), (99.27, 0.5), (99.14, 0.7)),
    "binary_search": ((55.77, 3.8), (17.21, 5.8), (31.11, 7.9), (38.0, 5.0), (61.71, 10.4), (87.03, 3.7), (81.48, 6.7)),
    "bridges": ((36.2, 4.8), (22.9, 6.4), (24.07, 8.0), (61.29, 17.8), (44.72, 11.0), (57.15, 7.8), (37.88, 11.8)),
    "bubble_sort": ((65.03, 3.1), (9.69, 2.5), (8.46, 1.3), (13.14, 5.0), (7.54, 1.9), (2.05, 0.2), (38.22, 13.0)),
    "dag_shortest_paths": ((77.98, 3.8), (86.44, 2.3), (89.35, 2.2), (97.33, 1.6), (96.23, 3.2), (98.16, 0.9), (96.61, 1.6)),
    "dfs": ((7.62, 1.9), (11.71, 2.1), (12.08, 1.7), (13.85, 2.7), (10.78, 1.5), (8.88, 1.5), (39.23, 10.5)),
    "dijkstra": ((44.51, 3.6), (61.42, 9.5), (68.1, 7.1), (92.18, 4.3), (78.45, 11.0), (90.02, 3.4), (91.2, 5.8)),
    "find_maximum_subarray_kadane": ((12.29, 1.5), (15.19, 2.4), (14.8, 2.1), (16.14, 2.9), (16.71, 1.6), (51.3, 15.0), (66.52, 3.7)),
    "floyd_warshall": ((6.24, 4.2), (30.53, 6.0), (37.58, 3.7), (28.81, 4.7), (27.6, 4.8), (39.24, 2.5), (31.59, 7.6)),
    "graham_scan": ((64.48, 3.3), (65.05, 6.6), (67.07, 5.3), (95.31, 1.4), (67.89, 5.7), (64.66, 6.0), (74.15, 7.4)),
    "heapsort": ((72.39, 8.8), (9.9, 3.8), (7.65, 4.1), (27.08, 7.1), (17.88, 8.9), (1.6, 0.4), (32.96, 14.8)),
    "insertion_sort": ((72.88, 1.5), (61.0, 14.8), (50.19, 11.6), (50.3, 9.1), (82.42, 11.2), (3.64, 0.2), (89.43, 9.0)),
    "jarvis_march": ((46.01, 8.6), (55.4, 2.6), (50.23, 3.9), (59.31, 29.3), (49.54, 2.5), (49.57, 5.8), (94.57, 2.2)),
    "kmp_matcher": ((3.71, 1.0), (1.03, 0.6), (1.32, 0.6), (2.35, 1.1), (1.75, 0.7), (0.44, 0.4), (0.03, 0.1)),
    "lcs_length": ((55.85, 6.5), (48.14, 7.2), (48.3, 4.6), (54.42, 2.7), (53.85, 7.8), (56.0, 3.5), (83.32, 4.1)),
    "matrix_chain_order": ((81.65, 2.8), (81.59, 5.4), (65.58, 5.1), (85.53, 2.3), (86.65, 0.9), (86.47, 1.1), (91.89, 1.2)),
    "minimum": ((91.69, 5.8), (86.87, 2.6), (80.6, 10.4), (90.73, 3.4), (89.22, 3.4), (70.69, 27.3), (95.28, 2.0)),
    "mst_kruskal": ((69.07, 4.9), (67.26, 2.9), (68.6, 4.2), (70.84, 5.9), (63.47, 6.1), (69.35, 4.3), (64.91, 11.8)),
    "mst_prim": ((35.7, 11.4), (61.83, 9.2), (68.72, 10.7), (86.43, 5.1), (81.59, 4.6), (83.61, 7.2), (85.77, 7.9)),
    "naive_string_matcher": ((2.12, 0.3), (1.7, 0.7), (1.81, 0.5), (1.83, 1.7), (1.46, 0.8), (1.9, 0.7), (65.01, 32.3)),
    "optimal_bst": ((67.37, 6.0), (61.91, 5.7), (63.78, 5.1), (66.48, 3.5), (65.19, 2.0), (70.74, 2.0), (74.4, 2.6)),
    "quickselect": ((5.51, 2.4), (2.03, 0.5), (2.4, 0.4), (3.07, 1.6), (2.0, 0.9), (4.92, 1.0), (19.18, 17.3)),
    "quicksort": ((65.26, 4.3), (4.41, 1.3), (5.0, 0.8), (17.95, 3.9), (7.9, 1.9), (2.63, 0.2), (39.42, 13.2)),
    "segments_intersect": ((85.94, 0.7), (86.36, 0.5), (86.1, 0.7), (94.46, 2.5), (85.89, 0.8), (85.66, 0.8), (84.94, 2.6)),
    "strongly_connected_components": ((21.13, 5.9), (23.66, 8.8), (29.47, 9.9), (12.58, 5.2), (12.97, 6.0), (17.2, 6.9), (28.59, 15.2)),
    "task_scheduling": ((83.45, 0.5), (82.61, 0.4), (82.61, 0.8), (83.36, 0.9), (83.54, 0.5), (83.62, 0.5), (82.93, 1.8)),
    "topological_sort": ((19.02, 10.3), (43.47, 12.7), (43.23, 17.8), (54.93, 5.8), (51.71, 6.5), (64.28, 10.1), (80.62, 17.5)),
}
RT_TABLE19_AVERAGES = (50.29, 46.42, 46.70, 55.15, 51.94, 52.17, 66.18)  # per column, over the 30 algorithms

# Table 9: the untuned baselines (the RT authors' run.py defaults) by training-set size, core-8 averages only.
RT_TABLE9_COLUMNS = RT_TABLE19_COLUMNS[:-1]
RT_TABLE9 = {1000: (45.95, 42.24, 42.53, 54.66, 51.07, 56.18), 10000: (46.70, 42.97, 45.37, 56.93, 56.77, 58.20)}

# -- Ibarz et al., "A Generalist Neural Algorithmic Learner" (LoG 2022), Table 2 (Appendix A.3), which also
# quotes the CLRS-30 paper's baselines (Veličković et al., ICML 2022): 3 seeds for those, 10 for its own.
IBARZ = "Ibarz et al. 2022, Table 2 (Appendix A.3)"
IBARZ_TABLE2_COLUMNS = ("memnet", "mpnn", "pgn", "triplet-gmpnn")
IBARZ_TABLE2 = {  # task: one (mean, ±) per column of IBARZ_TABLE2_COLUMNS
    "activity_selector": ((24.1, 2.22), (80.66, 3.16), (66.8, 1.62), (95.18, 0.45)),
    "articulation_points": ((1.5, 0.61), (50.91, 2.18), (49.53, 2.09), (88.32, 2.01)),
    "bellman_ford": ((40.04, 1.46), (92.01, 0.28), (92.99, 0.34), (97.39, 0.19)),
    "bfs": ((43.34, 0.04), (99.89, 0.05), (99.63, 0.29), (99.73, 0.04)),
    "binary_search": ((14.37, 0.46), (36.83, 0.26), (76.95, 0.13), (77.58, 2.35)),
    "bridges": ((30.26, 0.05), (72.69, 4.78), (51.42, 7.82), (93.99, 2.07)),
    "bubble_sort": ((73.58, 0.78), (5.27, 0.6), (6.01, 1.95), (67.68, 5.5)),
    "dag_shortest_paths": ((66.15, 1.92), (96.24, 0.56), (96.94, 0.16), (98.19, 0.3)),
    "dfs": ((13.36, 1.61), (6.54, 0.51), (8.71, 0.24), (47.79, 4.19)),
    "dijkstra": ((22.48, 2.39), (91.5, 0.5), (83.45, 1.75), (96.05, 0.6)),
    "find_maximum_subarray_kadane": ((13.05, 0.08), (20.3, 0.49), (65.23, 2.56), (76.36, 0.43)),
    "floyd_warshall": ((14.17, 0.13), (26.74, 1.77), (28.76, 0.51), (48.52, 1.04)),
    "graham_scan": ((40.62, 2.31), (91.04, 0.31), (56.87, 1.61), (93.62, 0.91)),
    "heapsort": ((68.0, 1.57), (10.94, 0.84), (5.27, 0.18), (31.04, 5.82)),
    "insertion_sort": ((71.42, 0.86), (19.81, 2.08), (44.37, 2.43), (78.14, 4.64)),
    "jarvis_march": ((22.99, 3.87), (34.86, 12.39), (49.19, 1.07), (91.01, 1.3)),
    "kmp_matcher": ((1.81, 0.0), (2.49, 0.86), (2.0, 0.12), (19.51, 4.57)),
    "lcs_length": ((49.84, 4.34), (53.23, 0.36), (56.82, 0.21), (80.51, 1.84)),
    "matrix_chain_order": ((81.96, 1.03), (79.84, 1.4), (83.91, 0.49), (91.68, 0.59)),
    "minimum": ((86.93, 0.11), (85.34, 0.88), (87.71, 0.52), (97.78, 0.55)),
    "mst_kruskal": ((28.84, 0.61), (70.97, 1.5), (66.96, 1.36), (89.8, 0.77)),
    "mst_prim": ((10.29, 3.77), (69.08, 7.56), (63.33, 0.98), (86.39, 1.33)),
    "naive_string_matcher": ((1.22, 0.48), (3.92, 0.3), (2.08, 0.2), (78.67, 4.99)),
    "optimal_bst": ((72.03, 1.21), (62.23, 0.44), (71.01, 1.82), (73.77, 1.48)),
    "quickselect": ((1.74, 0.03), (1.43, 0.69), (3.66, 0.42), (0.47, 0.25)),
    "quicksort": ((73.1, 0.67), (11.3, 0.1), (6.17, 0.15), (64.64, 5.12)),
    "segments_intersect": ((71.81, 0.9), (93.44, 0.1), (77.51, 0.75), (97.64, 0.09)),
    "strongly_connected_components": ((16.32, 4.78), (24.37, 4.88), (20.8, 0.64), (43.43, 3.15)),
    "task_scheduling": ((82.74, 0.04), (84.11, 0.32), (84.89, 0.91), (87.25, 0.35)),
    "topological_sort": ((2.73, 0.11), (52.6, 6.24), (60.45, 2.69), (87.27, 2.67)),
}
CLRS30_AVERAGES = {"mpnn": 51.02, "pgn": 52.31}  # the CLRS-30 paper's, over the 30 algorithms (3 seeds)
IBARZ_AVERAGE = 75.98  # Triplet-GMPNN over the 30 algorithms (10 seeds)
