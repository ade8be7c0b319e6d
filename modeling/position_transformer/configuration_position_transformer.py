"""Position Transformer configuration: one pre-LayerNorm transformer whose position signal is a config field, so that
the position encodings of the length-generalization literature run on one identical backbone (as Kazemnejad, Padhi,
Natesan Ramamurthy, Das and Reddy, "The Impact of Positional Encoding on Length Generalization in Transformers",
NeurIPS 2023, arXiv:2305.19466, compare them on one decoder)."""

from transformers import PretrainedConfig

POSITION_ENCODINGS = ("none", "absolute", "rope", "t5_bias", "fire", "alibi", "abacus")
CLASSIFIER_POSITIONS = ("first", "last")


# Copied from lengthgen.modeling.ndr.configuration_ndr._check_sizes
def _check_sizes(**sizes):
    """ValueError naming the first of `sizes` (a config's widths and counts) that is not a positive integer."""
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


class PositionTransformerConfig(PretrainedConfig):
    r"""
    Configuration of a Position Transformer: token embeddings, `num_hidden_layers` pre-LayerNorm blocks (self-attention
    and a GELU feed-forward network, each added to the residual stream after a LayerNorm of its input) and a final
    LayerNorm. `position_encoding` chooses the one position signal; everything else is the same for all of them.

    When the forward call is given `position_ids` (for instance the sorted positions drawn from a larger range of
    Ruoss et al.'s randomized positional encodings), every position-dependent encoding reads them instead of
    0, 1, ..., n - 1: `"absolute"` looks them up, `"rope"` rotates by them, and `"t5_bias"`, `"fire"` and `"alibi"`
    take the relative distance of query i and key j as position_ids[i] - position_ids[j]. `"none"` and `"abacus"` do
    not use them.

    Args:
        vocab_size (`int`, defaults to 32): number of token ids.
        hidden_size (`int`, defaults to 128): d_model.
        num_hidden_layers (`int`, defaults to 4): transformer blocks.
        num_attention_heads (`int`, defaults to 4): heads; d_head = hidden_size / num_attention_heads.
        intermediate_size (`int`, defaults to 512): inner width of the GELU feed-forward network.
        is_causal (`bool`, defaults to `True`): causal self-attention (a decoder), position i attending to positions
            0 ... i. Without a position encoding (`"none"`) the causal mask is the only source of order information;
            a bidirectional `"none"` model sees a bag of tokens.
        position_encoding (`str`, defaults to `"none"`): the position signal:
            `"none"`, NoPE (Kazemnejad et al. 2023): no position signal at all.
            `"absolute"`: a learned embedding of the position added to the token embedding (GPT-2, BERT), for
            positions below `max_position_embeddings`.
            `"rope"`: rotary position embeddings (Su et al., "RoFormer: Enhanced Transformer with Rotary Position
            Embedding", arXiv:2104.09864) on queries and keys, as Llama applies them, with base `rope_theta`.
            `"t5_bias"`: T5's relative position bias (Raffel et al., "Exploring the Limits of Transfer Learning with a
            Unified Text-to-Text Transformer", JMLR 2020, arXiv:1910.10683): a learned scalar per head and
            log-spaced bucket of the distance j - i added to the attention logits, one table shared by all layers;
            the buckets are T5's bidirectional ones, or its causal ones when `is_causal`.
            `"fire"`: FIRE (Li et al., "Functional Interpolation for Relative Positions Improves Long Context
            Transformers", ICLR 2024, arXiv:2310.04418): a bias f_theta(psi(i - j) / psi(max(L, i))) with
            psi(x) = log(c x + 1), learnable c and L, and f_theta a small MLP with one output per head, shared by all
            layers. Causal models only.
            `"alibi"`: ALiBi (Press, Smith and Lewis, "Train Short, Test Long: Attention with Linear Biases Enables
            Input Length Extrapolation", ICLR 2022, arXiv:2108.12409): a fixed bias -m_h (i - j) on the logits, a
            slope m_h per head from the geometric sequence of the paper (1/2, 1/4, ..., 1/256 for 8 heads); no
            parameters. The paper's models are causal; a bidirectional model takes -m_h |i - j|.
            `"abacus"`: Abacus embeddings (McLeish et al., "Transformers Can Do Arithmetic with the Right Embeddings",
            NeurIPS 2024, arXiv:2405.17399): each digit token (`abacus_digit_token_ids`) gets a learned embedding of
            its place in its number (1 for the number's first digit, 2 for the next, ...), other tokens none (the
            authors' code adds a learned row 0 to every other token, which the token embeddings can absorb); in
            training every sequence's places are shifted by a random offset in [0, `abacus_max_offset`]. No other
            position signal (the attention is NoPE's).
        max_position_embeddings (`int`, defaults to 512): rows of the `"absolute"` table: the largest position id is
            max_position_embeddings - 1. The other encodings have no length limit.
        rope_theta (`float`, defaults to 10000.0): base of the rotary frequencies, theta_k = rope_theta^(-2k/d_head)
            (`"rope"`).
        relative_attention_num_buckets (`int`, defaults to 32): T5's buckets of the relative distance (`"t5_bias"`);
            a bidirectional model gives half to each direction.
        relative_attention_max_distance (`int`, defaults to 128): T5's distance from which every distance falls in
            the last bucket (`"t5_bias"`); the buckets between half the exact range and it are log-spaced.
        fire_mlp_width (`int`, defaults to 32): hidden width of f_theta, a one-hidden-layer ReLU MLP from the
            normalised distance to one bias per head (`"fire"`; the paper's 32).
        fire_init_c (`float`, defaults to 0.1): initial c of psi (`"fire"`; the paper's 0.1).
        fire_init_threshold (`float`, defaults to 512.0): initial threshold L (`"fire"`; the paper's 512). As in the
            paper's implementation, L = |s| * fire_init_threshold with a learned multiplier s that starts at 1.
        abacus_digit_token_ids (`list[int]`): the token ids of the digits (`"abacus"`, where it must not be empty; a
            tokenizer's ids of "0" ... "9", for instance).
        abacus_max_offset (`int`, defaults to 99): the largest random offset of a training sequence's digit places
            (`"abacus"`): a number's first digit gets place 1 + k with k uniform in [0, abacus_max_offset], drawn per
            sequence; at evaluation k = 0. With 99, first places span [1, 100], as in the authors' code (which draws
            one offset per batch).
        abacus_max_digits (`int`, defaults to 128): the longest number, in digits, of a training sequence
            (`"abacus"`). The table has abacus_max_offset + abacus_max_digits + 1 rows (row 0, the zero vector, for
            tokens that are not digits), so an evaluated number may have up to abacus_max_offset + abacus_max_digits
            digits.
        classifier_position (`str`, *optional*): the column `PositionTransformerForSequenceClassification` reads:
            `"first"` for a bidirectional model, `"last"` (the last real token) for a causal one; by default the one
            that sees the whole input.
        hidden_dropout_prob (`float`, defaults to 0.1): dropout on the embeddings and on each block's output.
        attention_probs_dropout_prob (`float`, defaults to 0.1): dropout on the attention weights.
        layer_norm_eps (`float`, defaults to 1e-5): epsilon of every LayerNorm.
        initializer_range (`float`, defaults to 0.02): standard deviation of the weights at initialisation (FIRE's
            MLP keeps torch's default initialisation, as the paper's implementation).
    """

    model_type = "position_transformer"

    def __init__(
        self,
        vocab_size=32,
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=512,
        is_causal=True,
        position_encoding="none",
        max_position_embeddings=512,
        rope_theta=10000.0,
        relative_attention_num_buckets=32,
        relative_attention_max_distance=128,
        fire_mlp_width=32,
        fire_init_c=0.1,
        fire_init_threshold=512.0,
        abacus_digit_token_ids=None,
        abacus_max_offset=99,
        abacus_max_digits=128,
        classifier_position=None,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        layer_norm_eps=1e-5,
        initializer_range=0.02,
        pad_token_id=0,
        **kwargs,
    ):
        if position_encoding not in POSITION_ENCODINGS:
            raise ValueError(f"position_encoding must be one of {POSITION_ENCODINGS}, got {position_encoding!r}")
        _check_sizes(vocab_size=vocab_size, hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                     intermediate_size=intermediate_size)
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size ({hidden_size}) must be a multiple of num_attention_heads ({num_attention_heads})"
            )
        if num_hidden_layers < 1:
            raise ValueError(f"num_hidden_layers must be >= 1, got {num_hidden_layers}")
        if position_encoding == "rope" and (hidden_size // num_attention_heads) % 2:
            raise ValueError(f"position_encoding='rope' rotates pairs of coordinates: the head size "
                             f"hidden_size / num_attention_heads = {hidden_size // num_attention_heads} must be even")
        if max_position_embeddings < 1:
            raise ValueError(f"max_position_embeddings must be >= 1, got {max_position_embeddings}")
        if rope_theta <= 1:
            raise ValueError(f"rope_theta must be > 1, got {rope_theta}")
        # T5's exact range is num_buckets // 2 (// 4 for a bidirectional model), and the log-spaced buckets need it
        # to be at least 1 and below relative_attention_max_distance
        exact = relative_attention_num_buckets // (2 if is_causal else 4)
        if position_encoding == "t5_bias" and exact < 1:
            kind = "causal" if is_causal else "bidirectional"
            raise ValueError(f"relative_attention_num_buckets must be >= {2 if is_causal else 4} for a {kind} model, "
                             f"got {relative_attention_num_buckets}")
        if position_encoding == "t5_bias" and relative_attention_max_distance <= exact:
            raise ValueError(f"relative_attention_max_distance must exceed the exact range ({exact} distances), got "
                             f"{relative_attention_max_distance}")
        if position_encoding == "fire" and not is_causal:
            raise ValueError("position_encoding='fire' is defined for causal attention (i >= j): set is_causal=True")
        if fire_mlp_width < 1:
            raise ValueError(f"fire_mlp_width must be >= 1, got {fire_mlp_width}")
        if fire_init_threshold <= 0:
            raise ValueError(f"fire_init_threshold must be > 0, got {fire_init_threshold}")
        abacus_digit_token_ids = list(abacus_digit_token_ids or [])
        if any(isinstance(i, bool) or not hasattr(i, "__index__") or i < 0 for i in abacus_digit_token_ids):
            raise ValueError(f"abacus_digit_token_ids must be non-negative token ids, got {abacus_digit_token_ids}")
        abacus_digit_token_ids = [i.__index__() for i in abacus_digit_token_ids]
        if position_encoding == "abacus" and not abacus_digit_token_ids:
            raise ValueError("position_encoding='abacus' needs abacus_digit_token_ids, the token ids of the digits")
        if abacus_max_offset < 0:
            raise ValueError(f"abacus_max_offset must be >= 0, got {abacus_max_offset}")
        if abacus_max_digits < 1:
            raise ValueError(f"abacus_max_digits must be >= 1, got {abacus_max_digits}")
        if classifier_position is None:
            classifier_position = "last" if is_causal else "first"
        if classifier_position not in CLASSIFIER_POSITIONS:
            raise ValueError(f"classifier_position must be one of {CLASSIFIER_POSITIONS}, got {classifier_position!r}")
        if is_causal and classifier_position == "first":
            raise ValueError("A causal model's first column sees only the first token: use classifier_position='last'")
        for name, p in (("hidden_dropout_prob", hidden_dropout_prob),
                        ("attention_probs_dropout_prob", attention_probs_dropout_prob)):
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name} must lie in [0, 1), got {p}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.is_causal = is_causal
        self.position_encoding = position_encoding
        self.max_position_embeddings = max_position_embeddings
        self.rope_theta = rope_theta
        self.relative_attention_num_buckets = relative_attention_num_buckets
        self.relative_attention_max_distance = relative_attention_max_distance
        self.fire_mlp_width = fire_mlp_width
        self.fire_init_c = fire_init_c
        self.fire_init_threshold = fire_init_threshold
        self.abacus_digit_token_ids = abacus_digit_token_ids
        self.abacus_max_offset = abacus_max_offset
        self.abacus_max_digits = abacus_max_digits
        self.classifier_position = classifier_position
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        super().__init__(pad_token_id=pad_token_id, **kwargs)


__all__ = ["PositionTransformerConfig"]
