"""Sampling: turning environments and a policy into sample batches.

Environment creation and guarding, the env runners (local, remote on Ray, and
the asynchronous sampler that keeps remote runners busy), observation filters,
the ``SampleBatch`` columns, the conversion of gymnasium spaces to network
inputs and env actions, and the episode metrics reported with every result.
"""
