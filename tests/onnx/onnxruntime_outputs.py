#!/usr/bin/env python3
"""Runs a model of tests/onnx/export_real_models.py with onnxruntime (CPU provider) on the
input stored in its NAME.json and writes NAME.onnxruntime.json ({"output_shape", "output"})
into OUT (default DIR), for the C++ test to compare with. Run with a Python that has
onnxruntime (the bench venv, scripts/bench-venv.sh); exit status 77 when it has none.

    .venv/bin/python tests/onnx/onnxruntime_outputs.py DIR NAME [OUT]
"""
import json
import os
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print(f"skip: {e}", file=sys.stderr)
    sys.exit(77)

d, name = sys.argv[1], sys.argv[2]
out_dir = sys.argv[3] if len(sys.argv) > 3 else d
with open(os.path.join(d, name + ".json")) as f:
    meta = json.load(f)
x = np.array(meta["input"], dtype=np.float32).reshape(meta["input_shape"])
opts = ort.SessionOptions()
opts.intra_op_num_threads = 1
sess = ort.InferenceSession(os.path.join(d, name + ".onnx"), opts, providers=["CPUExecutionProvider"])
(y,) = sess.run(None, {sess.get_inputs()[0].name: x})
os.makedirs(out_dir, exist_ok=True)
with open(os.path.join(out_dir, name + ".onnxruntime.json"), "w") as f:
    json.dump({"output_shape": list(y.shape), "output": [float(v) for v in y.flatten()],
               "onnxruntime": ort.__version__}, f)
