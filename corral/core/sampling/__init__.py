"""Sampling: turning a policy and its environments into sample batches.

The env runners (local, remote on Ray, and the asynchronous sampler that keeps
remote runners busy), observation filters, the ``SampleBatch`` columns, the
episode metrics reported with every result, and what a runner needs of the
experience output an integration writes.
"""
