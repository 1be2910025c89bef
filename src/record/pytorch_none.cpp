// The PyTorch readers for an embedded build, which has neither zlib nor the pickle machine
// (pytorch.cpp, pickle.cpp, zip.cpp): a PyTorch file is recognised and refused with what to
// do instead.
#include "ember/base/error.hpp"
#include "record/reader.hpp"

namespace ember::record::detail {

namespace {
[[noreturn]] void no_pytorch(const ByteSource& source) {
  fail("record::load: '" + source.name() +
       "' is a PyTorch file; an embedded build reads .ember and safetensors only (convert it "
       "on the host: record::load it there, then record::save it as .ember)");
}
}  // namespace

std::unique_ptr<TensorReader> open_pytorch(std::shared_ptr<const ByteSource> source,
                                           const ReaderOptions&) {
  no_pytorch(*source);
}
std::unique_ptr<TensorReader> open_pytorch_legacy(std::shared_ptr<const ByteSource> source,
                                                  const ReaderOptions&) {
  no_pytorch(*source);
}

}  // namespace ember::record::detail
