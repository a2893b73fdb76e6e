"""RLlib's module paths under one prefix: a script runs on corral when ``ray.rllib`` becomes ``corral.rllib``.

``from corral.rllib.algorithms.ppo import PPOConfig`` gives corral's
``PPOConfig``; every path and name RLlib's scripts import is listed in
:mod:`corral.rllib.table`, with what it is in corral, and the finder in
:mod:`corral.rllib.namespace` makes those paths importable without a module
file per path. A name corral does not have is an ``ImportError`` that says
what to use instead. ``python -m corral.rllib`` prints the table.

As ``import ray.rllib`` registers RLlib's algorithms with Tune, importing this
package registers corral's (where Ray is installed), so ``tune.Tuner("PPO")``
and ``tune.registry.get_trainable_cls("PPO")`` find them.
"""

from __future__ import annotations

import importlib.util
import sys

from corral.rllib import namespace

namespace.install()
namespace.populate(sys.modules[__name__], "")  # RLlib's top-level names (ray.rllib.SampleBatch, ...)

if importlib.util.find_spec("ray") is not None:
    import corral.tune  # noqa: F401  (registers every algorithm with Tune, as `import ray.rllib` does)
