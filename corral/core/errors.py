"""Errors a user's input can cause.

Every one is a :class:`CorralError`: the CLI prints it as one line and exits
with status 2, because it names a mistake we understand. Any other exception is
a bug in corral and keeps its traceback. This module imports nothing heavy so
that the registry and ``corral list`` can use it without torch.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class CorralError(Exception):
    """Base of every error caused by the user's input (config, names, files)."""


class ConfigError(CorralError, ValueError):
    """A config field has a bad value, or a key that no field has."""


class UnknownPluginError(CorralError, KeyError):
    """A name (algorithm, exploration, hook plugin) that no installed plugin provides."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownAlgorithmError(UnknownPluginError):
    """An algorithm name that no installed plugin provides."""


class PluginLoadError(CorralError, ImportError):
    """A plugin's entry point failed to import, or two distributions claim one name."""


class CheckpointError(CorralError):
    """A checkpoint is missing, damaged, too new, or does not fit the algorithm."""


class EnvError(CorralError):
    """An environment cannot be found or created, or does not fit the config."""


class EnvRunnerError(RuntimeError):
    """An environment or an env runner failed while sampling, and the config did not ask to tolerate it.

    Not a :class:`CorralError`: the input was fine, the run broke. The message
    says which env runner and which sub-environment, and carries the
    traceback from the process where it happened.
    """


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest choice, or ``""``.

    Matching ignores case, since names in corral are looked up case-insensitively.
    """
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" Did you mean '{by_lower[close[0]]}'?" if close else ""
