"""Networks users bring (RLlib's ``custom_model``), built and fitted to what corral's policies read.

``custom_model``: a plain ``torch.nn.Module`` or a corral model, given as a
class. RLlib's ModelV2 and ModelCatalog are to join it here.
"""
