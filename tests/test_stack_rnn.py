"""Stack-RNN: one stack update against the equation worked by hand, the whole model against its equations written
out, saturated actions against a discrete stack, padding, gradients, the Auto classes and remote code."""

import subprocess
import sys

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

from lengthgen.modeling import StackRNNConfig, StackRNNForSequenceClassification, StackRNNModel
from lengthgen.modeling.stack_rnn import update_stack


def tiny(**fields):
    defaults = dict(vocab_size=7, hidden_size=6, stack_cell_size=2, stack_size=3, num_labels=3)
    return StackRNNConfig(**{**defaults, **fields})


def batch(lengths=(6, 4), vocab_size=7, seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab_size, (len(lengths), max(lengths)), generator=generator)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    return ids.masked_fill(mask == 0, 0), mask


def test_one_stack_update_is_the_equation_worked_by_hand():
    """s = [[1, 2], [3, 4], [5, 6]] (top first), (a_push, a_pop, a_noop) = (0.5, 0.3, 0.2), v = [7, 8]:
    s'[0] = .5 v    + .3 s[1] + .2 s[0] = [4.6, 5.6]
    s'[1] = .5 s[0] + .3 s[2] + .2 s[1] = [2.6, 3.6]
    s'[2] = .5 s[1] + .3 * 0  + .2 s[2] = [2.5, 3.2]"""
    stack = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]])
    actions = torch.tensor([[0.5, 0.3, 0.2]])
    new = update_stack(stack, actions, torch.tensor([[7.0, 8.0]]))
    torch.testing.assert_close(new, torch.tensor([[[4.6, 5.6], [2.6, 3.6], [2.5, 3.2]]]))


def hand_stack_rnn(model, ids):
    """The model's equations written out with its weights, one row and one cell at a time."""
    config = model.config
    H, k, c = config.hidden_size, config.stack_read_depth, config.stack_cell_size
    N = config.stack_size or ids.shape[1]  # by default as deep as the sequence is long
    W_h, W_r = model.controller.recurrent_weights.weight, model.controller.read_weights.weight
    b = model.controller.read_weights.bias
    W_x = model.controller.input_weights.weight
    A, b_a = model.stack_head.weight[:3], model.stack_head.bias[:3]
    D, b_d = model.stack_head.weight[3:], model.stack_head.bias[3:]
    rows = []
    for row in ids.tolist():
        h, cell = torch.zeros(H), torch.zeros(H)
        s = [torch.zeros(c) for _ in range(N)]
        outputs, actions, reads = [], [], []
        for x in row:
            r = torch.cat(s[:k])
            pre = W_x[x] + b + W_h @ h + W_r @ r
            if config.controller == "rnn":
                h = torch.tanh(pre)
            else:
                i, f, g, o = pre.chunk(4)
                cell = torch.sigmoid(f + 1) * cell + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(cell)
            a = torch.softmax(A @ h + b_a, dim=0)
            v = D @ h + b_d
            if config.push_activation == "sigmoid":
                v = torch.sigmoid(v)
            below = s[1:] + [torch.zeros(c)]
            above = [v] + s[:-1]
            s = [a[0] * above[i] + a[1] * below[i] + a[2] * s[i] for i in range(N)]
            outputs.append(h)
            actions.append(a)
            reads.append(r)
        rows.append((torch.stack(outputs), torch.stack(actions), torch.stack(reads)))
    return [torch.stack(parts) for parts in zip(*rows, strict=True)]


@pytest.mark.parametrize("fields", [{}, dict(controller="lstm"), dict(stack_size=None),
                                    dict(stack_read_depth=2, push_activation="sigmoid", stack_cell_size=1)])
def test_the_model_is_its_equations_written_out(fields):
    """Every parameter drawn afresh first: at initialisation the read and head biases are zero, where a missing bias
    would go unseen."""
    torch.manual_seed(0)
    model = StackRNNModel(tiny(**fields)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.5)
    ids, _ = batch(lengths=(6, 6))
    with torch.no_grad():
        out = model(ids)
        hidden, actions, reads = hand_stack_rnn(model, ids)
    torch.testing.assert_close(out.last_hidden_state, hidden)
    torch.testing.assert_close(out.actions, actions)
    torch.testing.assert_close(out.stack_reads, reads)


def test_the_default_stack_gives_the_outputs_of_a_stack_as_deep_as_the_sequence():
    """stack_size=None keeps only the cells that can still reach the read; the outputs are those of the full stack
    (to rounding: the two stacks' tensors have different shapes, so the CPU's vector loops may add in another order)."""
    torch.manual_seed(0)
    grown = StackRNNModel(tiny(stack_size=None, stack_read_depth=2)).eval()
    deep = StackRNNModel(tiny(stack_size=12, stack_read_depth=2)).eval()
    deep.load_state_dict(grown.state_dict())
    ids, _ = batch(lengths=(12, 12))
    with torch.no_grad():
        for expected, got in zip(deep(ids).to_tuple(), grown(ids).to_tuple(), strict=True):
            torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)


