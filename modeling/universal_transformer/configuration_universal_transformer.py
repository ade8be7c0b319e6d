"""Universal Transformer configuration (Dehghani, Gouws, Vinyals, Uszkoreit and Kaiser, "Universal Transformers",
ICLR 2019)."""

from transformers import PretrainedConfig

POSITION_ENCODINGS = ("absolute", "relative", "none")
CLASSIFIER_POSITIONS = ("first", "last")
ACT_ACCUMULATIONS = ("sum", "interpolate")


# Copied from lengthgen.modeling.ndr.configuration_ndr._check_sizes
def _check_sizes(**sizes):
    """ValueError naming the first of `sizes` (a config's widths and counts) that is not a positive integer."""
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


class UniversalTransformerConfig(PretrainedConfig):
    r"""
    Configuration of a Universal Transformer encoder: one post-LayerNorm transformer layer applied `num_layers` times
    with shared weights, optionally with adaptive computation time (ACT) per position. With `is_causal=True` every
    position attends only to itself and earlier ones: the Sequential Universal Transformer of Abnar et al. (2020),
    which classifies from the last real token.

    The Neural Data Router (`NDRConfig`) is this model plus a copy gate and geometric attention; its
    `attention_type="softmax", copy_gate=False` rows are a Universal Transformer without the per-step coordinate
    embedding and without ACT.

    Args:
        vocab_size (`int`, defaults to 32): number of token ids.
        hidden_size (`int`, defaults to 128): d_model.
        num_attention_heads (`int`, defaults to 4): heads; d_head = hidden_size / num_attention_heads.
        intermediate_size (`int`, defaults to 512): inner width of the transition function (a two-layer ReLU
            feed-forward network, the paper's choice for language tasks).
        num_layers (`int`, defaults to 6): steps of the shared layer in training; with ACT, the most steps a position
            may take (the paper's `max_steps`) in a call that does not set `num_steps`, which caps it instead.
        num_steps (`int`, *optional*): steps of every call that does not say (in training too); None = `num_layers`.
            The forward argument `num_steps` runs more or fewer, as for the NDR.
        is_causal (`bool`, defaults to `False`): causal self-attention (the Sequential Universal Transformer).
        position_encoding (`str`, defaults to `"absolute"`): `"absolute"`, the paper's coordinate embedding
            (sinusoidal position and sinusoidal step number, added to the state before every step, Eq. 4);
            `"relative"`, a learned bias per head and clipped offset j - i added to the attention logits (Shaw et
            al. 2018, as a scalar per head) with the sinusoidal step signal still added; `"none"`, neither.
        max_relative_position (`int`, defaults to 16): offsets beyond +-this share one bias (`"relative"`).
        scale_embedding (`bool`, defaults to `True`): token embeddings initialised with standard deviation
            hidden_size^-1/2 and multiplied by hidden_size^1/2, as Vaswani et al. (§3.4) and the authors' code
            (tensor2tensor) do, so that a token and the coordinate embedding P^t (sines and cosines of unit
            amplitude) enter the first step at the same scale. False: BERT's embeddings (standard deviation
            `initializer_range`, unscaled), which P^t outweighs about 35 to 1 at initialisation; with them the
            model learns slowly and some seeds not at all (docs/results/recurrent-bias.md).
        use_act (`bool`, defaults to `False`): adaptive computation time (Graves 2016; Dehghani et al. §2.2): a
            sigmoid halting unit per position; a position halts at the first step where its cumulative halting
            probability reaches `act_threshold` (at `num_layers` steps at the latest), and its output is the states
            of its steps weighted by the halting probabilities, the last weighted by the remainder R. Its ponder cost
            N + R, averaged over the real positions, is added to the loss times `act_loss_weight`.
        act_threshold (`float`, defaults to 0.99): 1 - epsilon (Graves: epsilon = 0.01).
        act_accumulation (`str`, defaults to `"sum"`): how the steps' states make the output: `"sum"`, Graves's
            sum_t p^t H^t (the remainder for the halting step); `"interpolate"`, the authors' code (tensor2tensor, the
            paper's Algorithm 2): after each step output = w H^t + (1 - w) output with the same weights w.
        act_loss_weight (`float`, defaults to 0.01): tau, the ponder cost's weight in the loss.
        act_bias_init (`float`, defaults to 1.0): initial bias of the halting unit, as in the authors' code (halting
            probabilities start near sigmoid(1) = 0.73, so positions start by taking about two steps).
        classifier_position (`str`, *optional*): the column the classifier reads: `"first"` (the [CLS] token) for a
            bidirectional model, `"last"` (the last real token) for a causal one; by default the one that sees the
            whole input.
        hidden_dropout_prob (`float`, defaults to 0.1): dropout on the attention output and in the transition.
        attention_probs_dropout_prob (`float`, defaults to 0.1): dropout on the attention weights.
        max_position_embeddings (`int`, defaults to 512): longest input accepted (the position and step signals are
            sinusoids computed for any length).
        layer_norm_eps (`float`, defaults to 1e-12): as in BERT.
        initializer_range (`float`, defaults to 0.02): standard deviation of the weights at initialisation.
    """

    model_type = "universal_transformer"

    def __init__(
        self,
        vocab_size=32,
        hidden_size=128,
        num_attention_heads=4,
        intermediate_size=512,
        num_layers=6,
        num_steps=None,
        is_causal=False,
        position_encoding="absolute",
        max_relative_position=16,
        scale_embedding=True,
        use_act=False,
        act_threshold=0.99,
        act_accumulation="sum",
        act_loss_weight=0.01,
        act_bias_init=1.0,
        classifier_position=None,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        pad_token_id=0,
        **kwargs,
    ):
        if position_encoding not in POSITION_ENCODINGS:
            raise ValueError(f"position_encoding must be one of {POSITION_ENCODINGS}, got {position_encoding!r}")
        if classifier_position is None:
            classifier_position = "last" if is_causal else "first"
        if classifier_position not in CLASSIFIER_POSITIONS:
            raise ValueError(f"classifier_position must be one of {CLASSIFIER_POSITIONS}, got {classifier_position!r}")
        if is_causal and classifier_position == "first":
            raise ValueError("A causal model's first column sees only the first token: use classifier_position='last'")
        _check_sizes(vocab_size=vocab_size, hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                     intermediate_size=intermediate_size)
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be a multiple of num_attention_heads ({num_attention_heads})"
            )
        if num_layers < 1 or (num_steps is not None and num_steps < 1):
            raise ValueError(f"num_layers and num_steps must be >= 1, got {num_layers} and {num_steps}")
        if act_accumulation not in ACT_ACCUMULATIONS:
            raise ValueError(f"act_accumulation must be one of {ACT_ACCUMULATIONS}, got {act_accumulation!r}")
        if not 0.0 < act_threshold <= 1.0:
            raise ValueError(f"act_threshold must lie in (0, 1], got {act_threshold}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.num_layers = num_layers
        self.num_steps = num_steps
        self.is_causal = is_causal
        self.position_encoding = position_encoding
        self.max_relative_position = max_relative_position
        self.scale_embedding = scale_embedding
        self.use_act = use_act
        self.act_threshold = act_threshold
        self.act_accumulation = act_accumulation
        self.act_loss_weight = act_loss_weight
        self.act_bias_init = act_bias_init
        self.classifier_position = classifier_position
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        super().__init__(pad_token_id=pad_token_id, **kwargs)


__all__ = ["UniversalTransformerConfig"]
