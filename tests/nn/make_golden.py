#!/usr/bin/python3
"""Writes the PyTorch reference values tests/nn/test_parity.cpp checks ember's nn against.

Run with Debian's torch (/usr/bin/python3 tests/nn/make_golden.py [group ...]); it rewrites
tests/nn/golden/<case>.json for every group, or for the named groups only (each group seeds
torch's generator itself, so a group's cases do not depend on which others run). Every case is computed in float64 and holds:

  state.<key>       the module's state_dict (the C++ test loads it by path)
  input.<i>         the forward inputs
  output.<i>        the forward outputs
  gout.<i>          a random upstream gradient per output: the test backpropagates
                    sum_i sum(output_i * gout_i)
  grad.input.<i>    the gradient of that scalar for each float input
  grad.state.<key>  ... and for each parameter
  after.<key>       each buffer after the forward (batch norm's running statistics)

A tensor is {"shape": [...], "dtype": "f64" | "i64" | "bool", "data": [flat values]}.
"""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


def enc(t):
    t = t.detach()
    if t.dtype == torch.bool:
        dt, data = "bool", [bool(v) for v in t.flatten().tolist()]
    elif t.dtype in (torch.int64, torch.int32):
        dt, data = "i64", [int(v) for v in t.flatten().tolist()]
    else:
        dt, data = "f64", [float(v) for v in t.double().flatten().tolist()]
    return {"shape": list(t.shape), "dtype": dt, "data": data}


def write(name, tensors, meta=None):
    os.makedirs(OUT, exist_ok=True)
    doc = {"case": name, "meta": meta or {}, "tensors": {k: enc(v) for k, v in tensors.items()}}
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


def randn(*shape):
    return torch.randn(tuple(shape), dtype=torch.float64)


def run(name, module, inputs, train=True, meta=None, forward=None, nograd=()):
    """Forward and backward of `module` (float64) on `inputs` (those in `nograd` get no
    gradient); writes the case."""
    module = module.double()
    module.train(train)
    t = {}
    for k, v in module.state_dict().items():
        t["state." + k] = v.clone()
    ins = []
    for i, x in enumerate(inputs):
        x = x.clone()
        if x.is_floating_point() and i not in nograd:
            x.requires_grad_(True)
        t["input.%d" % i] = x.detach().clone()
        ins.append(x)
    outs = forward(module, ins) if forward else module(*ins)
    if not isinstance(outs, (tuple, list)):
        outs = [outs]
    total = 0
    for i, y in enumerate(outs):
        t["output.%d" % i] = y.detach().clone()
        g = randn(*y.shape)
        t["gout.%d" % i] = g
        total = total + (y * g).sum()
    params = dict(module.named_parameters())
    fi = [i for i, x in enumerate(ins) if x.requires_grad]
    targets = [ins[i] for i in fi] + list(params.values())
    if total.requires_grad and targets:
        grads = torch.autograd.grad(total, targets, allow_unused=True)
        n_in = len(fi)
        for j, g in enumerate(grads[:n_in]):
            if g is not None:
                t["grad.input.%d" % fi[j]] = g
        for (k, _), g in zip(params.items(), grads[n_in:]):
            if g is not None:
                t["grad.state." + k] = g
    for k, v in module.named_buffers():
        t["after." + k] = v.clone()
    write(name, t, meta)


