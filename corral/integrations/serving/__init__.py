"""Serving: external applications that own their loop (a simulator, a game, a service) train corral's policies.

RLlib's ``PolicyClient`` / ``PolicyServerInput`` pair, over HTTP with a JSON
body of numbers and arrays only: never pickle, in either direction
(:mod:`~corral.integrations.serving.protocol`).
"""
