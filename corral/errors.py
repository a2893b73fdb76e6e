"""Errors a user's input can cause.

Every one is a :class:`CorralError`: the CLI prints it as one line and exits
with status 2, because it names a mistake we understand. Any other exception is
a bug in corral and keeps its traceback. This module imports nothing heavy so
that the registry and ``corral list`` can use it without torch.
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable

__all__ = [
    "CheckpointError",
    "ConfigError",
    "CorralError",
    "EnvError",
    "EnvRunnerError",
    "LearnerError",
    "ObservationError",
    "PluginLoadError",
    "TrainingError",
    "UnknownAlgorithmError",
    "UnknownPluginError",
]
"""the errors both public faces (``corral`` and ``corral.core``) re-export"""

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 60, 60
SHORT_REPR_LENGTH = 80
"""the most characters :func:`short_repr` gives"""


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


class ObservationError(CorralError, ValueError):
    """An observation given to a policy (``compute_single_action``, ``compute_actions``) does not fit its space."""


class TrainingError(CorralError):
    """An update would have put NaN or inf into the weights; it was not applied.

    The message names the policy, the loss term (or param group) and the
    iteration, and what to change. Raised when ``debugging(on_nonfinite="raise")``
    (the default); with ``"skip"`` such updates are dropped and counted instead.

    Attributes:
        term: the loss term, gradient or ``"weights"`` that was not finite.
        policy_id: the policy whose update it was (None until the algorithm adds it).
        iteration: the training iteration it happened in (None until the algorithm adds it).
    """

    ADVICE = "lower the learning rate, clip gradients (grad_clip), or set debugging(on_nonfinite='skip') to drop such updates"

    def __init__(self, what: str, *, term: str, policy_id: str | None = None, iteration: int | None = None) -> None:
        self.what, self.term, self.policy_id, self.iteration = what, term, policy_id, iteration
        where = ", ".join(
            part
            for part in (
                f"policy {policy_id!r}" if policy_id is not None else "",
                f"iteration {iteration}" if iteration is not None else "",
            )
            if part
        )
        super().__init__(f"{where + ': ' if where else ''}{what}; {self.ADVICE}")

    def located(self, policy_id: str, iteration: int) -> TrainingError:
        """The same error, naming the policy and the iteration.

        The policy that raised it does not know either; the algorithm adds them
        when the error reaches its training loop.

        Args:
            policy_id: the policy whose update failed.
            iteration: the training iteration it failed in.

        Returns:
            A new :class:`TrainingError` with the same ``what`` and ``term``.
        """
        return TrainingError(self.what, term=self.term, policy_id=policy_id, iteration=iteration)


class LearnerError(RuntimeError):
    """A Learner actor failed or died during an update, so its group stopped (see ``learners(num_learners=...)``),
    or a learner thread took no batch for ``learner_queue_timeout`` seconds.

    Not a :class:`CorralError`: the input was fine, the run broke. The message
    carries what Ray said about the Learner.
    """


class EnvRunnerError(RuntimeError):
    """An environment or an env runner failed while sampling, and the config did not ask to tolerate it.

    Not a :class:`CorralError`: the input was fine, the run broke. The message
    says which env runner and which sub-environment, and carries the
    traceback from the process where it happened.
    """


def did_you_mean(word: object, choices: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest choice, or ``""``.

    Matching ignores case, since names in corral are looked up case-insensitively.

    Args:
        word: the name the user gave; anything but a string (a number or tuple used as a
            key) is close to no name.
        choices: the valid names; the suggestion is spelled as here.

    Returns:
        The hint, with a leading space, to append to an error message; ``""`` if no
        choice is close enough to be the name meant: a difflib ratio of 0.75 takes a
        typo or two (``gama``, ``trian_batch_size``), not a word that merely shares
        letters (``optimization`` is not ``normalize_actions``).
    """
    if not isinstance(word, str):
        return ""
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.75)
    return f" Did you mean '{by_lower[close[0]]}'?" if close else ""


def short_repr(value: object) -> str:
    """``repr(value)`` cut short for a message: three levels deep and :data:`SHORT_REPR_LENGTH` characters at most.

    A user's value can be anything, nested deeper than Python's recursion limit
    too; its message shows the top of it instead of raising a RecursionError.

    Args:
        value: the value to show.

    Returns:
        Its shortened repr (``{'a': {'b': {...}}}``; ``...`` where it was cut).
    """
    text = _SHORT.repr(value)
    return text if len(text) <= SHORT_REPR_LENGTH else text[: SHORT_REPR_LENGTH - 3] + "..."
