// fusion_record_cost: the host cost of one op on the Fusion decorator against the plain Cpu,
// for counting instructions under callgrind (benches/fusion_record_cost.sh), where the count
// is deterministic on a shared machine and wall time is not.
//
// Runs a chain of `ops` dependent ops on a [16] f32 tensor, reads the result, and does it
// twice; the script runs it at two chain lengths and divides the difference by the extra
// ops, so start-up (the library's static initialisation, the first stream, the first plan)
// drops out:
//   add_scalar  x = std::move(x).add_scalar(1.0)   fuses (a scalar source and an add):
//                                                   the launch_overhead workload
//   mul         x = std::move(x) * y               fuses (a binary op on two tensors)
//   cumsum      x = x.cumsum(0)                    cannot fuse (runs alone)
//
//   fusion_record_cost OP OPS {cpu|fusion}
#include <cstdio>
#include <cstdlib>
#include <string>

#include <ember/ember.hpp>

using namespace ember;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: fusion_record_cost {add_scalar|mul|cumsum} OPS {cpu|fusion}\n");
    return 2;
  }
  const std::string op = argv[1], device = argv[3];
  const long ops = std::atol(argv[2]);
  if ((op != "add_scalar" && op != "mul" && op != "cumsum") || ops < 0 ||
      (device != "cpu" && device != "fusion")) {
    std::fprintf(stderr, "fusion_record_cost: bad arguments\n");
    return 2;
  }
  const Device dev = device == "fusion" ? Device::cpu().fusion() : Device::cpu();
  const Shape shape{16};
  // Values that stay finite and exact over any chain length: cumsum of zeros, products of ones.
  const auto x0 = Tensor<1>::full(shape, op == "cumsum" ? 0.0 : 1.0, dev);
  const auto y = Tensor<1>::ones(shape, dev);
  double check = 0;
  for (int round = 0; round < 2; ++round) {
    auto x = x0;
    for (long i = 0; i < ops; ++i) {
      if (op == "add_scalar") {
        x = std::move(x).add_scalar(1.0);
      } else if (op == "mul") {
        x = std::move(x) * y;
      } else {
        x = x.cumsum(0);
      }
    }
    check += x.to_data().to_vector<float>()[15];
  }
  std::printf("%s x %ld on %s: %g\n", op.c_str(), ops, dev.name().c_str(), check);
  return 0;
}
