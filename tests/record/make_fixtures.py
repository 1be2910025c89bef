#!/usr/bin/python3
"""PyTorch fixtures for ember's record tests, and the check of ember-written safetensors.

  make_fixtures.py generate OUTDIR          writes the files in tests/record/fixtures/torch/
  make_fixtures.py verify [KIND] MODEL IO   loads MODEL (safetensors written by ember) into
                                            the PyTorch model KIND (net, cnn or encoder;
                                            net by default), runs it on IO's "x" and checks
                                            the result against IO's "y" (ember's output);
                                            exit 0 if equal

The models:
- net: fc1 = Linear(3, 4), fc2 = Linear(4, 2) and a buffer-holding module `stats`
  (running_mean [4] f32, num_batches_tracked a 0-dim int64, as batch norm's);
  forward(x) = fc2(relu(fc1(x)) + stats.running_mean).
- cnn: conv1 = Conv2d(1, 4, 3, padding=1), bn1 = BatchNorm2d(4) (eval mode, with running
  statistics), relu, max_pool2d(2), conv2 = Conv2d(4, 6, 3, stride=2), flatten,
  fc = Linear(24, 5), on x [2, 1, 10, 10].
- encoder: TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0,
  batch_first=True), on x [2, 5, 8].
Each is saved with torch.save (zip and legacy) and as safetensors, beside its golden input
and output (<kind>_io.safetensors; net's is golden.safetensors). safetensors are written and
read by hand (the format is a length, a JSON header and raw bytes), so no package beyond
torch is needed. Run with Debian's python3-torch: /usr/bin/python3 make_fixtures.py
generate DIR.
"""
import collections
import json
import os
import pickle
import struct
import sys
import zipfile

import numpy as np
import torch

NP_OF = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
         "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
ST_OF = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.int64: "I64",
         torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
         torch.bool: "BOOL"}


def write_safetensors(tensors, path, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for key, t in tensors.items():
        data = t.detach().contiguous().numpy().tobytes()
        header[key] = {"dtype": ST_OF[t.dtype], "shape": list(t.shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for key, v in header.items():
        if key == "__metadata__":
            continue
        b, e = v["data_offsets"]
        arr = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=NP_OF[v["dtype"]])
        out[key] = torch.from_numpy(arr.copy()).reshape(v["shape"])
    return out


class Stats(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(4))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(3, 4)
        self.fc2 = torch.nn.Linear(4, 2)
        self.stats = Stats()

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)) + self.stats.running_mean)


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(4)
        self.conv2 = torch.nn.Conv2d(4, 6, 3, stride=2)
        self.fc = torch.nn.Linear(24, 5)

    def forward(self, x):
        h = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        return self.fc(self.conv2(h).flatten(1))


def make_encoder():
    return torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
                                            batch_first=True)


MODELS = {"net": Net, "cnn": Cnn, "encoder": make_encoder}


def save_model(out, name, model, x):
    model.eval()
    with torch.no_grad():
        y = model(x)
    sd = model.state_dict()
    torch.save(sd, os.path.join(out, name + ".pt"))
    torch.save(sd, os.path.join(out, name + "_legacy.pt"), _use_new_zipfile_serialization=False)
    write_safetensors(sd, os.path.join(out, name + ".safetensors"), {"source": "make_fixtures.py"})
    write_safetensors({"x": x, "y": y}, os.path.join(out, name + "_io.safetensors"))


def generate(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    net = Net()
    net.stats.running_mean.copy_(torch.tensor([0.5, -0.25, 0.125, 1.0]))
    net.stats.num_batches_tracked.fill_(7)
    x = torch.randn(5, 3)
    with torch.no_grad():
        y = net(x)
    sd = net.state_dict()
    torch.save(sd, os.path.join(out, "net.pt"))
    torch.save(sd, os.path.join(out, "net_legacy.pt"), _use_new_zipfile_serialization=False)
    write_safetensors(sd, os.path.join(out, "net.safetensors"), {"source": "make_fixtures.py"})
    write_safetensors({"x": x, "y": y}, os.path.join(out, "golden.safetensors"))
    # A training checkpoint: the state_dict under a key, beside non-tensor values.
    torch.save({"epoch": 3, "model_state_dict": sd, "note": "checkpoint"},
               os.path.join(out, "checkpoint.pt"))
    # The same archive with deflated entries (torch writes stored ones).
    with zipfile.ZipFile(os.path.join(out, "net.pt")) as src, \
            zipfile.ZipFile(os.path.join(out, "net_deflated.pt"), "w",
                            zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    # Views of one storage: offsets, strides, transposes; base[i][j] = 6 i + j.
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = collections.OrderedDict([
        ("row", base[1]), ("col", base[:, 2]), ("t", base.t()), ("block", base[1:3, 2:5]),
        ("step", base[::2, ::3]), ("half", base.half()[:, 1]), ("bf16", base.bfloat16()),
        ("f64", base.double()[2:]), ("i64", torch.arange(5)), ("i32", torch.arange(3, dtype=torch.int32)),
        ("flags", torch.tensor([True, False, True])), ("u8", torch.arange(4, dtype=torch.uint8)),
        ("nested", {"inner": base[3, 1:4]})])
    torch.save(views, os.path.join(out, "views.pt"))
    torch.save(views, os.path.join(out, "views_legacy.pt"), _use_new_zipfile_serialization=False)
    # A pickle that asks for os.system: ember must refuse it and run nothing.
    evil = b"\x80\x02cos\nsystem\nq\x00X\x0b\x00\x00\x00echo pwned!q\x01\x85q\x02Rq\x03."
    with zipfile.ZipFile(os.path.join(out, "malicious.pt"), "w") as z:
        z.writestr("malicious/data.pkl", evil)
        z.writestr("malicious/version", "3\n")
    assert pickle.loads(evil.replace(b"os\nsystem", b"builtins\nlen")) == 11
    # A small CNN and a transformer encoder layer, each with its golden input and output.
    torch.manual_seed(1)
    cnn = Cnn()
    with torch.no_grad():  # running statistics that are not the defaults
        cnn.bn1.running_mean.copy_(torch.tensor([0.1, -0.2, 0.05, 0.3]))
        cnn.bn1.running_var.copy_(torch.tensor([0.9, 1.2, 0.5, 2.0]))
        cnn.bn1.weight.copy_(torch.tensor([1.1, 0.8, -0.5, 1.3]))
        cnn.bn1.bias.copy_(torch.tensor([0.0, 0.1, -0.1, 0.2]))
        cnn.bn1.num_batches_tracked.fill_(12)
    save_model(out, "cnn", cnn, torch.randn(2, 1, 10, 10))
    torch.manual_seed(2)
    save_model(out, "encoder", make_encoder(), torch.randn(2, 5, 8))


def verify(kind, model_path, io_path):
    tensors = read_safetensors(model_path)
    io = read_safetensors(io_path)
    net = MODELS[kind]()
    net.load_state_dict(tensors, strict=True)
    net.eval()
    with torch.no_grad():
        y = net(io["x"])
    if not torch.allclose(y, io["y"], rtol=1e-5, atol=1e-6):
        print(f"verify {kind}: PyTorch's output differs from ember's:\n", y, "\n", io["y"])
        return 1
    print(f"verify {kind}: PyTorch reproduces ember's output from ember's safetensors")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "generate":
        generate(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "verify":
        sys.exit(verify("net", sys.argv[2], sys.argv[3]))
    elif len(sys.argv) == 5 and sys.argv[1] == "verify" and sys.argv[2] in MODELS:
        sys.exit(verify(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        print(__doc__)
        sys.exit(2)
