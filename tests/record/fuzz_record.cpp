// libFuzzer target for every record reader (.ember, safetensors, PyTorch zip and legacy):
// any input must be an ember::Error or a readable record, never a crash, an out-of-bounds
// access or an allocation the input cannot back. Built with -DEMBER_FUZZ=ON by clang;
// `make fuzz` runs it on the committed fixtures as the seed corpus.
#include <cstddef>
#include <cstdint>
#include <span>

#include "record/reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ember::record::detail;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  for (bool verify : {true, false}) {
    try {
      auto reader = open_reader(memory_source(bytes), ReaderOptions{verify, ""});
      for (std::size_t i = 0; i < reader->info().tensors.size(); ++i) (void)reader->read(i);
    } catch (const ember::Error&) {
    }
  }
  return 0;
}
