"""Imported by the warm forkserver of :mod:`tests.warm_python` (in its ``PRELOAD``, before
:mod:`tests.warm_freeze`), and by nothing else: it parses one ``preflab train`` command line, so
that what tyro works out on the first parse in a process is in the server's memory and every
forked ``preflab train`` command starts with it.

tyro reads the docstrings of ``TrainConfig``'s fields (and of its nested configs) from their
source and tokenises them for the help text, and keeps what it read in caches that outlive a
parse (``functools.lru_cache`` in ``tyro._docstrings`` and ``tyro._strings``, the source lines
in :mod:`linecache`). A process's first parse took 0.34–0.40 s of CPU, the next ones 0.03;
forked from a server that had parsed once, the first parse took 0.03–0.05 (six commands each,
measured inside the forked command: docs/guide/test-time.md, fourth pass). The caches hold what
the files say, so a command parses, refuses and prints ``--help`` as from a fresh start. The
parse writes nothing and runs nothing (:func:`preflab.cli.train.parse_args`), emits no warning
and starts no thread."""

from __future__ import annotations

from preflab.cli.train import parse_args

parse_args([])
