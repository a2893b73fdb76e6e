"""What the training loop needs of the experience input (``offline_data(input_=...)``), and asking the seam for it.

The readers are an integration (:mod:`corral.integrations.offline`), asked
through the ``experience_input`` seam once the policies are built; the core
only draws sample calls' rows from the input, saves and restores where it
stands, and closes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from corral.core.common.sample_batch import MultiAgentBatch
from corral.core.contracts.integrations import implemented, required_answer
from corral.core.contracts.options.input_names import input_creator
from corral.core.sampling.offline_output import check_experience_output, missing_offline_integration

if TYPE_CHECKING:
    from corral.core.contracts.config import AlgorithmConfig
    from corral.core.learning.policy import Policy

SAMPLER = "sampler"
"""the ``input_`` of a run that samples its env runners alone (the default)"""


class ExperienceInput(Protocol):
    """One source of sample calls: input files, the env runners, or a mix of them."""

    def next(self, sample: Callable[[], MultiAgentBatch], rows: int | None = None) -> MultiAgentBatch:
        """The next sample call's rows.

        Args:
            sample: samples the env runners (called when the sampler's turn comes).
            rows: rows to read from files this call; None: one full sample call's worth.

        Returns:
            The rows, by policy id.
        """
        ...

    def close(self) -> None:
        """Stop reading (an open stream of blocks is shut down); reading may start again later."""
        ...

    def get_state(self) -> dict[str, Any]:
        """Where reading stands, as JSON data, for exact resume."""
        ...

    def set_state(self, state: dict[str, Any]) -> None:
        """Go on from what :meth:`get_state` returned.

        Args:
            state: what :meth:`get_state` returned.

        Raises:
            ValueError: the state does not fit this input (a tampered checkpoint, or other input files).
        """
        ...


def check_offline_integrations(config: AlgorithmConfig | Any) -> None:
    """Refuse, before any work starts, offline input or output that no installed integration serves.

    Args:
        config: the algorithm's config.

    Raises:
        ConfigError: ``input_`` names files (or a mix) or ``output`` is set, and no
            integration implements the seam that serves it.
    """
    if not _sampler_alone(config) and not implemented("experience_input"):
        raise missing_offline_integration("input_", "experience_input")
    check_experience_output(config)


def experience_input_for(
    config: AlgorithmConfig | Any, policies: Mapping[str, Policy], input_reader: Any = None
) -> ExperienceInput | None:
    """The input ``config.input_`` asks for, from the integration that reads it; None for the sampler alone.

    Args:
        config: the algorithm's config (``input_``, ``input_config``, ``shuffle_buffer_size``, ...).
        policies: the learner's policies by id (the integration checks the files against them).
        input_reader: the ``InputReader`` the config's input creator made for the local env runner, if it made one.

    Returns:
        The input, or None when ``input_`` is ``"sampler"`` or serves episodes.

    Raises:
        ConfigError: ``input_`` names files or made a reader, and no integration answers; or the
            integration's own (a missing path, a file whose columns do not fit its policy).
    """
    if input_reader is None and _sampler_alone(config):
        return None
    missing = missing_offline_integration("input_", "experience_input")
    found: ExperienceInput = required_answer(
        "experience_input", missing, config=config, policies=policies, input_reader=input_reader
    )
    return found


def _sampler_alone(config: Any) -> bool:
    # an input creator makes each env runner's input: the runners serve it as their env, or made the reader given
    return input_creator(config.input_) is not None or (isinstance(config.input_, str) and config.input_ == SAMPLER)
