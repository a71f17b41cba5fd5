"""Imported last by the warm forkserver of :mod:`tests.warm_python` (the end of its ``PRELOAD``),
and by nothing else: it moves every object the server imported into the garbage collector's
permanent generation (:func:`gc.freeze`).

A forked command shares the server's memory until it writes to it, and a collection of the
oldest generation writes to the header of every object it visits: without the freeze, the first
full collection in each command copied the pages of all ~420,000 objects torch, SB3 and PrefLab
left behind, and visited them again at every full collection after. Frozen, a command's
collections visit only its own objects. Measured on the 2-core test machine, a 400-step README
run forked warm: 1.05 s of CPU and 36,900 page faults without the freeze, 0.79 s and 16,300
with it (docs/guide/test-time.md). Nothing else changes: the command's objects are collected as
before, and the server's stay alive as they did (they are the imported modules)."""

from __future__ import annotations

import gc

gc.collect()
gc.freeze()
