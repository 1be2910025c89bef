#!/usr/bin/env python3
"""The workloads of bench_cuda.cpp in PyTorch on cuda:0, same sizes and dtypes, printed as
"name bytes flops ms" (median of 20 after warm-up, synchronising after each call)."""
import statistics
import sys
import time

import torch


def time_ms(f, iters=20):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    t = []
    for _ in range(iters):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def report(name, ms):
    print(f"{name} 0 0 {ms:.4f}", flush=True)


def main():
    d = "cuda"
    n = 64 << 20
    x = torch.rand(n, device=d)
    y = torch.rand(n, device=d)
    report("exp_f32_64M", time_ms(lambda: x.exp()))
    report("gelu_f32_64M", time_ms(lambda: torch.nn.functional.gelu(x)))
    report("add_f32_64M", time_ms(lambda: x + y))
    report("mul_scalar_f32_64M", time_ms(lambda: x * 2.0))
    report("sum_f32_64M", time_ms(lambda: x.sum()))
    m = x.reshape(16384, 4096)
    report("sum_dim1_16384x4096", time_ms(lambda: m.sum(1, keepdim=True)))
    report("softmax_16384x4096", time_ms(lambda: torch.softmax(m, 1)))

    report("layernorm_16384x4096",
           time_ms(lambda: torch.nn.functional.layer_norm(m, (4096,), eps=1e-5)))
    report("argmax_dim1_16384x4096", time_ms(lambda: m.argmax(1, keepdim=True)))
    for s in (4096, 8192):
        a = torch.rand(s, s, device=d).bfloat16()
        b = torch.rand(s, s, device=d).bfloat16()
        report(f"matmul_bf16_{s}", time_ms(lambda: a @ b, 10))
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.rand(4096, 4096, device=d)
    b = torch.rand(4096, 4096, device=d)
    report("matmul_f32_4096", time_ms(lambda: a @ b, 10))
    t = torch.ones(16, device=d)
    k = 2000

    def tiny():
        u = t
        for _ in range(k):
            u = u + 1.0

    report("launch_tiny_add_per_op", time_ms(tiny, 5) / k)
    host = []
    for _ in range(7):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        tiny()
        host.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
    host.sort()
    report("launch_tiny_add_host_per_op", host[len(host) // 2] / k)


if __name__ == "__main__":
    sys.exit(main())
