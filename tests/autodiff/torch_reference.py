#!/usr/bin/python3
"""Writes tests/data/autodiff_torch_reference.txt: inputs, loss and gradients of four
small f64 models computed by PyTorch, which tests/autodiff/test_grad.cpp (TorchReference)
rebuilds with ember and compares. Run once with Debian's python3-torch:
    /usr/bin/python3 tests/autodiff/torch_reference.py
Format, one record per line: `model NAME`, `input|int|grad NAME RANK DIMS... VALUES...`,
`loss VALUE`."""
import os
import torch

torch.manual_seed(1234)
f64 = torch.float64
lines = []


def emit(tag, name, t):
    vals = t.detach().reshape(-1).tolist()
    fmt = (lambda v: str(int(v))) if tag == "int" else (lambda v: repr(float(v)))
    lines.append(" ".join([tag, name, str(t.dim())] + [str(d) for d in t.shape] +
                          [fmt(v) for v in vals]))


def model(name, inputs, ints, fn):
    lines.append("model " + name)
    for k, v in inputs.items():
        v.requires_grad_(True)
        emit("input", k, v)
    for k, v in ints.items():
        emit("int", k, v)
    loss = fn(**inputs, **ints)
    loss.backward()
    lines.append("loss " + repr(float(loss)))
    for k, v in inputs.items():
        emit("grad", k, v.grad)


def mlp(x, w1, b1, w2, b2, labels):
    h = torch.relu(x @ w1 + b1)
    logp = torch.log_softmax(h @ w2 + b2, dim=1)
    nll_gather = -logp.gather(1, labels[:, None]).mean()
    onehot = torch.nn.functional.one_hot(labels, 3).to(f64)
    nll_onehot = -(logp * onehot).sum(1).mean()
    return nll_gather + 0.1 * nll_onehot


def attention(q, k, v):
    s = q @ k.transpose(1, 2) / 2.0
    o = torch.softmax(s, dim=-1) @ v
    return (o * o).sum() + o.tanh().mean()


def layer_norm(x, gamma, beta):
    mean = x.mean(1, keepdim=True)
    var = x.var(1, unbiased=False, keepdim=True)
    y = (x - mean) / torch.sqrt(var + 1e-5) * gamma + beta
    return (y.sin() * y).sum()


model("mlp", {"x": torch.randn(4, 5, dtype=f64), "w1": torch.randn(5, 6, dtype=f64),
              "b1": torch.randn(6, dtype=f64), "w2": torch.randn(6, 3, dtype=f64),
              "b2": torch.randn(3, dtype=f64)},
      {"labels": torch.tensor([0, 2, 1, 2])}, mlp)
model("attention", {"q": torch.randn(2, 3, 4, dtype=f64), "k": torch.randn(2, 5, 4, dtype=f64),
                    "v": torch.randn(2, 5, 4, dtype=f64)}, {}, attention)
model("layer_norm", {"x": torch.randn(3, 6, dtype=f64), "gamma": torch.randn(6, dtype=f64),
                     "beta": torch.randn(6, dtype=f64)}, {}, layer_norm)

def cnn(x, w1, b1, w2, w3, b3):
    F = torch.nn.functional
    h = F.conv2d(x, w1, b1, padding=1)
    h = F.max_pool2d(torch.tanh(h), 2, stride=2, padding=1)
    h = F.conv2d(h, w2, None, stride=2, padding=1, groups=2)
    u = F.conv_transpose2d(h, w3, b3, stride=2, padding=1, output_padding=1)
    a = F.avg_pool2d(u, 3, stride=1, padding=1)
    return (a * a).sum() + h.sin().mean()


# Appended last, so the models above keep their random draws.
model("cnn", {"x": torch.randn(2, 3, 6, 7, dtype=f64), "w1": torch.randn(4, 3, 3, 3, dtype=f64),
              "b1": torch.randn(4, dtype=f64), "w2": torch.randn(4, 2, 3, 3, dtype=f64),
              "w3": torch.randn(4, 3, 3, 3, dtype=f64), "b3": torch.randn(3, dtype=f64)},
      {}, cnn)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                   "autodiff_torch_reference.txt")
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
print("wrote", os.path.normpath(out))
