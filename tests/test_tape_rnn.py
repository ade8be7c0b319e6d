"""Tape-RNN: one tape update against the equation worked by hand, the whole model against its equations written
out, saturated actions against a discrete tape and head, the jump length, padding, gradients, the Auto classes and
remote code."""

import subprocess
import sys

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

from lengthgen.modeling import TapeRNNConfig, TapeRNNForSequenceClassification, TapeRNNModel
from lengthgen.modeling.tape_rnn import jump_lengths, tape_indices, update_tape


def tiny(**fields):
    defaults = dict(vocab_size=7, hidden_size=6, tape_cell_size=2, tape_size=5, num_labels=3)
    return TapeRNNConfig(**{**defaults, **fields})


def batch(lengths=(6, 4), vocab_size=7, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab_size, (len(lengths), max(lengths)), generator=generator)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    return ids.masked_fill(mask == 0, 0), mask


def step(tape, actions, write_value, jump, jump_writes=False):
    """T_t[i] = a_ws W[i] + a_wl W[i+1] + a_wr W[i-1] + a_jl T[i+l] + a_jr T[i-l] (mod M), W = T with W[0] = w, for one
    row, cell by cell (with `jump_writes`, W in the jump terms too)."""
    M = len(tape)
    W = [write_value] + list(tape[1:])
    J = W if jump_writes else list(tape)
    a = actions
    return torch.stack([a[0] * W[i] + a[1] * W[(i + 1) % M] + a[2] * W[(i - 1) % M] + a[3] * J[(i + jump) % M]
                        + a[4] * J[(i - jump) % M] for i in range(M)])


def test_one_tape_update_is_the_equation_worked_by_hand():
    """M = 3 cells of one value, T = [1, 2, 3] (cell 0 under the head), w = 9, l = 1, a = (.1, .2, .3, .15, .25):
    W = [9, 2, 3];
    T'[0] = .1*9 + .2*2 + .3*3 + .15*T[1] + .25*T[2] = 0.9 + 0.4 + 0.9 + 0.3 + 0.75 = 3.25
    T'[1] = .1*2 + .2*3 + .3*9 + .15*T[2] + .25*T[0] = 0.2 + 0.6 + 2.7 + 0.45 + 0.25 = 4.2
    T'[2] = .1*3 + .2*9 + .3*2 + .15*T[0] + .25*T[1] = 0.3 + 1.8 + 0.6 + 0.15 + 0.5 = 3.35
    With jump_writes the jumps read W: T'[0] = 3.25, T'[1] = 4.2 + .25*(9 - 1) = 6.2, T'[2] = 3.35 + .15*8 = 4.55"""
    tape = torch.tensor([[[1.0], [2.0], [3.0]]])
    actions = torch.tensor([[0.1, 0.2, 0.3, 0.15, 0.25]])
    write = torch.tensor([[9.0]])
    for jump_writes, expected in ((False, [3.25, 4.2, 3.35]), (True, [3.25, 6.2, 4.55])):
        indices = tape_indices(torch.tensor([1]), 3, jump_writes)
        new = update_tape(tape, actions, write, indices, jump_writes)
        torch.testing.assert_close(new, torch.tensor(expected)[None, :, None])


@pytest.mark.parametrize("jump_writes", [False, True])
def test_a_batched_tape_update_is_the_equation_row_by_row(jump_writes):
    torch.manual_seed(0)
    tape, write = torch.randn(3, 5, 2), torch.randn(3, 2)
    actions = torch.softmax(torch.randn(3, 5), -1)
    jumps = torch.tensor([2, 3, 7])  # 7 wraps round the 5 cells
    new = update_tape(tape, actions, write, tape_indices(jumps, 5, jump_writes), jump_writes)
    for row in range(3):
        expected = step(tape[row], actions[row], write[row], int(jumps[row]), jump_writes)
        torch.testing.assert_close(new[row], expected)


