#!/usr/bin/python3
"""PyTorch's side of bench_record: the same model (64 f32 tensors of [2048, 2048], about
1 GB) saved with torch.save and safetensors.torch.save_file, each followed by fsync, and
loaded with torch.load and safetensors.torch.load_file, each after the file's pages were
dropped (fsync + posix_fadvise DONTNEED), as bench_record does for ember.

    record_torch.py [--dir DIR] [--mib N] [--reps N] [--loads]   (the bench venv's python)

--loads: torch.load alone, cold and warm (bench_record --loads --python runs it so).
"""
import argparse
import os
import statistics
import tempfile
import time

import torch


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--loads", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(2)
    count = max(1, a.mib // 16)
    sd = {f"ws.{i}": torch.full((2048, 2048), i * 0.5) for i in range(count)}
    gb = count * 2048 * 2048 * 4 / 1e9
    try:
        import safetensors
        from safetensors.torch import load_file, save_file
        st_version = safetensors.__version__
    except ImportError:
        save_file = None
        st_version = "missing"
    print(f"record_torch: torch {torch.__version__}, safetensors {st_version}, {gb:.3f} GB in {a.dir}")
    pt, st = os.path.join(a.dir, "record_torch.pt"), os.path.join(a.dir, "record_torch.safetensors")
    times = {k: [] for k in ["torch.save", "torch.load", "torch.load mmap", "save_file", "load_file"]}
    if a.loads:
        torch.save(sd, pt)
        fsync_file(pt)
        cold, warm = [], []
        for _ in range(a.reps):
            drop_cache(pt)
            t0 = time.perf_counter()
            back = torch.load(pt)
            cold.append(time.perf_counter() - t0)
            del back
            t0 = time.perf_counter()
            back = torch.load(pt)
            warm.append(time.perf_counter() - t0)
            del back
        for k, v in (("torch.load, cold", cold), ("torch.load, warm", warm)):
            m = statistics.median(v)
            print(f"{k:34s} {m:8.3f} s  {gb / m:7.2f} GB/s   ({', '.join(f'{x:.3f}' for x in v)})")
        os.remove(pt)
        return
    for _ in range(a.reps):
        t0 = time.perf_counter()
        torch.save(sd, pt)
        fsync_file(pt)
        times["torch.save"].append(time.perf_counter() - t0)
        drop_cache(pt)
        t0 = time.perf_counter()
        back = torch.load(pt)
        times["torch.load"].append(time.perf_counter() - t0)
        del back
        drop_cache(pt)
        t0 = time.perf_counter()
        back = torch.load(pt, mmap=True)
        s = sum(float(t[0, 0]) for t in back.values())  # touch one page of each tensor
        times["torch.load mmap"].append(time.perf_counter() - t0)
        del back
        if save_file:
            t0 = time.perf_counter()
            save_file(sd, st)
            fsync_file(st)
            times["save_file"].append(time.perf_counter() - t0)
            drop_cache(st)
            t0 = time.perf_counter()
            back = load_file(st)
            times["load_file"].append(time.perf_counter() - t0)
            del back
    for k, v in times.items():
        if v:
            m = statistics.median(v)
            print(f"{k:34s} {m:8.3f} s  {gb / m:7.2f} GB/s")
    for p in (pt, st):
        if os.path.exists(p):
            os.remove(p)


if __name__ == "__main__":
    main()
