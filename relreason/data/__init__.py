"""Faithful CLRS-30 data: specs, algorithms with their probes, samplers, datasets on disk.

    from relreason.data import run_algorithm, generate
    traj = run_algorithm("bellman_ford", A, s)
    ds = generate("bellman_ford", split="test")
    ds = generate("bellman_ford", split="test", graph="ws:k=4,p=0.1")   # a graph family (data.families)
"""

from relreason.data.algorithms import ALGORITHM_INFO, ALGORITHMS, SPECS
from relreason.data.families import FAMILIES, parse_graph
from relreason.data.generate import generate, iter_chunks, run_algorithm
from relreason.data.specs import Feature, Location, Stage, Type
from relreason.data.trajectory import Dataset, Trajectory

__all__ = ["ALGORITHMS", "ALGORITHM_INFO", "FAMILIES", "SPECS", "Dataset", "Feature", "Location", "Stage", "Trajectory",
           "Type", "generate", "iter_chunks", "parse_graph", "run_algorithm"]