def hand_tape_rnn(model, ids, jumps):
    """The model's equations written out with its weights, one row and one cell at a time."""
    config = model.config
    H, c = config.hidden_size, config.tape_cell_size
    M = config.tape_size or ids.shape[1]  # by default one cell per (real) token
    W_h, W_r = model.controller.recurrent_weights.weight, model.controller.read_weights.weight
    b = model.controller.read_weights.bias
    W_x = model.controller.input_weights.weight
    head_w, head_b = model.tape_head.weight, model.tape_head.bias
    rows = []
    for row, jump in zip(ids.tolist(), jumps, strict=True):
        h, cell = torch.zeros(H), torch.zeros(H)
        tape = torch.zeros(M, c)
        outputs, actions, reads = [], [], []
        for x in row:
            r = tape[0]
            pre = W_x[x] + b + W_h @ h + W_r @ r
            if config.controller == "rnn":
                h = torch.tanh(pre)
            else:
                i, f, g, o = pre.chunk(4)
                cell = torch.sigmoid(f + 1) * cell + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(cell)
            a = torch.softmax(head_w[:5] @ h + head_b[:5], dim=0)
            w = head_w[5:] @ h + head_b[5:]
            for layer in model.write_layers:
                w = layer.weight @ torch.relu(w) + layer.bias
            tape = step(tape, a, w, jump, config.jump_writes)
            outputs.append(h)
            actions.append(a)
            reads.append(r)
        rows.append((torch.stack(outputs), torch.stack(actions), torch.stack(reads)))
    return [torch.stack(parts) for parts in zip(*rows, strict=True)]


@pytest.mark.parametrize("fields", [{}, dict(tape_size=None), dict(controller="lstm"),
                                    dict(jump_writes=True, write_mlp_sizes=[4, 3])])
def test_the_model_is_its_equations_written_out(fields):
    """Every parameter drawn afresh first: at initialisation the read and head biases are zero, where a missing bias
    would go unseen."""
    torch.manual_seed(0)
    model = TapeRNNModel(tiny(**fields)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.5)
    ids, _ = batch(lengths=(6, 6))
    with torch.no_grad():
        out = model(ids, input_length=torch.tensor([2, 3]))
        hidden, actions, reads = hand_tape_rnn(model, ids, [2, 3])
    torch.testing.assert_close(out.last_hidden_state, hidden)
    torch.testing.assert_close(out.actions, actions)
    torch.testing.assert_close(out.tape_reads, reads)


# tokens of the saturated model: each picks one action; the WRITE-* tokens write [token, 10 * token]
WRITE_STAY, WRITE_LEFT, WRITE_RIGHT, JUMP_LEFT, JUMP_RIGHT, END = 1, 2, 3, 4, 5, 6


