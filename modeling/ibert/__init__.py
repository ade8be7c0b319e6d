"""I-BERT (Nam et al.): BERT whose position embeddings are replaced by one bidirectional recurrent layer."""

from .configuration_ibert import IBertConfig
from .modeling_ibert import IBertForMaskedLM, IBertForSequenceClassification, IBertModel, IBertPreTrainedModel

# `save_pretrained` then writes `auto_map` and copies this folder's code next to the weights, so a checkpoint loads
# with `trust_remote_code=True` where lengthgen is not installed.
IBertConfig.register_for_auto_class()
IBertModel.register_for_auto_class("AutoModel")
IBertForMaskedLM.register_for_auto_class("AutoModelForMaskedLM")
IBertForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = ["IBertConfig", "IBertForMaskedLM", "IBertForSequenceClassification", "IBertModel", "IBertPreTrainedModel"]
