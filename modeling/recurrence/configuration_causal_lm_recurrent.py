"""Configuration of any causal language model with window-level recurrence (Yoshida et al. 2020, §3) or with
memory tokens (the Recurrent Memory Transformer's baseline): the wrapped model's own config plus the recurrence's
fields."""

from transformers import AutoConfig, PreTrainedConfig

from .recurrence_module import check_overlap, check_recurrence_fields


class CausalLMWithRecurrenceConfig(PreTrainedConfig):
    r"""
    The config of a `CausalLMWithRecurrence`: `decoder_config`, the wrapped causal LM's config (any transformers
    family: Llama, Qwen2/3, Mistral, Gemma 2/3, Phi-3, GPT-NeoX, GPT-2, ...), and how its input is read in windows
    and what carries from one window to the next.

    Args:
        decoder_config (`dict` or `PreTrainedConfig`): the wrapped model's config (its `model_type` picks the family).
        window_size (`int`, defaults to 300): T, tokens per window (paper: 300). The positions a window occupies (T,
            plus one for h_prev in a rotary family, plus 2 x `num_memory_tokens`) must fit the model's
            `max_position_embeddings`.
        overlap (`int`, defaults to 0): o, tokens each window repeats from the previous one, as context only (§4.2).
        insertion_layer (`int`, defaults to 1): l_ins, the (0-based) index of the decoder layer whose self-attention
            gets h_prev as one extra key and value; in a hybrid, one of its softmax-attention layers (`layer_types`).
            The paper's l_ins = 2 counts layers from 1 (§3.1: h^(l) is the output of the l-th layer; §5.4: "the
            second layer"): index 1 here.
        recurrence_hidden_size (`int`, defaults to 200), recurrence_num_hidden_layers (`int`, defaults to 3): the
            feed-forward network from the pooled z to h_prev (paper: 3 x 200).
        recurrence_pooling (`str`, defaults to "layer_weighted"): "layer_weighted" is Eq. 1 (every layer's output,
            softmax-normalised learned layer weights), "last_layer" the last layer only.
        use_recurrence (`bool`, defaults to True): False reads every window as the unmodified model (the disjoint or
            overlapped baseline of Tables 1-2), with the same windows and loss accounting.
        num_memory_tokens (`int`, defaults to 0): m > 0 carries m memory tokens instead of h_prev (the Recurrent
            Memory Transformer, Bulatov et al. 2022): m learned embeddings are read before each window's tokens and
            written after them; the last hidden states at the written positions are the next window's read memory.
            Needs `use_recurrence`.
        carry_layer_states (`bool`, defaults to False): in a hybrid (Qwen3.5, Qwen3-Next, LFM2, Granite 4, Bamba,
            Falcon-H1, Nemotron-H, Kimi Linear) or a Mamba-2 model, its recurrent layers (gated DeltaNet, Mamba-2,
            short convolutions, delta attention) carry their state from one window to the next, so they read the
            whole document as in one pass, while its softmax-attention layers read each window afresh; with h_prev,
            without (`use_recurrence=False`), not with memory tokens. With an overlap, the state a window passes on is
            the one after its first `T - overlap` tokens (those the next window does not repeat), so every token
            enters the states once. Not in the paper, whose GPT-2 has no such layers (there every layer reads each
            window afresh, the default here).
    """

    model_type = "causal_lm_recurrent"

    def __init__(
        self,
        decoder_config=None,
        window_size=300,
        overlap=0,
        insertion_layer=1,
        recurrence_hidden_size=200,
        recurrence_num_hidden_layers=3,
        recurrence_pooling="layer_weighted",
        use_recurrence=True,
        num_memory_tokens=0,
        carry_layer_states=False,
        **kwargs,
    ):
        for derived in ("hidden_size", "num_hidden_layers", "vocab_size"):  # read from decoder_config below
            kwargs.pop(derived, None)
        super().__init__(**kwargs)
        if decoder_config is None:
            decoder_config = {"model_type": "llama"}
        if isinstance(decoder_config, dict):
            decoder_config = dict(decoder_config)
            decoder_config = AutoConfig.for_model(decoder_config.pop("model_type"), **decoder_config)
        self.decoder_config = decoder_config.to_dict()
        self.hidden_size = decoder_config.hidden_size
        self.num_hidden_layers = decoder_config.num_hidden_layers
        self.vocab_size = decoder_config.vocab_size
        check_overlap(window_size, overlap)
        check_recurrence_fields(insertion_layer, self.num_hidden_layers, "num_hidden_layers", recurrence_hidden_size,
                                recurrence_num_hidden_layers, recurrence_pooling)
        if num_memory_tokens < 0 or (num_memory_tokens and not use_recurrence):
            raise ValueError(f"num_memory_tokens must be >= 0, and 0 without use_recurrence, got {num_memory_tokens}")
        check_window_positions(decoder_config, window_size, num_memory_tokens)
        if carry_layer_states and num_memory_tokens:
            raise ValueError(f"carry_layer_states carries h_prev or nothing beside the layers' states, not memory "
                             f"tokens, got num_memory_tokens={num_memory_tokens}")
        self.window_size = window_size
        self.overlap = overlap
        self.insertion_layer = insertion_layer
        self.recurrence_hidden_size = recurrence_hidden_size
        self.recurrence_num_hidden_layers = recurrence_num_hidden_layers
        self.recurrence_pooling = recurrence_pooling
        self.use_recurrence = use_recurrence
        self.num_memory_tokens = num_memory_tokens
        self.carry_layer_states = carry_layer_states

    def decoder_config_object(self) -> PreTrainedConfig:
        """`decoder_config` as the family's own config object."""
        fields = dict(self.decoder_config)
        return AutoConfig.for_model(fields.pop("model_type"), **fields)


def max_positions(config) -> int | None:
    """The longest sequence the model has positions for (`max_position_embeddings`, GPT-2's `n_positions`)."""
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


def window_positions(window_size: int, num_memory_tokens: int, rotary_h_prev: bool) -> int:
    """Positions one window occupies: its T tokens, plus the read and written memory tokens, plus h_prev's position
    (-1) where it is rotated (a rotary family with h_prev)."""
    return window_size + 2 * num_memory_tokens + int(rotary_h_prev)


def check_window_positions(config, window_size: int, num_memory_tokens: int = 0, rotary_h_prev: bool = False):
    """ValueError for a window that needs more positions than the model `config` has."""
    positions = window_positions(window_size, num_memory_tokens, rotary_h_prev)
    limit = max_positions(config)
    if limit is not None and positions > limit:
        raise ValueError(
            f"window_size={window_size} occupies {positions} positions, more than the model's {limit}: choose "
            f"window_size <= {window_size - (positions - limit)}"
        )


__all__ = ["CausalLMWithRecurrenceConfig", "check_window_positions", "max_positions"]
