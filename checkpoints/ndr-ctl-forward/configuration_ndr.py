"""Neural Data Router configuration (Csordás et al.; thesis chapter 5 and appendix D)."""

from transformers import PretrainedConfig

ATTENTION_TYPES = ("geometric", "softmax")
POSITION_ENCODINGS = ("none", "absolute", "relative", "abs_rel_gated")
UPDATE_NORMALIZATIONS = ("layernorm", "tanh")
CLASSIFIER_POSITIONS = ("last", "first")


def _check_sizes(**sizes):
    """ValueError naming the first of `sizes` (a config's widths and counts) that is not a positive integer."""
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


class NDRConfig(PretrainedConfig):
    r"""
    Configuration of a Neural Data Router: one transformer layer, shared across `num_layers` steps, with a copy gate
    and geometric attention. The fields reproduce the rows of Tables 5.1, 5.3 and 5.4 inside one family:
    `attention_type="softmax", position_encoding="absolute", copy_gate=False` is the baseline Transformer, `"relative"`
    is "+ rel", `copy_gate=True` adds "+ gate", `"abs_rel_gated"` is "+ abs/rel" (appendix D.2), and
    `attention_type="geometric", copy_gate=True, position_encoding="none"` is the NDR.

    Args:
        vocab_size (`int`, defaults to 32): number of token ids.
        hidden_size (`int`, defaults to 128): d_model.
        num_attention_heads (`int`, defaults to 4): heads; d_head = hidden_size / num_attention_heads.
        intermediate_size (`int`, defaults to 256): d_FF of FFN^data (Eq. 5.2). FFN^gate is d x d (Eq. 5.5).
        num_layers (`int`, defaults to 14): computational steps of the shared layer at training time; the forward
            argument `num_steps` (or `num_steps` here, when set) runs more or fewer at evaluation (ListOps: train 20,
            test 24, appendix D.3.1).
        num_steps (`int`, *optional*): steps of every call that does not say (in training too); None = `num_layers`.
            A released model sets it to the steps its card's numbers were measured with.
        attention_type (`str`, defaults to `"geometric"`): `"geometric"` (Eq. 5.6-5.10, with directional encoding)
            or `"softmax"` (scaled dot product).
        position_encoding (`str`, defaults to `"none"`): `"none"`, `"absolute"` (sinusoidal, added to the input
            embeddings), `"relative"` (Dai et al. 2019 with sinusoidal relative embeddings; softmax only) or
            `"abs_rel_gated"` (appendix D.2, Eq. D.6-D.7: a per-position gate mixes relative and absolute position
            terms; softmax only).
        abs_rel_gate_per_head (`bool`, defaults to `False`): with `"abs_rel_gated"`, one gate r_i per head instead of
            Eq. D.6's one scalar per position shared by the heads (W_ar in R^{d x 1}). Not in the thesis.
        copy_gate (`bool`, defaults to `True`): the copy gate of Eq. 5.3-5.4. Without it the layer is a standard
            post-LayerNorm transformer layer (residual around the feed-forward block).
        update_normalization (`str`, defaults to `"layernorm"`): normalisation of the update u in Eq. 5.2. The thesis
            uses tanh instead of LayerNorm for gated transformers without geometric attention (appendix D.3.3).
        classifier_position (`str`, defaults to `"last"`): read the class from the last real column (the end token;
            thesis) or the first (the begin token; appendix D.1 ablation).
        hidden_dropout_prob (`float`, defaults to 0.1): dropout on the attention output, in FFN^data and FFN^gate.
        attention_query_dropout (`float`, defaults to 0.1): dropout on the content query (appendix D.3.3).
        attention_key_dropout (`float`, defaults to 0.0): dropout on the content keys. Not in the thesis; the
            authors' code applies its attention dropout there.
        gate_dropout (`float`, defaults to 0.0): during training, close the whole gate of a column (copy it
            unchanged) with this probability. Not in the thesis, so off by default; the authors' code's default is 0.05
            and their sweeps use 0.1, as `hub_configs/ndr-ctl` and `ndr-simple-arithmetic` do (`ndr-listops`: 0.05).
        normalize_geometric_attention (`bool`, defaults to `False`): L1-normalise each row of the geometric attention
            weights. Eq. 5.7 has no normalisation, and the authors' runs turn it off (their sweeps' `norm_att 0`); True
            is their code's default, which `hub_configs/ndr-*` keep: every model trained here is normalised, and on a
            CPU budget the unnormalised CTL NDR learned markedly slower (docs/results/reproduction.md).
        gate_bias_init (`float`, defaults to -3.0): initial output bias of FFN^gate (§5.1.1).
        bos_token_id (`int`, *optional*), eos_token_id (`int`, *optional*): the begin and end tokens that frame every
            input (appendix D.3.3). When set, the model checks that the column the classifier reads (the last real
            one for `classifier_position="last"`, the first otherwise) holds the end (begin) token and raises a
            ValueError if not: without it, the class would be read from an ordinary input column.
        max_position_embeddings (`int`, defaults to 1024): not a limit: every position encoding here is a sinusoid
            computed for any length; kept for the tools that read the field.
        layer_norm_eps (`float`, defaults to 1e-5): as in BERT.
        initializer_range (`float`, defaults to 1.0): standard deviation of the token embeddings at initialisation:
            N(0, 1), PyTorch's `nn.Embedding` default, which the authors' code keeps. BERT's 0.02 leaves the content
            attention of the first step near zero and trains CTL markedly slower.
    """

    model_type = "ndr"

    def __init__(
        self,
        vocab_size=32,
        hidden_size=128,
        num_attention_heads=4,
        intermediate_size=256,
        num_layers=14,
        num_steps=None,
        attention_type="geometric",
        position_encoding="none",
        abs_rel_gate_per_head=False,
        copy_gate=True,
        update_normalization="layernorm",
        classifier_position="last",
        hidden_dropout_prob=0.1,
        attention_query_dropout=0.1,
        attention_key_dropout=0.0,
        gate_dropout=0.0,
        normalize_geometric_attention=False,
        gate_bias_init=-3.0,
        max_position_embeddings=1024,
        layer_norm_eps=1e-5,
        initializer_range=1.0,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=None,
        **kwargs,
    ):
        for name, value, allowed in (
            ("attention_type", attention_type, ATTENTION_TYPES),
            ("position_encoding", position_encoding, POSITION_ENCODINGS),
            ("update_normalization", update_normalization, UPDATE_NORMALIZATIONS),
            ("classifier_position", classifier_position, CLASSIFIER_POSITIONS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        _check_sizes(vocab_size=vocab_size, hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                     intermediate_size=intermediate_size)
        for name, value in (("hidden_dropout_prob", hidden_dropout_prob),
                            ("attention_query_dropout", attention_query_dropout),
                            ("attention_key_dropout", attention_key_dropout), ("gate_dropout", gate_dropout)):
            if not 0 <= value < 1:
                raise ValueError(f"{name} must lie in [0, 1), got {value!r}")
        if attention_type == "geometric" and position_encoding in ("relative", "abs_rel_gated"):
            raise ValueError(f"position_encoding={position_encoding!r} is defined for softmax attention only")
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be a multiple of num_attention_heads ({num_attention_heads})"
            )
        if num_layers < 1 or (num_steps is not None and num_steps < 1):
            raise ValueError(f"num_layers and num_steps must be >= 1, got {num_layers} and {num_steps}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.num_layers = num_layers
        self.num_steps = num_steps
        self.attention_type = attention_type
        self.position_encoding = position_encoding
        self.abs_rel_gate_per_head = abs_rel_gate_per_head
        self.copy_gate = copy_gate
        self.update_normalization = update_normalization
        self.classifier_position = classifier_position
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_query_dropout = attention_query_dropout
        self.attention_key_dropout = attention_key_dropout
        self.gate_dropout = gate_dropout
        self.normalize_geometric_attention = normalize_geometric_attention
        self.gate_bias_init = gate_bias_init
        self.max_position_embeddings = max_position_embeddings
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id
        super().__init__(pad_token_id=pad_token_id, **kwargs)


__all__ = ["NDRConfig"]
