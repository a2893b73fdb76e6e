"""What the example envs share: reading RLlib's ``config`` argument, and drawing seeds from an env's generator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

SEED_BOUND = 2**31
"""Seeds drawn for inner envs and spaces lie in ``[0, SEED_BOUND)``."""


def config_dict(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """A plain copy of an env config (a dict, an ``EnvContext`` or None), so an env never changes its caller's dict.

    Args:
        config: what RLlib hands an env's constructor; None reads as empty.
    """
    return dict(config or {})


def draw_seed(rng: np.random.Generator) -> int:
    """A seed for an inner env or a space, drawn from the outer env's generator.

    Everything random in an example env then follows from the seed its own
    ``reset`` was given, so two envs reset with the same seed play the same episode.

    Args:
        rng: the outer env's ``np_random``.
    """
    return int(rng.integers(SEED_BOUND))
