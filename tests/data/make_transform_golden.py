#!/usr/bin/env python3
"""Writes resize_bilinear_torch.txt: PyTorch's bilinear resampling (align_corners=False,
no antialiasing) of small test images, the reference for test_transforms.cpp.

Each case is one line: C H W OH OW, then the C*OH*OW outputs (CHW, %.9g). The input pixel
(c, y, x) is ((c * 37 + y * 11 + x * 5) % 17) / 16, computed the same way by the test.

Run: /usr/bin/python3 tests/data/make_transform_golden.py (from the repository root)."""
import os

import torch
import torch.nn.functional as F

CASES = [(1, 5, 7, 3, 4), (2, 4, 3, 9, 7), (3, 6, 6, 6, 13), (1, 28, 28, 14, 14),
         (1, 3, 3, 1, 1), (1, 1, 4, 3, 8)]


def image(c, h, w):
    x = torch.empty(c, h, w, dtype=torch.float32)
    for k in range(c):
        for y in range(h):
            for i in range(w):
                x[k, y, i] = ((k * 37 + y * 11 + i * 5) % 17) / 16
    return x


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resize_bilinear_torch.txt")
    with open(out, "w") as f:
        for c, h, w, oh, ow in CASES:
            y = F.interpolate(image(c, h, w)[None], size=(oh, ow), mode="bilinear",
                              align_corners=False)[0]
            values = " ".join("%.9g" % v for v in y.flatten().tolist())
            f.write(f"{c} {h} {w} {oh} {ow} {values}\n")


if __name__ == "__main__":
    main()
