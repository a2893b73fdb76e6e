"""Training: the top of the core, where an ``Algorithm`` composes the rooms below into a run.

The training loop, evaluation, the policy set and its mapping to agents,
checkpoints and state, what the loop needs of offline input and of off-policy
estimation (both integrations, asked through their seams), results and logging,
acting for a user (``compute_single_action``), and the off-policy base that
DQN and SAC extend. Nothing else in the core imports this room.
"""