def perturb_state(module):
    """Replaces default-initialised affine params and running stats by random values."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(randn(*p.shape) * 0.5 + (1.0 if name.endswith("weight") and p.dim() == 1 else 0.0))
        for name, b in module.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(randn(*b.shape) * 0.3)
            elif name.endswith("running_var"):
                b.copy_(torch.rand(*b.shape, dtype=torch.float64) + 0.5)
            elif name.endswith("num_batches_tracked"):
                b.fill_(5)
    return module


class RmsNormRef(nn.Module):
    """RMSNorm by its formula (torch 1.13 has no nn.RMSNorm)."""

    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d, dtype=torch.float64))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Fn(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, *xs):
        return self.f(*xs)


def layers():
    run("linear", nn.Linear(5, 3), [randn(4, 5)])
    run("linear_rank3", nn.Linear(5, 3, bias=False), [randn(2, 3, 5)])
    run("conv2d", nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 1), dilation=(1, 2), groups=2),
        [randn(2, 4, 7, 6)])
    run("conv2d_same", nn.Conv2d(3, 4, (4, 3), padding="same", bias=False), [randn(2, 3, 6, 5)])
    run("conv1d", nn.Conv1d(3, 4, 3, stride=2, padding=1), [randn(2, 3, 9)])
    run("conv_transpose2d",
        nn.ConvTranspose2d(4, 6, (3, 3), stride=2, padding=1, output_padding=1, groups=2),
        [randn(2, 4, 4, 5)])
    run("max_pool2d", nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 1)), [randn(2, 3, 7, 6)])
    run("avg_pool2d", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        [randn(2, 3, 7, 6)])
    run("adaptive_avg_pool2d", nn.AdaptiveAvgPool2d((3, 4)), [randn(2, 3, 7, 10)])
    run("batch_norm2d_train", perturb_state(nn.BatchNorm2d(3)), [randn(4, 3, 3, 2) * 2 + 1])
    run("batch_norm2d_eval", perturb_state(nn.BatchNorm2d(3)), [randn(4, 3, 3, 2)], train=False)
    run("batch_norm1d_train_rank2", perturb_state(nn.BatchNorm1d(3, momentum=0.3)), [randn(8, 3)])
    run("batch_norm1d_train_rank3", perturb_state(nn.BatchNorm1d(3)), [randn(4, 3, 5)])
    run("layer_norm", perturb_state(nn.LayerNorm(6)), [randn(2, 3, 6)])
    run("group_norm", perturb_state(nn.GroupNorm(2, 6)), [randn(2, 6, 3, 4)])
    run("rms_norm", perturb_state(RmsNormRef(6, 1e-6)), [randn(2, 3, 6)], meta={"eps": 1e-6})
    emb = nn.Embedding(7, 4, padding_idx=1)
    with torch.no_grad():
        emb.weight[1] = randn(4)  # a loaded padding row keeps its value; it gets no gradient
    run("embedding", emb, [torch.tensor([[0, 1, 3, 6, 1], [2, 2, 5, 4, 1]])])

    acts = {
        "relu": nn.ReLU(), "relu6": nn.ReLU6(), "leaky_relu": nn.LeakyReLU(0.1),
        "gelu": nn.GELU(), "gelu_tanh": nn.GELU(approximate="tanh"), "tanh": nn.Tanh(),
        "sigmoid": nn.Sigmoid(), "silu": nn.SiLU(), "mish": nn.Mish(), "elu": nn.ELU(0.7),
        "celu": nn.CELU(1.3), "selu": nn.SELU(), "softplus": nn.Softplus(beta=2, threshold=3),
        "softsign": nn.Softsign(), "hardtanh": nn.Hardtanh(-2, 1.5), "hardsigmoid": nn.Hardsigmoid(),
        "hardswish": nn.Hardswish(), "logsigmoid": nn.LogSigmoid(), "tanhshrink": nn.Tanhshrink(),
        "softshrink": nn.Softshrink(0.6), "hardshrink": nn.Hardshrink(0.6),
        "threshold": nn.Threshold(0.3, -1.5), "glu": nn.GLU(), "softmax": nn.Softmax(dim=1),
        "log_softmax": nn.LogSoftmax(dim=1),
    }
    # Values in (-4, 4) kept away from every kink (0, +-0.6, 0.3, -2, 1.5, +-3, 6/beta).
    x = torch.linspace(-3.9, 3.9, 48, dtype=torch.float64)[torch.randperm(48)].reshape(3, 16) + 0.0123
    for name, m in acts.items():
        run("act_" + name, m, [x])
    prelu = nn.PReLU(3)
    with torch.no_grad():
        prelu.weight.copy_(torch.tensor([0.25, -0.5, 1.5]))
    run("act_prelu", prelu, [randn(2, 3, 4) + 0.01])

    lstm = nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True)
    h0, c0 = randn(4, 3, 5) * 0.5, randn(4, 3, 5) * 0.5
    run("lstm", lstm, [randn(3, 6, 4), h0, c0],
        forward=lambda m, xs: (lambda out: (out[0], out[1][0], out[1][1]))(m(xs[0], (xs[1], xs[2]))))
    run("lstm_zero_state", nn.LSTM(3, 4, batch_first=True), [randn(2, 5, 3)],
        forward=lambda m, xs: (lambda out: (out[0], out[1][0], out[1][1]))(m(xs[0])))

    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    with torch.no_grad():
        mha.in_proj_bias.copy_(randn(24) * 0.1)
        mha.out_proj.bias.copy_(randn(8) * 0.1)
    attn_mask = torch.rand(5, 6) < 0.3
    attn_mask[:, 0] = False  # no fully masked row
    kpm = torch.zeros(2, 6, dtype=torch.bool)
    kpm[1, 4:] = True
    run("mha", mha, [randn(2, 5, 8), randn(2, 6, 8), randn(2, 6, 8), attn_mask, kpm],
        forward=lambda m, xs: m(xs[0], xs[1], xs[2], key_padding_mask=xs[4], attn_mask=xs[3]))
    run("mha_self", nn.MultiheadAttention(6, 3, batch_first=True), [randn(2, 4, 6)],
        forward=lambda m, xs: m(xs[0], xs[0], xs[0])[0])
    for norm_first in (False, True):
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                           norm_first=norm_first)
        perturb_state(layer.norm1)
        perturb_state(layer.norm2)
        run("encoder_layer" + ("_norm_first" if norm_first else ""), layer, [randn(2, 5, 8)])


def losses():
    logits = randn(6, 5)
    labels = torch.tensor([0, 3, -100, 4, 1, 3])
    w = torch.rand(5, dtype=torch.float64) + 0.5
    ce = lambda **kw: Fn(lambda x, y: F.cross_entropy(x, y, **kw))
    run("loss_cross_entropy", ce(), [logits, labels])
    run("loss_cross_entropy_weight_smoothing", ce(weight=w, label_smoothing=0.2), [logits, labels],
        meta={"weight": w.tolist()})
    run("loss_cross_entropy_sum", ce(reduction="sum", label_smoothing=0.1), [logits, labels])
    run("loss_cross_entropy_none", ce(reduction="none", weight=w), [logits, labels],
        meta={"weight": w.tolist()})
    probs = torch.softmax(randn(6, 5), 1)
    run("loss_cross_entropy_probs", ce(weight=w, label_smoothing=0.1), [logits, probs],
        meta={"weight": w.tolist()})
    run("loss_nll", Fn(lambda x, y: F.nll_loss(x, y, weight=w)), [torch.log_softmax(logits, 1), labels],
        meta={"weight": w.tolist()})
    p = torch.rand(4, 3, dtype=torch.float64) * 0.9 + 0.05
    t = torch.rand(4, 3, dtype=torch.float64)
    bw = torch.rand(4, 3, dtype=torch.float64) + 0.5
    run("loss_bce", Fn(lambda x, y, z: F.binary_cross_entropy(x, y, weight=z)), [p, t, bw],
        nograd=(1, 2))
    pw = torch.tensor([0.5, 2.0, 3.0], dtype=torch.float64)
    run("loss_bce_with_logits",
        Fn(lambda x, y, z, q: F.binary_cross_entropy_with_logits(x, y, weight=z, pos_weight=q)),
        [randn(4, 3) * 3, t, bw, pw], nograd=(2, 3))
    a, b = randn(3, 4), randn(3, 4)
    run("loss_mse", Fn(F.mse_loss), [a, b])
    run("loss_mse_sum", Fn(lambda x, y: F.mse_loss(x, y, reduction="sum")), [a, b])
    run("loss_l1_none", Fn(lambda x, y: F.l1_loss(x, y, reduction="none")), [a, b])
    run("loss_huber", Fn(lambda x, y: F.huber_loss(x, y, delta=0.7)), [a, b])
    run("loss_smooth_l1", Fn(lambda x, y: F.smooth_l1_loss(x, y, beta=0.6)), [a, b])
    lp = torch.log_softmax(randn(3, 4), 1)
    tp = torch.softmax(randn(3, 4), 1)
    tp[0, 1] = 0.0  # xlogy: a zero target contributes 0
    # A zero target has an infinite target gradient (log 0): only the input's is compared.
    run("loss_kl_div_batchmean", Fn(lambda x, y: F.kl_div(x, y, reduction="batchmean")), [lp, tp],
        nograd=(1,))
    run("loss_kl_div_log_target",
        Fn(lambda x, y: F.kl_div(x, y, reduction="mean", log_target=True)),
        [lp, torch.log_softmax(randn(3, 4), 1)])


def more_layers():
    run("conv3d", nn.Conv3d(2, 4, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1)),
        [randn(2, 2, 4, 5, 4)])
    run("conv_transpose1d", nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1, output_padding=2),
        [randn(2, 3, 5)])
    run("max_pool1d", nn.MaxPool1d(3, stride=2, padding=1), [randn(2, 3, 9)])
    run("avg_pool1d", nn.AvgPool1d(2), [randn(2, 3, 9)])
    run("adaptive_avg_pool1d", nn.AdaptiveAvgPool1d(4), [randn(2, 3, 9)])
    run("batch_norm3d_train", perturb_state(nn.BatchNorm3d(2)), [randn(3, 2, 2, 3, 2)])
    run("instance_norm2d", nn.InstanceNorm2d(3), [randn(2, 3, 4, 5)])
    run("instance_norm1d_affine", perturb_state(nn.InstanceNorm1d(3, affine=True)), [randn(2, 3, 6)])
    run("gru", nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True),
        [randn(3, 6, 4), randn(4, 3, 5) * 0.5], forward=lambda m, xs: m(xs[0], xs[1]))
    run("rnn_relu", nn.RNN(3, 4, nonlinearity="relu", batch_first=True), [randn(2, 5, 3)],
        forward=lambda m, xs: m(xs[0]))
    run("rnn_tanh_bidirectional", nn.RNN(3, 4, bidirectional=True, bias=False, batch_first=True),
        [randn(2, 5, 3)], forward=lambda m, xs: m(xs[0]))


class SwiGluRef(nn.Module):
    """Burn's SwiGlu by its formula: silu(linear_inner(x)) * linear_outer(x)."""

    def __init__(self, d_in, d_out, bias):
        super().__init__()
        self.linear_inner = nn.Linear(d_in, d_out, bias=bias)
        self.linear_outer = nn.Linear(d_in, d_out, bias=bias)

    def forward(self, x):
        return F.silu(self.linear_inner(x)) * self.linear_outer(x)


