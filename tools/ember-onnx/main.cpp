// ember-onnx: writes the C++ of an ONNX model (onnx::generate, <ember/onnx/codegen.hpp>).
//
//   ember-onnx model.onnx --out dir/ [--name Struct] [--namespace ns] [--stem file]
//              [--format ember|safetensors]
//
// writes dir/<stem>.hpp, dir/<stem>.cpp and dir/<stem>.<format> and prints what it wrote.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "ember/onnx/codegen.hpp"

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "ember-onnx: %s\nusage: ember-onnx model.onnx --out DIR [--name STRUCT] "
               "[--namespace NS] [--stem FILE] [--format ember|safetensors]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, out;
  ember::onnx::GenerateOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&](std::string& dst) {
      if (i + 1 >= argc) return false;
      dst = argv[++i];
      return true;
    };
    bool ok = true;
    if (a == "--out")
      ok = next(out);
    else if (a == "--name")
      ok = next(options.struct_name);
    else if (a == "--namespace")
      ok = next(options.ns);
    else if (a == "--stem")
      ok = next(options.file_stem);
    else if (a == "--format")
      ok = next(options.weights_format);
    else if (a == "--help" || a == "-h")
      return usage("writes the C++ of an ONNX model"), 0;
    else if (!a.empty() && a[0] == '-')
      return usage(("unknown option " + a).c_str());
    else if (model.empty())
      model = a;
    else
      return usage(("a second model file " + a).c_str());
    if (!ok) return usage((a + " needs a value").c_str());
  }
  if (model.empty() || out.empty()) return usage("a model file and --out are required");
  try {
    const auto g = ember::onnx::generate(model, out, options);
    std::printf(
        "ember-onnx: %s -> %s, %s, %s (struct %s::%s: %zu nn layers, %zu ember ops, %zu "
        "onnx::apply, %zu tensors)\n",
        model.c_str(), g.header_path.c_str(), g.source_path.c_str(), g.weights_path.c_str(),
        options.ns.c_str(), g.struct_name.c_str(), g.layers, g.direct_ops, g.applied_ops,
        g.tensors);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember-onnx: %s\n", e.what());
    return 1;
  }
  return 0;
}
