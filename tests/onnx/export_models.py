#!/usr/bin/env python3
"""Exports the real models of the ONNX import tests from Debian's PyTorch (/usr/bin/python3,
python3-torch) with torch.onnx.export, and PyTorch's own outputs for a fixed input.

    /usr/bin/python3 tests/onnx/export_models.py [--out tests/onnx/models]

For each model NAME it writes NAME.onnx and NAME.json: the input and output shapes and
their float32 values (the input first), so the C++ test needs no ONNX Python package.
The models: a small CNN (Conv, BatchNorm, ReLU, MaxPool, AdaptiveAvgPool, Linear) and a
two-layer Transformer encoder (multi-head attention, LayerNorm, GELU feed-forward), both in
eval mode, exported with a symbolic batch dim. export() and randomize_bn() also serve
export_real_models.py.
"""
import argparse
import inspect
import json
import os

import torch
import torch.nn as nn


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = nn.functional.max_pool2d(x, 2)
        x = torch.relu(self.bn2(self.conv2(x)))
        x = nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return torch.log_softmax(self.fc(x), dim=1)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        return self.head(self.encoder(x))


def randomize_bn(model, gen):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) + 0.5)


def export(name, model, x, out_dir, dynamic):
    """Writes NAME.onnx (opset 14, input "x" and output "y" with the symbolic dims `dynamic`,
    {dim: name}) and NAME.json (the input and PyTorch's output for it)."""
    model.eval()
    with torch.no_grad():
        y = model(x)
    path = os.path.join(out_dir, name + ".onnx")
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False  # PyTorch 2.x: the TorchScript exporter, as 1.13's
    torch.onnx.export(model, x, path, opset_version=14, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": dynamic, "y": dynamic}, **kwargs)
    meta = {
        "input_shape": list(x.shape), "input": [float(v) for v in x.flatten()],
        "output_shape": list(y.shape), "output": [float(v) for v in y.flatten()],
    }
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(meta, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "models"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    cnn = SmallCnn()
    with torch.no_grad():
        randomize_bn(cnn, gen)
    export("small_cnn", cnn, torch.randn(2, 3, 16, 16, generator=gen), args.out, {0: "batch"})
    enc = Encoder()
    export("transformer_encoder", enc, torch.randn(2, 7, 32, generator=gen), args.out, {0: "batch", 1: "seq"})


if __name__ == "__main__":
    main()
