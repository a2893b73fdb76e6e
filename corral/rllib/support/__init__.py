"""RLlib's helpers that scripts import, written here with RLlib's behaviour.

Nothing imports these modules by their own names but :mod:`corral.rllib.table`:
a script reaches them under RLlib's paths (``corral.rllib.utils.framework``).
"""
