"""Integrations: corral with other libraries that no algorithm needs to run.

Each module or package adapts one library (PettingZoo's environments, ale-py's
Atari games, gym's old API, gymnasium's rendering and video) or serves one need
no algorithm has to run (offline data: ``offline/``, its readers and writers
and Ray Data input), and imports its libraries only when the user's code or
config asks for it. They sit above the core and the registry and import from
them; the core never imports them. Those the core calls are named in the
entry-point group ``corral.integrations`` and answer the seams in
:mod:`corral.core.contracts.integration_specs`.
"""
