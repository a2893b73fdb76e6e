"""Offline data: training from experience files and env runners writing them (``offline_data(input_=..., output=...)``).

The core asks for them through two seams (:mod:`corral.core.contracts.integration_specs`):
``experience_input`` builds the readers of ``input_`` (:mod:`.experience_input`,
with :mod:`.input_files`, :mod:`.input_check`, :mod:`.input_columns`,
:mod:`.experience_reader` and, on a Ray cluster, :mod:`.ray_data_input`), and
``experience_output`` the writer of each env runner (:mod:`.experience_output`).
Importing this package imports none of them, nor numpy's, pyarrow's or Ray's
modules: they load when a run asks for offline data. The seams' implementations
are named apart from the seams (``specname``): importing a submodule sets the
package's attribute of its name, so a function named ``experience_input`` here
would be replaced by the module :mod:`.experience_input` once it loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from corral.core.contracts.integration_specs import integration

if TYPE_CHECKING:  # what the core calls on them: mypy checks that the readers and writers have it
    from corral.core.sampling.offline_output import ExperienceOutput
    from corral.core.training.offline_input import ExperienceInput


@integration(specname="experience_input")
def build_input(config: Any, policies: Mapping[str, Any], input_reader: Any) -> ExperienceInput | None:
    """The input ``config.input_`` names: its files checked against the policies, read in chunks (or the reader's batches).

    Args:
        config: the algorithm's config.
        policies: the learner's policies by id.
        input_reader: the ``InputReader`` the config's input creator made, or None.

    Returns:
        The input (see :func:`~corral.integrations.offline.experience_input.build_experience_input`).

    Raises:
        ConfigError: a missing path, or a file whose policy, columns or values do not fit.
    """
    from corral.integrations.offline.experience_input import build_experience_input

    return build_experience_input(config, policies, input_reader)


@integration(specname="experience_output")
def build_output(config: Any, worker_index: int) -> ExperienceOutput | None:
    """The writer of one env runner's experiences into ``config.output``.

    Args:
        config: the runner's config.
        worker_index: the runner's index, in every file name.

    Returns:
        The writer, or None where ``config.output`` is None.

    Raises:
        ConfigError: Parquet without pyarrow, or a folder that cannot be created.
    """
    from corral.integrations.offline.experience_output import ExperienceWriter

    return ExperienceWriter.from_config(config, worker_index)
