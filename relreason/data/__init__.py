"""Faithful CLRS-30 data: specs, algorithms with their probes, samplers, datasets on disk.

    from relreason.data import run_algorithm, generate
    traj = run_algorithm("bellman_ford", A, s)
    ds = generate("bellman_ford", split="test")
"""

from relreason.data.algorithms import ALGORITHM_INFO, ALGORITHMS, SPECS
from relreason.data.generate import generate, iter_chunks, run_algorithm
from relreason.data.specs import Feature, Location, Stage, Type
from relreason.data.trajectory import Dataset, Trajectory

__all__ = ["ALGORITHMS", "ALGORITHM_INFO", "SPECS", "Dataset", "Feature", "Location", "Stage", "Trajectory", "Type",
           "generate", "iter_chunks", "run_algorithm"]
