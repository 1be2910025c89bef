// Writes the .ember fixtures of the current format version into a directory:
//   build/tests/make_ember_fixtures tests/record/fixtures/v1
// Run once per format version; the files are committed and loaded by the tests forever.
#include <cstdio>
#include <string>

#include "record/fixture_values.hpp"

int main(int argc, char** argv) {
  using namespace ember;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const Device cpu = Device::cpu();
  record::SaveOptions options;
  options.config = nn::Json{{"d_input", 3}, {"d_output", 2}, {"note", "fixture"}};
  options.metadata = {{"written_by", "make_ember_fixtures"}};
  record::save(record_fixtures::fixture_net(cpu, true), dir + "/model.ember", options);
  std::vector<record::NamedTensor> tensors;
  for (auto& [key, data] : record_fixtures::dtype_tensors()) {
    tensors.push_back({key, ops::from_data(data, cpu)});
  }
  record::save_tensors(tensors, dir + "/dtypes.ember");
  std::printf("wrote %s/model.ember and %s/dtypes.ember\n", dir.c_str(), dir.c_str());
  return 0;
}
