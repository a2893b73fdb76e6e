"""Persistence: what a run leaves on disk, and reading it back safely.

Checkpoints (written atomically, pruned safely, read with every file checked),
what a checkpoint may make corral import, arrays inside JSON state without
pickles, the result files of an experiment folder, and policies exported.
Offline data (experiences read from files and written to them) is the offline
integration's (``corral.integrations.offline``).
"""
