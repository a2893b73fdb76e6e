"""What an env runner needs of the experience output (``offline_data(output=...)``), and asking the seam for it.

The writers are an integration (:mod:`corral.integrations.offline`), asked
through the ``experience_output`` seam; the core only hands them each sample
call's fragments and closes them. The columns a runner records for the output
(which episode, agent and step a row is, and the env's info dict) are the
runner's own bookkeeping, so they are named here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from corral.core.common.sample_batch import SampleBatch
from corral.core.contracts.integrations import implemented, required_answer
from corral.errors import ConfigError

if TYPE_CHECKING:
    from corral.core.contracts.config import AlgorithmConfig

OUTPUT_CONTEXT_COLUMNS = (SampleBatch.EPS_ID, SampleBatch.AGENT_INDEX, SampleBatch.T, SampleBatch.INFOS)
"""columns an env runner adds to its fragments while it writes output (and removes before postprocessing)"""


class ExperienceOutput(Protocol):
    """Writes one env runner's sampled experiences somewhere (files, for corral's own)."""

    def write_fragments(self, fragments: Mapping[str, tuple[Mapping[str, np.ndarray], np.ndarray]]) -> None:
        """Take one sample call's fragments, before postprocessing.

        Args:
            fragments: by policy id, ``(fragment, bootstrap_obs)``: the time-major ``[T, K]``
                columns (with ``valid`` and :data:`OUTPUT_CONTEXT_COLUMNS`) and the observation
                after each column's last row. The runner changes the fragments afterwards: what
                the output keeps, it copies now.
        """
        ...

    def close(self) -> None:
        """Finish what was written (every file complete); the output may be written to again afterwards."""
        ...


def missing_offline_integration(option: str, seam: str) -> ConfigError:
    """The error for an offline option that no installed integration serves.

    Args:
        option: the ``offline_data`` option the user set, e.g. ``"output"``.
        seam: the seam no integration answers (see :mod:`corral.core.contracts.integration_specs`).

    Returns:
        The error to raise, saying what is missing.
    """
    return ConfigError(
        f"offline_data({option}=...) needs corral's offline integration (corral.integrations.offline, seam {seam!r}), "
        "which is not installed or did not load (`corral list` shows why)"
    )


def check_experience_output(config: AlgorithmConfig | Any) -> None:
    """Refuse, before any work starts, an ``output`` that no installed integration can write.

    Args:
        config: the algorithm's config.

    Raises:
        ConfigError: ``output`` is set and no integration implements ``experience_output``.
    """
    if config.output is not None and not implemented("experience_output"):
        raise missing_offline_integration("output", "experience_output")


def experience_output_for(config: AlgorithmConfig | Any, worker_index: int) -> ExperienceOutput | None:
    """Where a runner built from ``config`` writes its sampled experiences, or None without ``output``.

    Args:
        config: the runner's config; its ``output="logdir"`` already names the experiment folder.
        worker_index: the runner's index (0 local).

    Returns:
        The output an integration made, or None when ``config.output`` is None.

    Raises:
        ConfigError: ``output`` is set and no integration answers; or the integration's own
            (a missing library, a folder that cannot be created).
    """
    if config.output is None:
        return None
    missing = missing_offline_integration("output", "experience_output")
    output: ExperienceOutput = required_answer("experience_output", missing, config=config, worker_index=worker_index)
    return output
