"""REINFORCE with a learned baseline, packaged as a corral plugin.

Importing this package imports only corral's public API (``corral.core``);
corral finds it through the ``corral.algorithms`` entry point in pyproject.toml.
"""

from corral_reinforce.algorithm import REINFORCE
from corral_reinforce.config import REINFORCEConfig
from corral_reinforce.policy import REINFORCEPolicy

__all__ = ["REINFORCE", "REINFORCEConfig", "REINFORCEPolicy"]