class PositionWiseFeedForwardRef(nn.Module):
    """Burn's PositionWiseFeedForward: linear_outer(gelu(linear_inner(x)))."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear_inner = nn.Linear(d_model, d_ff)
        self.linear_outer = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear_outer(F.gelu(self.linear_inner(x)))


def transformers_and_more():
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    for norm_first in (False, True):
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                           norm_first=norm_first, activation="gelu")
        enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8) if norm_first else None,
                                    enable_nested_tensor=False)
        for m in enc.modules():
            if isinstance(m, nn.LayerNorm):
                perturb_state(m)
        run("encoder" + ("_norm_first" if norm_first else ""), enc, [randn(2, 5, 8), causal],
            forward=lambda m, xs: m(xs[0], mask=xs[1]))
    for norm_first in (False, True):
        layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True,
                                           norm_first=norm_first)
        for m in layer.modules():
            if isinstance(m, nn.LayerNorm):
                perturb_state(m)
        run("decoder_layer" + ("_norm_first" if norm_first else ""), layer,
            [randn(2, 5, 8), randn(2, 4, 8), causal],
            forward=lambda m, xs: m(xs[0], xs[1], tgt_mask=xs[2]))
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
                                2, norm=nn.LayerNorm(8))
    run("decoder", dec, [randn(2, 5, 8), randn(2, 4, 8), causal],
        forward=lambda m, xs: m(xs[0], xs[1], tgt_mask=xs[2]))
    mha = nn.MultiheadAttention(6, 2, kdim=5, vdim=3, batch_first=True)
    with torch.no_grad():
        mha.in_proj_bias.copy_(randn(18) * 0.1)
    run("mha_kv_dims", mha, [randn(2, 4, 6), randn(2, 3, 5), randn(2, 3, 3)],
        forward=lambda m, xs: m(xs[0], xs[1], xs[2]))
    run("local_response_norm", nn.LocalResponseNorm(3, alpha=0.01, beta=0.6, k=1.5),
        [randn(2, 5, 3, 4)])
    run("local_response_norm_even_1d", nn.LocalResponseNorm(4), [randn(2, 6, 5)])
    run("rrelu_eval", nn.RReLU(0.1, 0.3), [randn(3, 7)], train=False)
    run("swiglu", SwiGluRef(6, 4, True), [randn(2, 3, 6)])
    run("position_wise_feed_forward", PositionWiseFeedForwardRef(6, 10), [randn(2, 3, 6)])
    run("pixel_shuffle", nn.PixelShuffle(2), [randn(2, 8, 3, 4)])
    run("pixel_unshuffle", nn.PixelUnshuffle(2), [randn(2, 2, 4, 6)])
    run("cosine_similarity", nn.CosineSimilarity(dim=1), [randn(4, 5, 3), randn(4, 5, 3)])
    run("unfold", nn.Unfold((2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1)),
        [randn(2, 3, 5, 7)])
    run("fold", nn.Fold((4, 5), (2, 2), stride=(1, 2), padding=(1, 1)), [randn(2, 8, 15)])
    run("pairwise_distance", nn.PairwiseDistance(), [randn(4, 5), randn(4, 5)])
    run("pairwise_distance_p3", nn.PairwiseDistance(p=3.0), [randn(4, 5), randn(4, 5)])

    x1, x2 = randn(6, 4), randn(6, 4)
    y = torch.tensor([1, -1, 1, -1, -1, 1], dtype=torch.float64)
    run("loss_cosine_embedding", Fn(lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=0.2)),
        [x1, x2, y], nograd=(2,))
    mu, tgt = randn(5, 3), randn(5, 3)
    var = torch.rand(5, 3, dtype=torch.float64) + 0.2
    run("loss_gaussian_nll", Fn(lambda a, b, v: F.gaussian_nll_loss(a, b, v, full=True)),
        [mu, tgt, var], nograd=(1,))
    var1 = torch.rand(5, 1, dtype=torch.float64) + 0.2
    run("loss_gaussian_nll_broadcast_sum",
        Fn(lambda a, b, v: F.gaussian_nll_loss(a, b, v, reduction="sum")), [mu, tgt, var1],
        nograd=(1,))
    counts = torch.tensor([[0.0, 1, 3], [2, 5, 0], [1, 1, 7], [4, 0, 2]], dtype=torch.float64)
    run("loss_poisson_nll_full", Fn(lambda a, b: F.poisson_nll_loss(a, b, full=True)),
        [randn(4, 3) * 0.5, counts], nograd=(1,))
    rates = torch.rand(4, 3, dtype=torch.float64) * 3 + 0.1
    run("loss_poisson_nll_rates",
        Fn(lambda a, b: F.poisson_nll_loss(a, b, log_input=False, reduction="sum")),
        [rates, counts], nograd=(1,))
    run("loss_margin_ranking", Fn(lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=0.3)),
        [randn(6), randn(6), y], nograd=(2,))
    a, p, n = randn(5, 4), randn(5, 4), randn(5, 4)
    run("loss_triplet_margin", Fn(lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=1.5)),
        [a, p, n])
    run("loss_triplet_margin_swap_p1",
        Fn(lambda a, p, n: F.triplet_margin_loss(a, p, n, p=1, swap=True, reduction="none")),
        [a, p, n])
    yh = torch.tensor([[1.0, -1, 1], [-1, -1, 1]], dtype=torch.float64)
    run("loss_hinge_embedding", Fn(lambda x, t: F.hinge_embedding_loss(x, t, margin=0.8)),
        [randn(2, 3), yh], nograd=(1,))
    logits, labels = randn(5, 4), torch.tensor([0, 3, 1, 1, 2])
    w = torch.rand(4, dtype=torch.float64) + 0.5
    run("loss_multi_margin", Fn(lambda x, t: F.multi_margin_loss(x, t, margin=0.7)),
        [logits, labels])
    run("loss_multi_margin_p2_weight",
        Fn(lambda x, t: F.multi_margin_loss(x, t, p=2, weight=w, reduction="sum")),
        [logits, labels], meta={"weight": w.tolist()})
    run("loss_soft_margin", Fn(F.soft_margin_loss), [randn(2, 3) * 2, yh], nograd=(1,))


def pools_and_resampling():
    run("max_pool1d_ceil", nn.MaxPool1d(3, stride=2, padding=1, ceil_mode=True), [randn(2, 3, 10)])
    run("max_pool2d_ceil", nn.MaxPool2d(3, stride=2, padding=1, dilation=(1, 2), ceil_mode=True),
        [randn(2, 2, 8, 9)])
    run("max_pool3d", nn.MaxPool3d((2, 3, 2), stride=(2, 2, 1), padding=(1, 1, 0)),
        [randn(2, 2, 5, 6, 4)])
    run("avg_pool1d_ceil", nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True), [randn(2, 3, 10)])
    run("avg_pool2d_ceil_exclude_pad",
        nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        [randn(2, 2, 8, 7)])
    run("avg_pool2d_divisor", nn.AvgPool2d(2, divisor_override=3), [randn(2, 2, 6, 5)])
    run("avg_pool3d_ceil", nn.AvgPool3d(2, stride=2, ceil_mode=True), [randn(1, 2, 5, 4, 3)])
    run("adaptive_avg_pool3d", nn.AdaptiveAvgPool3d((2, 3, 2)), [randn(2, 2, 5, 7, 3)])
    run("adaptive_max_pool1d", nn.AdaptiveMaxPool1d(4), [randn(2, 3, 9)])
    run("adaptive_max_pool2d", nn.AdaptiveMaxPool2d((3, 5)), [randn(2, 3, 7, 10)])

    def interp(name, x, **kw):
        run(name, Fn(lambda t: F.interpolate(t, **kw)), [x], meta={k: v for k, v in kw.items()})

    interp("interp_nearest1d", randn(2, 2, 5), size=7, mode="nearest")
    interp("interp_nearest2d_scale", randn(2, 2, 3, 4), scale_factor=2.5, mode="nearest")
    interp("interp_nearest_exact2d", randn(2, 2, 3, 4), size=(5, 7), mode="nearest-exact")
    interp("interp_nearest3d_down", randn(1, 2, 6, 5, 4), size=(3, 4, 2), mode="nearest")
    interp("interp_linear1d", randn(2, 2, 4), size=9, mode="linear", align_corners=False)
    interp("interp_linear1d_corners", randn(2, 2, 4), size=9, mode="linear", align_corners=True)
    interp("interp_bilinear", randn(2, 2, 4, 5), size=(7, 3), mode="bilinear", align_corners=False)
    interp("interp_bilinear_corners", randn(2, 2, 4, 5), size=(7, 3), mode="bilinear",
           align_corners=True)
    interp("interp_bilinear_scale", randn(1, 2, 4, 6), scale_factor=1.5, mode="bilinear",
           align_corners=False)
    interp("interp_bilinear_down", randn(2, 2, 7, 9), size=(3, 4), mode="bilinear",
           align_corners=False)
    interp("interp_trilinear", randn(1, 2, 3, 4, 2), size=(5, 6, 3), mode="trilinear",
           align_corners=False)
    interp("interp_bicubic", randn(1, 2, 4, 5), size=(7, 9), mode="bicubic", align_corners=False)
    interp("interp_bicubic_corners", randn(1, 2, 4, 5), size=(7, 9), mode="bicubic",
           align_corners=True)
    interp("interp_bicubic_down", randn(1, 2, 9, 8), size=(4, 3), mode="bicubic",
           align_corners=False)

    def ctc(name, x, targets, il, tl, **kw):
        run(name, Fn(lambda a, t: F.ctc_loss(a.log_softmax(2), t, il, tl, **kw)), [x, targets],
            meta=dict(input_lengths=il, target_lengths=tl, **kw))

    targets = torch.tensor([[1, 2, 2, 3], [4, 1, 0, 0], [3, 3, 3, 0]])
    ctc("loss_ctc_mean", randn(12, 3, 5), targets, [12, 9, 10], [4, 2, 3])
    ctc("loss_ctc_sum_blank", randn(10, 3, 5), targets.clamp(max=3), [10, 7, 10], [4, 2, 3],
        blank=4, reduction="sum")
    # The third row needs 5 steps (3 labels, 2 repeats) and gets 4: infinity, zeroed.
    ctc("loss_ctc_none_zero_infinity", randn(8, 3, 5), targets, [8, 1, 4], [4, 0, 3],
        reduction="none", zero_infinity=True)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)


class Net(nn.Module):
    """Mirrors the Net struct of test_parity.cpp: the state_dict keys must equal its paths."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.rnn = nn.LSTM(4, 3, batch_first=True)
        self.attn = nn.MultiheadAttention(4, 2, batch_first=True)
        self.embed = nn.Embedding(10, 4)


