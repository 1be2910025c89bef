// The trained model on the device: the small Fashion-MNIST CNN (examples/embedded/
// fashion_cnn_small.hpp, the demo's layers at a size for flash), saved as .ember by the host
// and linked into this image, is read from flash (record::inspect and record::load from a
// std::span<const std::byte>; its config from the record's JSON metadata), placed in a
// 256 KiB arena and run on a few Fashion-MNIST test images linked beside it. The host's
// predictions and logits for the same images from the same file come in the same blob
// (examples/embedded/fashion_small.cpp export, run at build time); the predictions must be
// equal and the logits close. Then bad input through the fail handler: a truncated record, a
// corrupt one, a record that does not match the struct, an input of the wrong shape.
// Prints the instructions per inference (QEMU -icount: one tick an instruction) and the
// arena's peak. The exit code is the number of failed cases.
#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "board.hpp"
#include "check.hpp"
#include "ember/base/error.hpp"
#include "ember/cpu/cpu.hpp"
#include "ember/record/record.hpp"
#include "ember/tensor/tensor.hpp"
#include "expect_fail.hpp"
#include "fashion_cnn_small.hpp"

using namespace ember;
using firmware::expect_fail;
using firmware::on_fail;
using firmware::report;

// The linked blobs (firmware_model_blobs.S).
extern "C" const std::byte ember_model_start[], ember_model_end[];
extern "C" const std::byte ember_inputs_start[], ember_inputs_end[];

