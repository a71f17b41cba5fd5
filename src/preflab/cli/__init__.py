"""The ``preflab`` command line (the only part of PrefLab that talks to the terminal)."""
