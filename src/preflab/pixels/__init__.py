"""Image observations (paper 002, §3.1.2 and appendix A.2): compact frame stacks, Atari
environments through gymnasium + ale-py, and a toy image environment for tests.

Light on purpose: importing ``preflab.pixels`` loads nothing but this docstring; the submodules
are :mod:`preflab.pixels.frames` (numpy only), :mod:`preflab.pixels.spaces` (observation
spaces), :mod:`preflab.pixels.atari` (ALE environments, presets, evaluation) and
:mod:`preflab.pixels.toy` (the bright-square environment). The convolutional reward model is
:mod:`preflab.reward.cnn`.
"""
