"""Configuration of GPT-2 with window-level recurrence (Yoshida et al. 2020, "Adding Recurrence to Pretrained
Transformers", §3)."""

from transformers import GPT2Config

from .recurrence_module import check_overlap, check_recurrence_fields


class GPT2WithRecurrenceConfig(GPT2Config):
    r"""
    A `GPT2Config` plus the recurrence of §3.1: the input is read in windows of `window_size` tokens, each window
    repeating the last `overlap` tokens of the previous one; the hidden states of every layer of window i are
    mean-pooled with softmax-normalised learned layer weights (Eq. 1) into z_i, a feed-forward network maps z_i to
    h_prev, and h_prev enters window i + 1 as one extra key and value at layer `insertion_layer`.

    Args:
        window_size (`int`, defaults to 300): T, tokens per window (paper: 300). At most `n_positions`.
        overlap (`int`, defaults to 0): o, tokens each window repeats from the previous one, as context only
            (§4.2); train and evaluate with the same overlap. 0 <= o < T.
        insertion_layer (`int`, defaults to 1): l_ins, the (0-based) index of the GPT-2 block whose self-attention
            gets h_prev as an extra key and value. The paper's l_ins = 2 counts blocks from 1 (§3.1: h^(l) is the
            output of the l-th layer): the second block, index 1 here.
        recurrence_hidden_size (`int`, defaults to 200), recurrence_num_hidden_layers (`int`, defaults to 3): the
            feed-forward network from z to h_prev: this many ReLU hidden layers of this width (paper: 3 x 200).
        recurrence_pooling (`str`, defaults to "layer_weighted"): how z is pooled from a window: "layer_weighted" is
            Eq. 1 (every layer, softmax-normalised learned layer weights; the paper's GPT-2 models), "last_layer" the
            final layer only (the paper's RoBERTa model, §5.4).
        use_recurrence (`bool`, defaults to True): False runs every window as plain GPT-2 (the disjoint or
            overlapped baseline of Tables 1-2) with the same windows and loss accounting.
        Other arguments are `GPT2Config`'s.
    """

    model_type = "gpt2_recurrent"

    def __init__(
        self,
        window_size=300,
        overlap=0,
        insertion_layer=1,
        recurrence_hidden_size=200,
        recurrence_num_hidden_layers=3,
        recurrence_pooling="layer_weighted",
        use_recurrence=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if window_size < 1 or window_size > self.n_positions:
            raise ValueError(
                f"window_size must lie in [1, n_positions={self.n_positions}] (GPT-2 has no position embedding past "
                f"it), got {window_size}"
            )
        check_overlap(window_size, overlap)
        check_recurrence_fields(insertion_layer, self.n_layer, "n_layer", recurrence_hidden_size,
                                recurrence_num_hidden_layers, recurrence_pooling)
        self.window_size = window_size
        self.overlap = overlap
        self.insertion_layer = insertion_layer
        self.recurrence_hidden_size = recurrence_hidden_size
        self.recurrence_num_hidden_layers = recurrence_num_hidden_layers
        self.recurrence_pooling = recurrence_pooling
        self.use_recurrence = use_recurrence


__all__ = ["GPT2WithRecurrenceConfig", "check_overlap"]
