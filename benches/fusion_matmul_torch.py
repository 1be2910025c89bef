"""PyTorch's side of benches/fusion_matmul_cpu.cpp: the same workloads, one thread, CPU time.

    python fusion_matmul_torch.py WORKLOAD [M K N] [REPS]

Prints the median and the least CPU milliseconds per run (time.process_time), after one
warm-up run, as fusion_matmul_cpu prints them.
"""
import sys
import time

import torch
import torch.nn.functional as F


def main():
    w = sys.argv[1]
    m, k, n = (int(a) for a in sys.argv[2:5]) if len(sys.argv) > 4 else (1024, 1024, 4096)
    reps = int(sys.argv[5]) if len(sys.argv) > 5 else 7
    torch.set_num_threads(1)
    u = lambda *s: torch.rand(*s) * 2 - 1
    x, wm, wt, b2, r, b1 = u(m, k), u(k, n), u(n, k), u(1, n), u(m, n), u(n)
    fns = {
        "matmul": lambda: x @ wm,
        "matmul_scale": lambda: (x @ wm) * 0.125,
        "matmul_bias_gelu": lambda: F.gelu(x @ wm + b2),
        "linear_gelu": lambda: F.gelu(F.linear(x, wt, b1)),
        "linear_residual": lambda: F.linear(x, wt, b1) + r,
    }
    f = fns[w]
    ms = []
    for i in range(reps + 1):
        t0 = time.process_time()
        y = f()
        del y
        if i > 0:
            ms.append((time.process_time() - t0) * 1e3)
    ms.sort()
    print(f"{w:<17} torch {torch.__version__} m{m} k{k} n{n}: median {ms[len(ms) // 2]:.2f} ms, "
          f"least {ms[0]:.2f} ms (CPU time, {reps} runs)")


if __name__ == "__main__":
    main()
