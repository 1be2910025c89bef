#!/usr/bin/env python3
"""Checks every #include of include/, src/ and tests/ against DESIGN §1's layering.

DESIGN §1 (the layers, lowest first):

    base < ir < backend < {cpu, cuda, vulkan, libtorch, autodiff, fusion, tensor}
    tensor < nn < record < optim < onnx < data < train

A layer includes only layers below it: the backends, the decorators and tensor sit side by
side above backend and never include one another; nothing below the tensor line includes
anything above it. The layers above the tensor line use the tensor API (and base, ir,
backend through it), never a backend or decorator directly. Besides the layer edges:

  - a layer's private headers (src/<layer>/...) are included by that layer alone (and by
    its tests, tests/<layer>/); the one exception is the registry file, src/registry.cpp,
    which sees the factory header of each backend built into libember (UMBRELLA_PRIVATE);
  - a public header (include/ember/...) includes only public headers (they are installed);
  - the umbrella header include/ember/ember.hpp and src/registry.cpp may include any
    public header; backends in libraries of their own (Cuda) are never included by them.

The build enforces the private-header rule too (each layer's include path is its own
folder); this script also covers the public headers, which every layer sees, and names
each forbidden edge with file and line. Exit status 1 on any violation.

    scripts/check-layering.py [--root DIR]   check the tree (default: the repository)
    scripts/check-layering.py --self-test    check that the checker catches violations
"""
import argparse
import os
import re
import sys
import tempfile

BACKENDS = ["cpu", "cuda", "vulkan", "libtorch"]
DECORATORS = ["autodiff", "fusion"]
UPPER = ["nn", "record", "optim", "onnx", "data", "train"]  # in order, above the tensor line

# layer -> the layers whose public headers it may include (its own always).
ALLOWED = {
    "base": [],
    "ir": ["base"],
    "backend": ["base", "ir"],
    "tensor": ["base", "ir", "backend"],
}
for _l in BACKENDS + DECORATORS:
    ALLOWED[_l] = ["base", "ir", "backend"]
for _i, _l in enumerate(UPPER):
    ALLOWED[_l] = ["base", "ir", "backend", "tensor"] + UPPER[:_i]
UMBRELLA = "(umbrella)"
ALLOWED[UMBRELLA] = [l for l in ALLOWED if l not in ("cuda", "vulkan", "libtorch")]
# Private headers the registry file may include: the backends built into libember.
UMBRELLA_PRIVATE = ["cpu"]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
SOURCE_EXT = (".hpp", ".cpp", ".h", ".cc", ".inc", ".cuh")


class Tree:
    def __init__(self, root):
        self.root = os.path.abspath(root)

    def rel(self, path):
        return os.path.relpath(path, self.root).replace(os.sep, "/")

    def classify(self, path):
        """(layer, kind) of a file: kind is 'public', 'private', 'test' or None."""
        r = self.rel(path)
        parts = r.split("/")
        if r in ("include/ember/ember.hpp", "src/registry.cpp", "src/registry_embedded.cpp"):
            return UMBRELLA, "public" if parts[0] == "include" else "private"
        if parts[0] == "include" and len(parts) >= 4 and parts[1] == "ember":
            return parts[2], "public"
        if parts[0] == "src" and len(parts) >= 3:
            return parts[1], "private"
        if parts[0] == "tests":
            return (parts[1] if len(parts) >= 3 else None), "test"
        return None, None

    def resolve(self, including, spelled, quoted):
        """The file an include names, or None for a system header."""
        candidates = []
        if quoted:
            candidates.append(os.path.join(os.path.dirname(including), spelled))
        candidates.append(os.path.join(self.root, "include", spelled))
        candidates.append(os.path.join(self.root, "src", spelled))
        if self.classify(including)[1] == "test":
            candidates.append(os.path.join(self.root, "tests", spelled))
        for c in candidates:
            if os.path.isfile(c):
                return os.path.normpath(c)
        return None

    def files(self):
        for top in ("include", "src", "tests"):
            for dirpath, _, names in os.walk(os.path.join(self.root, top)):
                for n in sorted(names):
                    if n.endswith(SOURCE_EXT):
                        yield os.path.join(dirpath, n)


EMBEDDED_EXT = ".inc"