def saturated_model(tape_size, jump_writes):
    """Token k in 1..5 takes action k - 1 with probability exactly 1 and writes [k, 10 k]: the controller's state is
    exactly e_(k-1) (tanh(20) = 1 in float32) and the action logits differ by 200 (exp(-200) = 0 in float32)."""
    config = tiny(hidden_size=6, tape_size=tape_size, input_end_token_id=END, jump_writes=jump_writes)
    model = TapeRNNModel(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.controller.input_weights.weight[1:7] = 20 * torch.eye(6)
        A = torch.zeros(5, 6)
        A[torch.arange(5), torch.arange(5)] = 200.0
        A[0, 5] = 200.0  # END: WRITE-STAY
        D = torch.zeros(2, 6)
        D[0, :6] = torch.arange(1.0, 7.0)
        D[1, :6] = 10 * torch.arange(1.0, 7.0)
        model.tape_head.weight.copy_(torch.cat([A, D]))
    return model


def discrete_tape_reads(tokens, jump, size, jump_writes):
    """A Turing machine's tape of `size` cells on a circle and a head: the cell under the head before each token.
    WRITE-* writes, then the head moves one cell (LEFT: to the next index, the authors' convention) or stays; JUMP-*
    moves it `jump` cells (writing first only with `jump_writes`)."""
    tape, head, reads = [[0.0, 0.0] for _ in range(size)], 0, []
    moves = {WRITE_STAY: 0, END: 0, WRITE_LEFT: 1, WRITE_RIGHT: -1, JUMP_LEFT: jump, JUMP_RIGHT: -jump}
    for token in tokens:
        reads.append(tape[head])
        if token not in (JUMP_LEFT, JUMP_RIGHT) or jump_writes:
            tape[head] = [float(token), 10.0 * token]
        head = (head + moves[token]) % size
    return torch.tensor(reads)


@pytest.mark.parametrize("tape_size", [7, None])
@pytest.mark.parametrize("jump_writes", [False, True])
def test_saturated_actions_are_a_discrete_tape_with_jumps_of_the_input_length(tape_size, jump_writes):
    """Two rows, right-padded: inputs of 3 and 5 tokens, then END, then moves and jumps; each row jumps by its own |x|
    (tokens up to and including END). On 7 cells the second row's head goes round the circle; by default each row's
    tape has one cell per token (9 and 11)."""
    rows = [[WRITE_LEFT, WRITE_LEFT, WRITE_RIGHT, END, JUMP_RIGHT, WRITE_LEFT, JUMP_LEFT, WRITE_STAY, WRITE_RIGHT],
            [WRITE_LEFT, WRITE_LEFT, WRITE_LEFT, WRITE_LEFT, WRITE_LEFT, END, JUMP_RIGHT, WRITE_LEFT, WRITE_LEFT,
             JUMP_LEFT, WRITE_RIGHT]]
    length = max(map(len, rows))
    ids = torch.tensor([row + [0] * (length - len(row)) for row in rows])
    mask = (torch.arange(length)[None, :] < torch.tensor([len(row) for row in rows])[:, None]).long()
    model = saturated_model(tape_size, jump_writes)
    assert jump_lengths(model.config, ids, mask).tolist() == [4, 6]
    out = model(ids, attention_mask=mask)
    for row, tokens in enumerate(rows):
        actions = torch.nn.functional.one_hot(torch.tensor([0 if t == END else t - 1 for t in tokens]), 5).float()
        assert torch.equal(out.actions[row, : len(tokens)], actions)
        expected = discrete_tape_reads(tokens, [4, 6][row], tape_size or len(tokens), jump_writes)
        assert torch.equal(out.tape_reads[row, : len(tokens)], expected)


def test_a_row_shorter_than_the_batch_keeps_its_own_circle():
    """Row sizes 3 and 5 on a padded tape of 5 cells: row 0 moves on cells 0-2 only, the cells after stay put.
    Indices 0-4 are a row's W (written), 5-9 its T (before the write)."""
    indices = tape_indices(torch.tensor([1, 2]), 5, False, row_sizes=torch.tensor([3, 5]))
    assert indices[0].tolist() == [[0, 1, 2, 3, 4], [1, 2, 0, 3, 4], [2, 0, 1, 3, 4], [6, 7, 5, 3, 4],
                                   [7, 5, 6, 3, 4]]
    assert (indices[1] - 10).tolist() == [[0, 1, 2, 3, 4], [1, 2, 3, 4, 0], [4, 0, 1, 2, 3], [7, 8, 9, 5, 6],
                                          [8, 9, 5, 6, 7]]  # row 1's W and T follow row 0's 10 cells


def test_the_jump_length_is_the_input_up_to_its_end_token_else_the_real_tokens():
    ids = torch.tensor([[2, 5, 3, 6, 4, 4, 0], [2, 6, 6, 4, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0]])
    mask = (ids != 0).long()
    assert jump_lengths(tiny(input_end_token_id=6), ids, mask).tolist() == [4, 2, 5]
    assert jump_lengths(tiny(), ids, mask).tolist() == [6, 4, 5]
    assert jump_lengths(tiny(), ids, None).tolist() == [7, 7, 7]
    assert jump_lengths(tiny(input_end_token_id=6), ids, mask, input_length=3).tolist() == [3, 3, 3]
    assert jump_lengths(tiny(), ids, mask, input_length=torch.tensor([1, 2, 3])).tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="input_length"):
        jump_lengths(tiny(), ids, mask, input_length=torch.tensor([1, 2]))


@pytest.mark.parametrize("fields", [dict(tape_size=None, input_end_token_id=6), dict(controller="lstm")])
def test_right_padding_never_reaches_a_real_position(fields):
    torch.manual_seed(0)
    model = TapeRNNModel(tiny(**fields)).eval()
    ids, mask = batch(lengths=(6, 2, 4))
    with torch.no_grad():
        padded = model(ids, attention_mask=mask)
        for row, length in enumerate(mask.sum(-1).tolist()):
            alone = model(ids[row : row + 1, :length])
            torch.testing.assert_close(padded.last_hidden_state[row, :length], alone.last_hidden_state[0])
            torch.testing.assert_close(padded.actions[row, :length], alone.actions[0])
            torch.testing.assert_close(padded.tape_reads[row, :length], alone.tape_reads[0])


