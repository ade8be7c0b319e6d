"""Neural Data Router (Csordás et al.): shared-layer transformer with a copy gate and geometric attention."""

from .geometric_attention import geometric_attention_weights

__all__ = ["geometric_attention_weights"]
