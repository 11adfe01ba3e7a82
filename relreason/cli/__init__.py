"""The command line: thin Typer commands over the importable core (`relreason.data`, `relreason.train`, ...)."""
