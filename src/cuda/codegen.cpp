// all_kernels(): every variant of every kernel family in KernelSpecs (Note [Kernel specs]
// in codegen.hpp), the generators themselves being in codegen/, one file per op family.
#include "cuda/codegen.hpp"

#include <vector>

namespace ember::cuda {

std::vector<KernelSource> all_kernels() {
  std::vector<KernelSource> out;
  for_each_kernel_spec([&](auto family) {
    for (const auto& spec : decltype(family)::type::variants()) out.push_back(spec.source());
  });
  return out;
}

}  // namespace ember::cuda
