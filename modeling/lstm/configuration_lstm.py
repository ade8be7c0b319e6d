"""Configuration of the LSTM classifier of the recurrent-inductive-bias study (Abnar, Dehghani and Zuidema, 2020)."""

from transformers import PretrainedConfig


# Copied from lengthgen.modeling.ndr.configuration_ndr._check_sizes
def _check_sizes(**sizes):
    """ValueError naming the first of `sizes` (a config's widths and counts) that is not a positive integer."""
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


class LSTMClassifierConfig(PretrainedConfig):
    r"""
    An LSTM over token embeddings that classifies from its state at the last real token: the recurrent model of
    Abnar et al.'s subject-verb agreement study (after Linzen et al. 2016), with the interface of the library's
    transformer classifiers (`input_ids`, `attention_mask`, `labels`), so every model of the study trains with the
    same script.

    Args:
        vocab_size (`int`, defaults to 32): number of token ids.
        hidden_size (`int`, defaults to 128): embedding and LSTM state width.
        num_layers (`int`, defaults to 1): stacked LSTM layers.
        bidirectional (`bool`, defaults to `False`): also read the sequence right to left (`hidden_size` units per
            direction), the classifier taking the last layer's final state of each direction: the bidirectional LSTM
            baseline of the Neural Data Router thesis (Csordás, Table 5.1), which solves CTL in both presentation
            orders where the left-to-right LSTM fails the backward one.
        hidden_dropout_prob (`float`, defaults to 0.1): dropout on the embeddings, between layers and before the
            classifier.
        initializer_range (`float`, defaults to 0.02): standard deviation of the embeddings and the classifier at
            initialisation (the LSTM keeps PyTorch's uniform initialisation).
    """

    model_type = "lstm_classifier"

    def __init__(self, vocab_size=32, hidden_size=128, num_layers=1, bidirectional=False, hidden_dropout_prob=0.1,
                 initializer_range=0.02, pad_token_id=0, **kwargs):
        _check_sizes(vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bidirectional = bidirectional
        self.hidden_dropout_prob = hidden_dropout_prob
        self.initializer_range = initializer_range
        super().__init__(pad_token_id=pad_token_id, **kwargs)


__all__ = ["LSTMClassifierConfig"]
