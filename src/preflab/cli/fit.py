"""``preflab fit RUN_DIR``: see :mod:`preflab.cli.label`."""

from preflab.cli.label import fit as main

__all__ = ["main"]
