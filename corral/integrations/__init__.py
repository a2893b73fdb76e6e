"""Integrations: corral with other libraries that no algorithm needs to run.

Each module adapts one library (PettingZoo's environments, for a start) and
imports it only when the user's code or config asks for it. They sit above the
core and the registry and import from them; the core never imports them.
Atari preprocessing, old-gym wrapping, rendering and video, offline readers and
writers, Ray Data input and off-policy estimation are next to move here, once
the core has the seams they plug into (CONTRIBUTING.md, "Where things go").
"""
