"""Learning: the machinery that turns sample batches into better weights.

Models and action distributions, advantage and return targets (GAE, n-step,
V-trace), replay buffers and their sum tree, the off-policy base that DQN and
SAC share, schedules, the guard that keeps NaN and inf out of the weights, and
the policy map that keeps at most ``policy_map_capacity`` policies in memory.
"""
