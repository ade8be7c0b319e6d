"""lengthgen models. Importing this package registers every config and model with the transformers Auto classes."""

from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

from .ibert import IBertConfig, IBertForMaskedLM, IBertForSequenceClassification, IBertModel, IBertPreTrainedModel

AutoConfig.register(IBertConfig.model_type, IBertConfig, exist_ok=True)
AutoModel.register(IBertConfig, IBertModel, exist_ok=True)
AutoModelForMaskedLM.register(IBertConfig, IBertForMaskedLM, exist_ok=True)
AutoModelForSequenceClassification.register(IBertConfig, IBertForSequenceClassification, exist_ok=True)

__all__ = ["IBertConfig", "IBertForMaskedLM", "IBertForSequenceClassification", "IBertModel", "IBertPreTrainedModel"]
