#!/usr/bin/python3
"""The Fashion-MNIST demo's model and step in PyTorch, for a side-by-side epoch time.

Same data, normalisation, 784-256-10 MLP (nn.Linear initialisation), log_softmax with
cross-entropy through gather, batch 64, plain SGD lr 0.1, same thread count
(EMBER_NUM_THREADS, default 2). Run with Debian's interpreter: /usr/bin/python3.

    benches/fashion_mnist_torch.py [epochs] [data_dir]
"""
import gzip
import os
import sys
import time

import numpy as np
import torch


def load(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    data = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
    threads = int(os.environ.get("EMBER_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    torch.manual_seed(42)

    def split(prefix):
        x = load(f"{data}/{prefix}-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32)
        y = load(f"{data}/{prefix}-labels-idx1-ubyte.gz").astype(np.int64)
        return (torch.from_numpy(x) / 255.0 - 0.2860) / 0.3530, torch.from_numpy(y)

    xtr, ytr = split("train")
    xte, yte = split("t10k")
    fc1, fc2 = torch.nn.Linear(784, 256), torch.nn.Linear(256, 10)
    params = list(fc1.parameters()) + list(fc2.parameters())
    n, batch, lr = xtr.shape[0], 64, 0.1
    rng = np.random.default_rng(7)
    print(f"torch {torch.__version__}, {threads} threads")
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        order = torch.from_numpy(rng.permutation(n))
        steps = 0
        for start in range(0, n - batch + 1, batch):
            idx = order[start:start + batch]
            x, y = xtr[idx], ytr[idx]
            logp = torch.log_softmax(fc2(torch.relu(fc1(x))), 1)
            loss = -logp.gather(1, y.unsqueeze(1)).mean()
            for p in params:
                p.grad = None
            loss.backward()
            with torch.no_grad():
                for p in params:
                    p -= lr * p.grad
            steps += 1
        secs = time.perf_counter() - t0
        print(f"  epoch {epoch}: {secs:.2f} s ({1000 * secs / steps:.2f} ms/step)")
    with torch.no_grad():
        acc = (fc2(torch.relu(fc1(xte))).argmax(1) == yte).float().mean().item()
    print(f"test accuracy: {100 * acc:.2f}%")


if __name__ == "__main__":
    main()