namespace {

// The inputs blob (layout: fashion_small.cpp's write_inputs).
struct Inputs {
  std::uint32_t count = 0, height = 0, width = 0, classes = 0;
  const std::uint8_t* pixels = nullptr;
  const std::uint8_t* labels = nullptr;
  std::vector<std::int32_t> predicted;
  std::vector<float> logits;
};

std::uint32_t u32_at(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
std::size_t pad4(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

bool parse_inputs(std::span<const std::byte> b, Inputs& in) {
  if (b.size() < 20 || std::memcmp(b.data(), "EMBI", 4) != 0) return false;
  in.count = u32_at(b.data() + 4);
  in.height = u32_at(b.data() + 8);
  in.width = u32_at(b.data() + 12);
  in.classes = u32_at(b.data() + 16);
  const std::size_t px = std::size_t(in.count) * in.height * in.width;
  const std::size_t need =
      20 + pad4(px) + pad4(in.count) + 4 * in.count + 4 * in.count * in.classes;
  if (in.count == 0 || in.count > 64 || in.height != fashion_small::kHeight ||
      in.width != fashion_small::kWidth || in.classes != fashion_small::kClasses ||
      b.size() != need)
    return false;
  const std::byte* p = b.data() + 20;
  in.pixels = reinterpret_cast<const std::uint8_t*>(p);
  p += pad4(px);
  in.labels = reinterpret_cast<const std::uint8_t*>(p);
  p += pad4(in.count);
  in.predicted.resize(in.count);
  std::memcpy(in.predicted.data(), p, 4 * in.count);
  p += 4 * in.count;
  in.logits.resize(std::size_t(in.count) * in.classes);
  std::memcpy(in.logits.data(), p, 4 * in.logits.size());
  return true;
}

Tensor<4> image(const Inputs& in, std::size_t i, const Device& dev) {
  const std::size_t px = std::size_t(in.height) * in.width;
  std::vector<float> x(px);
  fashion_small::normalize(in.pixels + i * px, px, x.data());
  return Tensor<4>::from_data(TensorData::from(x, Shape{1, 1, in.height, in.width}), dev);
}

alignas(64) std::byte g_arena[256 * 1024];

}  // namespace

int main() {
  set_fail_handler(on_fail);
  const std::span<const std::byte> model(ember_model_start,
                                         std::size_t(ember_model_end - ember_model_start));
  Inputs in;
  if (!parse_inputs({ember_inputs_start, std::size_t(ember_inputs_end - ember_inputs_start)}, in)) {
    report("inputs_blob", false, "the linked inputs blob is malformed");
    return firmware::summary();
  }
  std::printf("# model: %u bytes of .ember in flash; %u test images\n", unsigned(model.size()),
              unsigned(in.count));

  const Device dev(cpu::make_cpu_backend(g_arena));
  std::vector<std::int32_t> predicted;
  std::vector<float> logits;
  {
    // The config from the record's metadata (JSON parsed on the device), then the weights:
    // the module is made on the heap's device and loaded into the arena, so the arena holds
    // the loaded parameters and the activations, nothing else.
    const unsigned long long t0 = board::ticks();
    const record::RecordInfo info = record::inspect(model);
    const auto config = fashion_small::CnnConfig::from_json(info.config);
    const fashion_small::Cnn net = record::load(config.init(Device::cpu()), model, dev);
    const unsigned long long t_load = board::ticks() - t0;
    const MemoryStats after_load = memory_stats(dev);
    const auto acc = info.metadata.find("test_accuracy");
    std::printf(
        "# loaded %u tensors, %u parameters (test accuracy %s on the host) in %llu "
        "instructions; the arena holds %u bytes of parameters\n",
        unsigned(info.tensors.size()), unsigned(net.num_params()),
        acc == info.metadata.end() ? "?" : acc->second.c_str(), t_load,
        unsigned(after_load.in_use));
    report("config_from_metadata", config.channels_1 == 8 && config.hidden == 32);

    std::vector<unsigned long long> per_image;
    for (std::size_t i = 0; i < in.count; ++i) {
      const unsigned long long t1 = board::ticks();
      const Tensor<2> out = net.forward(image(in, i, dev));
      const std::vector<float> row = out.to_data().to_vector<float>();
      per_image.push_back(board::ticks() - t1);
      const auto best = std::max_element(row.begin(), row.end()) - row.begin();
      predicted.push_back(std::int32_t(best));
      logits.insert(logits.end(), row.begin(), row.end());
      std::printf("image %u: label %u, predicted %d (host %d), %llu instructions\n", unsigned(i),
                  unsigned(in.labels[i]), int(best), int(in.predicted[i]), per_image.back());
    }
    const MemoryStats s = memory_stats(dev);
    std::sort(per_image.begin(), per_image.end());
    std::printf("# instructions per inference (QEMU -icount): median %llu, min %llu, max %llu\n",
                per_image[per_image.size() / 2], per_image.front(), per_image.back());
    std::printf("# arena: %u bytes, peak %u in use (%u parameters + %u activations), %u after\n",
                unsigned(s.capacity), unsigned(s.peak), unsigned(after_load.in_use),
                unsigned(s.peak - after_load.in_use), unsigned(s.in_use));
    report("activations_within_256k",
           s.capacity == sizeof g_arena && s.peak - after_load.in_use <= 256 * 1024);
  }
  report("arena_released", memory_stats(dev).in_use == 0);
  firmware::check_equal("predictions_equal_host", predicted, in.predicted);
  std::vector<double> host_logits(in.logits.begin(), in.logits.end());
  firmware::check_close("logits_close_to_host", logits, host_logits, 1e-4, 1e-4);

  // Bad input, each through the fail handler with what was wrong.
  const Device heap = Device::cpu();
  const auto config = fashion_small::CnnConfig::from_json(record::inspect(model).config);
  expect_fail(
      "truncated_record",
      [&] { (void)record::load(config.init(heap), model.first(model.size() - 1000), heap); },
      {"truncated", "do not tile"});
  expect_fail("truncated_preamble", [&] { (void)record::inspect(model.first(100)); },
              {"truncated", "100 bytes"});
  std::vector<std::byte> corrupt(model.begin(), model.end());
  corrupt[256 + 17] ^= std::byte{0x40};  // a byte of the first tensor's data
  expect_fail("corrupt_tensor", [&] { (void)record::load(config.init(heap), corrupt, heap); },
              {"checksum", "conv1.weight"});
  expect_fail("struct_mismatch",
              [&] { (void)record::load(config.with_hidden(48).init(heap), model, heap); },
              {"does not match the module", "fc1.weight", "[48, 784]", "[32, 784]"});
  const fashion_small::Cnn net = record::load(config.init(heap), model, heap);
  expect_fail("input_shape",
              [&] {
                (void)net.forward(Tensor<4>::zeros(Shape{1, 3, 28, 28}, heap));
              },
              {"Conv2d", "[1, 3, 28, 28]", "3 channels"});
  return firmware::summary();
}
