"""Evaluation: scoring a model's outputs (the CLRS-30 metric over whole splits, the lobster benchmark's
relative loss, CLRS-Text answers) and what a metric means; runs read back and compared are relreason.runs.

    from relreason.eval import Scorer
"""

__all__ = ["Scorer", "Scores", "f1"]


def __getattr__(name: str):
    # imported on first use: `relreason runs` reads JSON and must not wait seconds for torch
    if name in __all__:
        from relreason.eval import metrics  # CLI start-up: `relreason runs` loads no torch

        return getattr(metrics, name)
    raise AttributeError(f"module 'relreason.eval' has no attribute {name!r}")
