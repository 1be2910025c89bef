// libFuzzer target of the ONNX parser and loader (`make fuzz-onnx`): any bytes either load
// (and, where every input has a small static or symbolic shape, run on ones) or throw
// ember::Error — never a crash, a hang or an unbounded allocation.
#include <cstddef>
#include <cstdint>

#include "ember/onnx/onnx.hpp"
#include "ember/tensor/ops.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ember;
  try {
    onnx::Model m = onnx::load_bytes(data, size, Device::cpu());
    std::vector<DynTensor> inputs;
    for (const auto& v : m.inputs()) {
      if (!v.shape) return 0;
      std::vector<std::size_t> dims;
      std::size_t n = 1;
      for (const auto& d : *v.shape) {
        dims.push_back(d.value.value_or(2));
        n *= dims.back() == 0 ? 1 : dims.back();
        if (n > (1u << 16)) return 0;
      }
      inputs.push_back(ops::ones(Shape(dims), v.dtype, Device::cpu()));
    }
    (void)m.run(inputs);
  } catch (const Error&) {
  }
  return 0;
}
