"""Learning: the policy that acts and learns on one set of weights, and what its update reads.

``Policy`` and the actor-critic policy, explorations, observation filters,
optimizers (fused Adam) and schedules, advantage and return targets (GAE,
n-step, V-trace), replay buffers, the off-policy policy that DQN and SAC
share, the guard that keeps NaN and inf out of the weights, and the policy map
that keeps at most ``policy_map_capacity`` policies in memory.
"""
