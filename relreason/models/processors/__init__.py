"""Processor registry. Importing this package registers every processor module."""

import importlib

from relreason.models.processors.base import PROCESSORS, Processor, State, register_processor

MODULES = ("mpnn", "gnn", "gcn", "rt", "transformer", "et", "dat", "floydnet", "rnar", "forgetnet")

for _m in MODULES:
    try:
        importlib.import_module(f"{__name__}.{_m}")
    except ModuleNotFoundError as _e:  # a processor module not written yet
        if _e.name != f"{__name__}.{_m}":
            raise
PROCESSORS.accept_plugins("relreason.processors")  # the built-ins are all in: installed plugins may add theirs

__all__ = ["PROCESSORS", "Processor", "State", "register_processor"]
