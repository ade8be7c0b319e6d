"""Forward FLOPs per predicted token of a GPT-2 run in windows (Tables 1-2's FLOPs/token column)."""

from .recurrence_module import check_overlap


def flops_per_token(config, window: int, overlap: int = 0) -> float:
    """Forward FLOPs per predicted token when a GPT-2 reads text in windows of `window` tokens that repeat `overlap`
    tokens of the previous window.

    Counted as Kaplan et al. (2020) count a decoder's forward pass, which reproduces the paper's column: per token,
    2 FLOPs per non-embedding weight (n_layer x (4 d^2 attention + 2 d d_ff feed-forward)) plus 2 n_layer T d for
    the attention scores and values over a T-token context; embeddings, the LM head, LayerNorms and biases are left
    out. A window costs T times that and predicts T - overlap new tokens. The recurrence module (a few 200-wide
    layers once per window) adds well under 0.1% and is left out, as in the paper, where recurrent and plain models
    share the column.

    Args:
        config: any GPT-2 config (`n_layer`, `n_embd`, `n_inner`).
        window: T, tokens per window (paper: 300).
        overlap: tokens repeated from the previous window, 0 <= overlap < window.
    """
    check_overlap(window, overlap)
    d = config.n_embd
    d_ff = getattr(config, "n_inner", None) or 4 * d
    non_embedding_parameters = config.n_layer * (4 * d * d + 2 * d * d_ff)
    per_token_in_window = 2 * non_embedding_parameters + 2 * config.n_layer * window * d
    return per_token_in_window * window / (window - overlap)


__all__ = ["flops_per_token"]
