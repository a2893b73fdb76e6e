"""Replay: the buffers off-policy algorithms learn from, uniform and prioritized, and the sum tree behind the latter."""
