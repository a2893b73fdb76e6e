"""Networks: the models a policy computes with, and the action distributions over their outputs.

``default_models`` builds what a ``ModelConfig`` describes (fully connected
and convolutional encoders, actor-critic and Q heads) on the ``Model`` base;
``custom_model`` fits a network the user brings (RLlib's ``custom_model``, a
plain ``torch.nn.Module``) to what policies read; ``model_v2`` is RLlib's
``TorchModelV2``, adapted onto corral's model contract, ``rl_module`` its
``TorchRLModule``, which is that contract, and ``catalog`` its ``ModelCatalog``
of models registered by name; ``recurrent`` holds models with memory;
``distributions`` turns outputs into actions; ``action_masking`` keeps illegal
actions out.
"""
