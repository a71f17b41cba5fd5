"""Routing: one run, several answerers (the reward model, an AI judge, people), each query sent
to the cheapest one likely to be right.

Import the parts from their modules (this package imports nothing, so that the run's config,
which reads :mod:`preflab.sources.routing.config`, stays light): the source
(:mod:`~preflab.sources.routing.router`), the AI's live accuracy and threshold
(:mod:`~preflab.sources.routing.calibration`) and the reward model as an answerer
(:mod:`~preflab.sources.routing.model`). The router is handed its AI judge and its people
ready-made; :func:`preflab.assemble.make_routing_source` builds them from a run's config.
"""
