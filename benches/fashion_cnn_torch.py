#!/usr/bin/env python3
"""The `make demo` training pipeline in PyTorch, for demo-bench's epoch-time comparison.

The CNN of examples/fashion_cnn.hpp (conv 1->32, batch norm, relu, pool; conv 32->64, batch
norm, relu, pool; dropout 0.25; 3136->128->10) with PyTorch's default initialisation; a
Dataset that augments each item as the demo does (random crop with padding 2, horizontal
flip with probability 0.5, normalisation), a DataLoader (batch 128, shuffled, drop_last,
one worker process), AdamW (weight decay 5e-4) with a one-cycle schedule (max lr 4e-3),
and per step the loss and the accuracy read on the host, as the Learner's metrics do.
Threads: EMBER_NUM_THREADS (default 2).

    benches/fashion_cnn_torch.py --batches K --reps N [--data DIR] [--workers W]

Prints one line "times_ms=t1,t2,..." (each repetition: one pass of K training batches, the
DataLoader's start included, as an epoch's) after "torch <version>, <threads> threads".
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
from torch import nn


def load_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


MEAN, STD = 0.2860, 0.3530


class Augmented(torch.utils.data.Dataset):
    def __init__(self, images, labels, seed):
        self.images, self.labels, self.seed = images, labels, seed

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        rng = np.random.default_rng((self.seed, i))
        img = np.pad(self.images[i].astype(np.float32) / 255.0, 2)
        dy, dx = rng.integers(0, 5, size=2)
        img = img[dy:dy + 28, dx:dx + 28]
        if rng.random() < 0.5:
            img = img[:, ::-1]
        img = (img - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(img)).unsqueeze(0), int(self.labels[i])


def model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--batch", type=int, default=128)
    a = p.parse_args()
    threads = int(os.environ.get("EMBER_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    torch.manual_seed(2026)
    images = load_idx(f"{a.data}/train-images-idx3-ubyte.gz")[: a.batches * a.batch]
    labels = load_idx(f"{a.data}/train-labels-idx1-ubyte.gz")[: a.batches * a.batch]
    loader = torch.utils.data.DataLoader(Augmented(images, labels, 7), batch_size=a.batch,
                                         shuffle=True, drop_last=True, num_workers=a.workers)
    net = model()
    net.train()
    opt = torch.optim.AdamW(net.parameters(), lr=4e-3, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=4e-3,
                                                total_steps=a.reps * len(loader) + 1)
    loss_fn = nn.CrossEntropyLoss()
    print(f"torch {torch.__version__}, {threads} threads", flush=True)
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        correct = seen = 0
        total = 0.0
        for x, y in loader:
            logits = net(x)
            loss = loss_fn(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(y)
            correct += int((logits.detach().argmax(1) == y).sum())
            seen += len(y)
        times.append((time.perf_counter() - t0) * 1e3)
    print("times_ms=" + ",".join(f"{t:.3f}" for t in times), flush=True)


if __name__ == "__main__":
    main()
