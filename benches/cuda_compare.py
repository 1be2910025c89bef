#!/usr/bin/env python3
"""Joins bench_cuda's and cuda_torch.py's outputs into one table: ember ms, PyTorch ms,
ratio (ember / PyTorch: lower is better) and ember's share of the copy ceiling (for
memory-bound workloads) or its TFLOP/s (for matmul).

    cuda_compare.py ember.txt torch.txt
"""
import sys


def read(path):
    rows = {}
    for line in open(path):
        parts = line.split()
        if len(parts) == 4:
            rows[parts[0]] = (float(parts[1]), float(parts[2]), float(parts[3]))
    return rows


def main():
    ember, torch = read(sys.argv[1]), read(sys.argv[2])
    copy_bytes, _, copy_ms = ember.get("ceiling_copy", (0, 0, 0))
    bw = copy_bytes / (copy_ms * 1e-3) if copy_ms else 0
    print(f"copy ceiling: {bw / 1e12:.2f} TB/s (device-to-device, reads + writes)")
    print(f"| workload | ember ms | PyTorch ms | ember/PyTorch | ember vs ceiling |")
    print(f"|---|---|---|---|---|")
    for name, (b, f, ms) in ember.items():
        if name == "ceiling_copy":
            continue
        tms = torch.get(name, (0, 0, None))[2]
        ratio = f"{ms / tms:.2f}" if tms else "-"
        if name.startswith("matmul"):
            share = f"{f / (ms * 1e-3) / 1e12:.0f} TFLOP/s"
        elif b and bw:
            share = f"{100 * b / (ms * 1e-3) / bw:.0f}% of copy"
        else:
            share = "-"
        tstr = f"{tms:.4f}" if tms else "-"
        print(f"| {name} | {ms:.4f} | {tstr} | {ratio} | {share} |")


if __name__ == "__main__":
    main()