def check(root):
    tree = Tree(root)
    errors = []
    known = set(ALLOWED)
    for top in ("src", "include/ember"):
        d = os.path.join(tree.root, top)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if os.path.isdir(os.path.join(d, name)) and name not in known:
                errors.append(f"{top}/{name}/: a layer DESIGN §1 does not list; add it to "
                              "ALLOWED in scripts/check-layering.py")
    for path in tree.files():
        src_layer, src_kind = tree.classify(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for lineno, line in enumerate(lines, 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            quoted, spelled = m.group(1) == '"', m.group(2)
            if not quoted and not spelled.startswith("ember/"):
                continue  # a system or third-party header
            target = tree.resolve(path, spelled, quoted)
            if target is None and quoted and spelled.endswith(EMBEDDED_EXT):
                # A file of the tree embedded by the build as a string (cmake/embed_text.cmake).
                target = tree.resolve(path, spelled[: -len(EMBEDDED_EXT)], quoted)
            close = '"' if quoted else ">"
            where = f"{tree.rel(path)}:{lineno}: #include {m.group(1)}{spelled}{close}"
            if target is None:
                if spelled.startswith("ember/") or src_kind != "test":
                    errors.append(f"{where}: names no file of the tree")
                continue
            dst_layer, dst_kind = tree.classify(target)
            if dst_kind is None:
                errors.append(f"{where}: reaches {tree.rel(target)}, outside include/ and src/")
                continue
            if dst_kind == "test":
                if src_kind != "test":
                    errors.append(f"{where}: a library file includes a test file")
                continue
            if src_layer is None and src_kind == "test":
                src_layer = "(tests)"
            if dst_kind == "private":
                if src_kind == "public":
                    errors.append(f"{where}: a public (installed) header includes the private "
                                  f"header {tree.rel(target)}")
                elif src_layer == dst_layer:
                    pass
                elif src_layer == UMBRELLA and dst_layer in UMBRELLA_PRIVATE:
                    pass
                else:
                    errors.append(f"{where}: {src_layer} includes {dst_layer}'s private header "
                                  f"{tree.rel(target)} (only {dst_layer} and tests/{dst_layer}/ may)")
                continue
            # dst is a public header of dst_layer
            if src_kind == "test" or src_layer == dst_layer:
                continue
            if src_layer not in ALLOWED:
                continue  # reported above as an unknown layer
            if dst_layer not in ALLOWED[src_layer]:
                allowed = ", ".join(ALLOWED[src_layer]) or "nothing"
                errors.append(f"{where}: {src_layer} may not include {dst_layer} "
                              f"(DESIGN §1: {src_layer} sees {allowed})")
    return errors


def self_test():
    """Builds small trees, each with one forbidden edge, and expects each to be caught."""
    def tree(files):
        d = tempfile.mkdtemp(prefix="ember-layering-")
        for rel, text in files.items():
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
        return d

    clean = {
        "include/ember/base/shape.hpp": "#pragma once\n",
        "include/ember/ir/ops.hpp": '#include "ember/base/shape.hpp"\n',
        "include/ember/tensor/tensor.hpp": '#include "ember/ir/ops.hpp"\n',
        "include/ember/ember.hpp": '#include "ember/tensor/tensor.hpp"\n',
        "src/cpu/context.hpp": '#include "ember/ir/ops.hpp"\n',
        "src/cpu/kernels/k.cpp": '#include "cpu/context.hpp"\n#include <vector>\n',
        "src/cuda/context.hpp": "#pragma once\n",
        "src/registry.cpp": '#include "cpu/context.hpp"\n',
        "tests/cpu/test_cpu.cpp": '#include "cpu/context.hpp"\n#include <ember/ember.hpp>\n',
    }
    cases = {
        "sideways private": ("src/cpu/x.cpp", '#include "cuda/context.hpp"\n',
                             "cpu includes cuda's private header"),
        "sideways relative": ("src/cpu/y.cpp", '#include "../cuda/context.hpp"\n',
                              "cpu includes cuda's private header"),
        "up to tensor": ("src/cpu/z.cpp", '#include "ember/tensor/tensor.hpp"\n',
                         "cpu may not include tensor"),
        "base up to ir": ("include/ember/base/dtype.hpp", '#include "ember/ir/ops.hpp"\n',
                          "base may not include ir"),
        "public to private": ("include/ember/ir/more.hpp", '#include "cpu/context.hpp"\n',
                              "a public (installed) header includes the private"),
        "umbrella to cuda": ("src/registry.cpp", '#include "cuda/context.hpp"\n',
                             "(umbrella) includes cuda's private header"),
        "test of another layer": ("tests/tensor/t.cpp", '#include "cpu/context.hpp"\n',
                                  "tensor includes cpu's private header"),
        "unknown layer": ("src/gizmo/g.cpp", "\n", "src/gizmo/: a layer DESIGN §1 does not list"),
        "missing file": ("src/cpu/w.cpp", '#include "cpu/nothing.hpp"\n', "names no file"),
    }
    failures = []
    if check(tree(clean)):
        failures.append(f"the clean tree fails: {check(tree(clean))}")
    for label, (rel, text, expect) in cases.items():
        errs = check(tree({**clean, rel: text}))
        if not any(expect in e for e in errs):
            failures.append(f"{label}: expected an error containing '{expect}', got {errs}")
    for f in failures:
        print("check-layering self-test:", f, file=sys.stderr)
    print(f"check-layering self-test: {len(cases) - len(failures)} of {len(cases)} violations "
          "caught" + ("" if failures else ", clean tree passes"))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    errors = check(args.root)
    for e in errors:
        print(e, file=sys.stderr)
    n = sum(1 for _ in Tree(args.root).files())
    if errors:
        print(f"check-layering: {len(errors)} forbidden include(s) in {n} files", file=sys.stderr)
        return 1
    print(f"check-layering: {n} files, every include follows DESIGN §1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
