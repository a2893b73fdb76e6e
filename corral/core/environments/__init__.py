"""Environments: making them, holding them to their contract, and saving their state.

Env creation (gymnasium ids, registered names, import paths, classes; native
vectorisation or a loop of guarded sub-environments), the checks every step
passes (finite rewards, observations inside their space), the conversion of
gymnasium spaces to network inputs and env actions, the state of environments
mid-episode for exact resume, and the multi-agent env contract.
"""
