"""Evolution strategies (ES; Salimans et al., 2017) and augmented random search (ARS; Mania et al., 2018) as corral
plugins, RLlib's ``ES`` and ``ARS``."""

from corral.plugins.es.algorithm import ARS, ES
from corral.plugins.es.config import ARSConfig, ESConfig
from corral.plugins.es.policy import ESPolicy

__all__ = ["ARS", "ES", "ARSConfig", "ESConfig", "ESPolicy"]
