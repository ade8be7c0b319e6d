"""I-BERT configuration (Nam et al., "I-BERT: Inductive Generalization of Transformer to Arbitrary Context Lengths").

The model type is ``inductive_bert``: transformers already owns ``ibert`` for an unrelated integer-quantized BERT.
"""

from transformers import PretrainedConfig

POSITION_EMBEDDING_TYPES = ("none", "absolute")
RECURRENT_CELLS = ("lstm", "gru")


# Copied from lengthgen.modeling.ndr.configuration_ndr._check_sizes
def _check_sizes(**sizes):
    """ValueError naming the first of `sizes` (a config's widths and counts) that is not a positive integer."""
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


class IBertConfig(PretrainedConfig):
    r"""
    Configuration of an I-BERT model. Field names follow `BertConfig`; the last three fields carry the ablations of
    the paper (§4 and Figure 5), so one model family reproduces its whole comparison.

    Args:
        vocab_size (`int`, defaults to 30522): number of token ids the embedding accepts.
        hidden_size (`int`, defaults to 768): width of the encoder. The bidirectional recurrent layer has
            `hidden_size // 2` units per direction, so it must be even.
        num_hidden_layers (`int`, defaults to 12): number of Transformer encoder layers.
        num_attention_heads (`int`, defaults to 12): attention heads per layer.
        intermediate_size (`int`, defaults to 3072): width of the feed-forward blocks.
        hidden_act (`str`, defaults to `"gelu"`): activation of the feed-forward blocks and the MLM head.
        hidden_dropout_prob (`float`, defaults to 0.1): dropout after the recurrent layer and in every sublayer.
        attention_probs_dropout_prob (`float`, defaults to 0.1): dropout on the attention probabilities.
        max_position_embeddings (`int`, defaults to 512): longest input accepted when
            `position_embedding_type="absolute"`; ignored (no limit) when it is `"none"`.
        initializer_range (`float`, defaults to 0.02): std of the normal initialiser of linear and embedding weights.
        layer_norm_eps (`float`, defaults to 1e-12): epsilon of every LayerNorm.
        pad_token_id (`int`, defaults to 0): id of the padding token.
        classifier_dropout (`float`, *optional*): dropout of the sequence-classification head
            (`hidden_dropout_prob` when unset).
        position_embedding_type (`str`, defaults to `"none"`): `"none"` is I-BERT: no position embeddings, order
            comes from the recurrent layer alone. `"absolute"` is "I-BERT with positional encoding" (Figure 5): learned
            absolute position embeddings added to the recurrent layer's output before its LayerNorm, as in the
            authors' code (`IBERTPosAE`).
        recurrent_cell (`str`, defaults to `"lstm"`): `"lstm"` (paper) or `"gru"` (offered by the authors' code).
        recurrence_in_every_layer (`bool`, defaults to `False`): I-BERT2 of Figure 5: the feed-forward block of every
            encoder layer is replaced by a bidirectional recurrent layer (residual + LayerNorm kept).
    """

    model_type = "inductive_bert"

    def __init__(
        self,
        vocab_size=30522,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        initializer_range=0.02,
        layer_norm_eps=1e-12,
        pad_token_id=0,
        classifier_dropout=None,
        position_embedding_type="none",
        recurrent_cell="lstm",
        recurrence_in_every_layer=False,
        tie_word_embeddings=True,
        **kwargs,
    ):
        if position_embedding_type not in POSITION_EMBEDDING_TYPES:
            raise ValueError(
                f"position_embedding_type must be one of {POSITION_EMBEDDING_TYPES}, got {position_embedding_type!r}"
            )
        if recurrent_cell not in RECURRENT_CELLS:
            raise ValueError(f"recurrent_cell must be one of {RECURRENT_CELLS}, got {recurrent_cell!r}")
        _check_sizes(vocab_size=vocab_size, hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                     intermediate_size=intermediate_size)
        if hidden_size % 2:
            raise ValueError(f"hidden_size must be even (hidden_size // 2 units per LSTM direction), got {hidden_size}")
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be a multiple of num_attention_heads ({num_attention_heads})"
            )
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.classifier_dropout = classifier_dropout
        self.position_embedding_type = position_embedding_type
        self.recurrent_cell = recurrent_cell
        self.recurrence_in_every_layer = recurrence_in_every_layer
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)


__all__ = ["IBertConfig"]