def test_gradients_reach_every_weight_and_the_tape_update_passes_gradcheck():
    torch.manual_seed(0)
    model = TapeRNNForSequenceClassification(tiny(write_mlp_sizes=[4]))
    ids, mask = batch()
    model(ids, attention_mask=mask, labels=torch.tensor([0, 2])).loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
    for jump_writes in (False, True):
        indices = tape_indices(torch.tensor([2, 3]), 5, jump_writes)
        inputs = (torch.randn(2, 5, 2, dtype=torch.float64, requires_grad=True),
                  torch.softmax(torch.randn(2, 5, dtype=torch.float64), -1).requires_grad_(),
                  torch.randn(2, 2, dtype=torch.float64, requires_grad=True))
        assert torch.autograd.gradcheck(lambda *x: update_tape(*x, indices, jump_writes), inputs)  # noqa: B023


def test_auto_classes_save_load_and_trust_remote_code_without_lengthgen(tmp_path):
    fields = {k: v for k, v in tiny(input_end_token_id=6, write_mlp_sizes=[4]).to_diff_dict().items()
              if k != "model_type"}
    config = AutoConfig.for_model("tape_rnn", **fields)
    assert isinstance(config, TapeRNNConfig)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config).eval()
    base = AutoModel.from_config(config).eval()
    assert isinstance(model, TapeRNNForSequenceClassification) and isinstance(base, TapeRNNModel)
    ids, mask = batch()
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).logits
        expected_base = base(ids, attention_mask=mask)[0]
    model.save_pretrained(tmp_path / "classifier")
    base.save_pretrained(tmp_path / "base")
    with torch.no_grad():
        reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "classifier").eval()
        assert torch.equal(reloaded(ids, attention_mask=mask).logits, expected)
        assert torch.equal(AutoModel.from_pretrained(tmp_path / "base")(ids, attention_mask=mask)[0], expected_base)
    torch.save({"ids": ids, "mask": mask, "expected": expected, "expected_base": expected_base}, tmp_path / "probe.pt")
    script = f"""
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
sys.modules["lengthgen"] = None
import torch
from transformers import AutoModel, AutoModelForSequenceClassification
probe = torch.load({str(tmp_path / "probe.pt")!r})
classifier = AutoModelForSequenceClassification.from_pretrained({str(tmp_path / "classifier")!r},
                                                                trust_remote_code=True).eval()
base = AutoModel.from_pretrained({str(tmp_path / "base")!r}, trust_remote_code=True).eval()
assert "lengthgen" not in type(base).__module__ and base.config.write_mlp_sizes == [4]
with torch.no_grad():
    assert torch.equal(classifier(probe["ids"], attention_mask=probe["mask"]).logits, probe["expected"])
    assert torch.equal(base(probe["ids"], attention_mask=probe["mask"])[0], probe["expected_base"])
print("REMOTE_CODE_OK")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "REMOTE_CODE_OK" in result.stdout


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(controller="gru"), "controller"),
        (dict(tape_size=0), "tape_size"),
        (dict(tape_size="long"), "tape_size"),
        (dict(tape_cell_size=None), "tape_cell_size"),
        (dict(jump_writes="yes"), "jump_writes"),
        (dict(write_mlp_sizes=[64, 0]), "write_mlp_sizes"),
        (dict(input_end_token_id=7), "input_end_token_id"),
    ],
)
def test_bad_config_raises_value_error(fields, message):
    with pytest.raises(ValueError, match=message):
        tiny(**fields)


@pytest.mark.parametrize(
    "ids, mask, message",
    [
        (torch.tensor([[1, 7]]), None, "outside the vocabulary"),
        (torch.ones(1, 3), None, "integer token ids, got dtype torch.float32"),
        (torch.zeros(1, 0, dtype=torch.long), None, "Empty"),
        (torch.ones(2, 3, dtype=torch.long), torch.tensor([[0, 1, 1], [1, 1, 1]]), "right padding"),
    ],
)
def test_bad_input_raises_value_error(ids, mask, message):
    model = TapeRNNModel(tiny())
    with pytest.raises(ValueError, match=message):
        model(ids, attention_mask=mask)
    with pytest.raises(TypeError, match="nosuch"):
        model(torch.ones(1, 3, dtype=torch.long), nosuch=1)
