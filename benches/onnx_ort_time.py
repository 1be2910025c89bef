#!/usr/bin/env python3
"""Times onnxruntime on a model of tests/onnx/export_real_models.py, for bench_onnx: the
input of NAME.json, `threads` intra-op threads (one inter-op), the CPU provider (or the
CUDA provider with --cuda, where the wheel has it), the median of `reps` runs after
`warmup` (in the process's CPU time, all threads, with --cpu-time; wall time otherwise).
Prints one JSON line {"median_ms", "provider", "onnxruntime"}; exit 77 without
onnxruntime (the bench venv, scripts/bench-venv.sh, has it).

    .venv/bin/python benches/onnx_ort_time.py DIR NAME THREADS REPS WARMUP [--cuda] [--cpu-time]
"""
import json
import os
import statistics
import sys
import time

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)

d, name, threads, reps, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cuda = "--cuda" in sys.argv[6:]
clock = time.process_time if "--cpu-time" in sys.argv[6:] else time.perf_counter
with open(os.path.join(d, name + ".json")) as f:
    meta = json.load(f)
x = np.array(meta["input"], dtype=np.float32).reshape(meta["input_shape"])
opts = ort.SessionOptions()
opts.intra_op_num_threads = threads
opts.inter_op_num_threads = 1
providers = ["CPUExecutionProvider"]
if cuda and "CUDAExecutionProvider" in ort.get_available_providers():
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
sess = ort.InferenceSession(os.path.join(d, name + ".onnx"), opts, providers=providers)
feed = {sess.get_inputs()[0].name: x}
for _ in range(warmup):
    sess.run(None, feed)
times = []
for _ in range(reps):
    t = clock()
    sess.run(None, feed)
    times.append((clock() - t) * 1e3)
print(json.dumps({"median_ms": statistics.median(times), "provider": sess.get_providers()[0],
                  "onnxruntime": ort.__version__}))
