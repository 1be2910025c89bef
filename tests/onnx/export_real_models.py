#!/usr/bin/env python3
"""Exports the larger real models of the ONNX import tests from Debian's PyTorch and
torchvision (/usr/bin/python3: python3-torch, python3-torchvision) with torch.onnx.export,
with PyTorch's own outputs for a fixed input. Nothing is downloaded: the weights are
torchvision's random initialisation under a fixed seed, and batch norm's running
statistics are randomised (seeded) so that they matter.

    /usr/bin/python3 tests/onnx/export_real_models.py --out DIR [--size 64] [--models a,b]

For each model NAME it writes NAME.onnx and NAME.json: the input and output shapes and
their float32 values (the input first). The models (eval mode, opset 14):
  resnet18      torchvision.models.resnet18, input [1, 3, S, S]
  mobilenet_v2  torchvision.models.mobilenet_v2, input [1, 3, S, S]
  lstm          a 2-layer LSTM (input 16, hidden 32, batch-first) and a Linear head on
                its last step, input [2, 10, 16]
Exit status 77 (the test's skip) when torch or torchvision is missing.
"""
import argparse
import os
import sys

try:
    import torch
    import torch.nn as nn
    import torchvision
except ImportError as e:  # the C++ test skips, giving this reason
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_models import export, randomize_bn  # noqa: E402 (after the skip above)


class LstmHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", type=int, default=64, help="the image models' input side")
    ap.add_argument("--models", default="resnet18,mobilenet_v2,lstm")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    s = args.size
    for name in args.models.split(","):
        if name == "resnet18":
            m = torchvision.models.resnet18()
        elif name == "mobilenet_v2":
            m = torchvision.models.mobilenet_v2()
        elif name == "lstm":
            m = LstmHead()
        else:
            sys.exit(f"unknown model {name}")
        with torch.no_grad():
            randomize_bn(m, gen)
        if name == "lstm":
            export(name, m, torch.randn(2, 10, 16, generator=gen), args.out, {0: "batch"})
        else:
            export(name, m, torch.randn(1, 3, s, s, generator=gen), args.out, {0: "batch"})


if __name__ == "__main__":
    main()