def saturated_model(stack_size):
    """Tokens 1 and 2 push [1, 3] and [2, 4], 3 pops, 4 does nothing. The controller's state is exactly e_(token-1)
    (tanh(20) = 1 in float32) and the action logits differ by 200 (exp(-200) = 0 in float32), so the stack's
    arithmetic is exact. The controller reads the top 3 cells."""
    model = StackRNNModel(tiny(vocab_size=5, hidden_size=4, stack_size=stack_size, stack_read_depth=3)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.controller.input_weights.weight[1:] = 20 * torch.eye(4)
        A = torch.zeros(3, 4)
        A[0, 0] = A[0, 1] = A[1, 2] = A[2, 3] = 200.0  # PUSH for tokens 1 and 2, POP for 3, NO-OP for 4
        D = torch.tensor([[1.0, 2.0, 0.0, 0.0], [3.0, 4.0, 0.0, 0.0]])
        model.stack_head.weight.copy_(torch.cat([A, D]))
    return model


def discrete_stack_reads(tokens, size):
    """A list stack of `size` cells (None: unbounded): its top 3 cells (zeros below the bottom) before each token."""
    pushes = {1: [1.0, 3.0], 2: [2.0, 4.0]}
    stack, reads = [], []
    for token in tokens:
        reads.append((stack + [[0.0, 0.0]] * 3)[:3])
        if token in pushes:
            stack = ([pushes[token]] + stack)[:size]  # a full stack drops its bottom cell
        elif token == 3:
            stack = stack[1:]
    return torch.tensor(reads).flatten(1)


@pytest.mark.parametrize("stack_size", [3, None])
def test_saturated_actions_are_a_discrete_stack(stack_size):
    """Five pushes: the fourth and fifth overflow 3 cells and drop the bottom ones, which an unbounded stack keeps;
    then pops down to the empty stack and past it."""
    tokens = [1, 2, 4, 1, 2, 1, 3, 3, 4, 3, 3, 3, 3, 2]
    out = saturated_model(stack_size)(torch.tensor([tokens]))
    expected_actions = torch.nn.functional.one_hot(torch.tensor([{1: 0, 2: 0, 3: 1, 4: 2}[t] for t in tokens]), 3)
    assert torch.equal(out.actions[0], expected_actions.float())
    assert torch.equal(out.stack_reads[0], discrete_stack_reads(tokens, stack_size))


@pytest.mark.parametrize("fields", [dict(stack_size=None), dict(controller="lstm")])
def test_right_padding_never_reaches_a_real_position(fields):
    torch.manual_seed(0)
    model = StackRNNModel(tiny(**fields)).eval()
    ids, mask = batch(lengths=(6, 2, 4))
    with torch.no_grad():
        padded = model(ids, attention_mask=mask)
        for row, length in enumerate(mask.sum(-1).tolist()):
            alone = model(ids[row : row + 1, :length])
            torch.testing.assert_close(padded.last_hidden_state[row, :length], alone.last_hidden_state[0])
            torch.testing.assert_close(padded.actions[row, :length], alone.actions[0])
            torch.testing.assert_close(padded.stack_reads[row, :length], alone.stack_reads[0])


def test_gradients_reach_every_weight_and_the_stack_update_passes_gradcheck():
    torch.manual_seed(0)
    model = StackRNNForSequenceClassification(tiny())
    ids, mask = batch()
    model(ids, attention_mask=mask, labels=torch.tensor([0, 2])).loss.backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
    inputs = (torch.randn(2, 3, 2, dtype=torch.float64, requires_grad=True),
              torch.softmax(torch.randn(2, 3, dtype=torch.float64), -1).requires_grad_(),
              torch.randn(2, 2, dtype=torch.float64, requires_grad=True))
    assert torch.autograd.gradcheck(update_stack, inputs)


@pytest.mark.parametrize("controller", ["rnn", "lstm"])
def test_weights_start_at_haikus_scale(controller):
    """Haiku's Linear, which Delétang et al.'s cores use: N(0, 1/fan_in) truncated at 2 standard deviations (standard
    deviation 0.88/sqrt(fan_in)), zero biases. A simple RNN's input layer reads [x_t, r_t] (32 + 8 values) and its
    recurrent layer h_{t-1} (256); an LSTM has one layer on all three (296)."""
    torch.manual_seed(0)
    model = StackRNNForSequenceClassification(tiny(vocab_size=32, hidden_size=256, stack_cell_size=8,
                                                   controller=controller))
    controller_ = model.stack_rnn.controller
    fan_in = {"rnn": (40, 40, 256), "lstm": (296, 296, 296)}[controller]
    weights = (controller_.input_weights.weight, controller_.read_weights.weight, controller_.recurrent_weights.weight)
    for weight, n in zip(weights, fan_in, strict=True):
        assert abs(weight.std().item() * n**0.5 - 0.88) < 0.03
        assert weight.abs().max().item() <= 2 * n**-0.5
    head = model.stack_rnn.stack_head.weight
    assert abs(head.std().item() * 256**0.5 - 0.88) < 0.1
    assert controller_.read_weights.bias.abs().sum() == 0 and model.stack_rnn.stack_head.bias.abs().sum() == 0
    assert abs(model.classifier.weight.std().item() - 0.02) < 0.005


def test_auto_classes_save_load_and_trust_remote_code_without_lengthgen(tmp_path):
    fields = {k: v for k, v in tiny(controller="lstm").to_diff_dict().items() if k != "model_type"}
    config = AutoConfig.for_model("stack_rnn", **fields)
    assert isinstance(config, StackRNNConfig)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config).eval()
    base = AutoModel.from_config(config).eval()
    assert isinstance(model, StackRNNForSequenceClassification) and isinstance(base, StackRNNModel)
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
assert "lengthgen" not in type(base).__module__
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
        (dict(stack_size=0), "stack_size"),
        (dict(stack_size=2.0), "stack_size"),
        (dict(stack_cell_size=1.5), "stack_cell_size"),
        (dict(stack_read_depth=4), "stack_read_depth"),
        (dict(push_activation="tanh"), "push_activation"),
        (dict(hidden_size=0), "hidden_size"),
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
    model = StackRNNModel(tiny())
    with pytest.raises(ValueError, match=message):
        model(ids, attention_mask=mask)
    with pytest.raises(TypeError, match="nosuch"):
        model(torch.ones(1, 3, dtype=torch.long), nosuch=1)
