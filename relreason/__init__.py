"""relreason: train and evaluate neural algorithmic reasoners on faithful CLRS-30 data."""

__version__ = "0.1.0"
