"""Integrations: corral with other libraries that no algorithm needs to run.

Each module adapts one library (PettingZoo's environments, ale-py's Atari
games, gym's old API, gymnasium's rendering and video) and imports it only when
the user's code or config asks for it. They sit above the core and the registry
and import from them; the core never imports them. Those the core calls are
named in the entry-point group ``corral.integrations`` and answer the seams in
:mod:`corral.core.contracts.integration_specs`.
"""