def deform_convs():
    """torchvision.ops.DeformConv2d: offsets of a few pixels (some taps sample outside the
    image), with a sigmoid mask (v2) and without."""
    from torchvision.ops import DeformConv2d

    run("deform_conv2d", DeformConv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 1),
                                      dilation=(1, 2), groups=2),
        [randn(2, 4, 7, 6), randn(2, 24, 4, 6) * 1.5, torch.sigmoid(randn(2, 12, 4, 6))])
    run("deform_conv2d_nomask", DeformConv2d(3, 4, 3, padding=1, bias=False),
        [randn(1, 3, 5, 5), randn(1, 18, 5, 5) * 2.0])


def shrink_ref(x, lambd, bias):
    """Burn's shrink (ONNX Shrink) by its definition: PyTorch has no module for it."""
    return torch.where(x > lambd, x - bias, torch.where(x < -lambd, x + bias, torch.zeros_like(x)))


def activation_gaps():
    """Burn's Shrink and ONNX's ThresholdedRelu by their definitions in torch ops, the halved
    SwiGLU form, ConvTranspose3d, Identity and dropout in training (PyTorch's mask: the C++
    test compares where both masks keep an element)."""
    x = torch.linspace(-3.9, 3.9, 48, dtype=torch.float64)[torch.randperm(48)].reshape(3, 16) + 0.0123
    run("act_shrink", Fn(lambda t: shrink_ref(t, 0.6, 0.4)), [x], meta={"lambda": 0.6, "bias": 0.4})
    run("act_shrink_default", Fn(lambda t: shrink_ref(t, 0.5, 0.5)), [x])
    run("act_thresholded_relu", Fn(lambda t: torch.where(t > 1.0, t, torch.zeros_like(t))), [x])
    run("act_thresholded_relu_alpha", Fn(lambda t: torch.where(t > -0.7, t, torch.zeros_like(t))),
        [x], meta={"alpha": -0.7})
    run("act_swiglu_halves", Fn(lambda t: F.silu(t.chunk(2, -1)[0]) * t.chunk(2, -1)[1]), [x])
    run("conv_transpose3d",
        nn.ConvTranspose3d(4, 6, (3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1),
                           output_padding=(1, 0, 0), groups=2, dilation=(1, 2, 1)),
        [randn(2, 4, 3, 4, 3)])
    run("identity", nn.Identity(), [randn(2, 3, 4)])
    run("dropout_train", nn.Dropout(0.3), [randn(40, 50)], meta={"p": 0.3})


def state_dict_keys():
    net = Net().double()
    write("state_dict_net", {"state." + k: v for k, v in net.state_dict().items()},
          meta={"keys": list(net.state_dict().keys())})


GROUPS = {
    "layers_and_losses": lambda: (layers(), losses(), state_dict_keys()),
    "more_layers": more_layers,
    "transformers_and_more": transformers_and_more,
    "pools_and_resampling": pools_and_resampling,
    "deform_convs": deform_convs,
    "activation_gaps": activation_gaps,
}
SEEDS = {name: i for i, name in enumerate(GROUPS)}

if __name__ == "__main__":
    import sys

    for name in sys.argv[1:] or list(GROUPS):
        torch.manual_seed(SEEDS[name])
        GROUPS[name]()
