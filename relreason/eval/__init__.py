"""Evaluation: the CLRS-30 metric over whole splits.

    from relreason.eval import Scorer
"""

from relreason.eval.metrics import Scorer, Scores, f1

__all__ = ["Scorer", "Scores", "f1"]
