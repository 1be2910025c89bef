// EMBER_CONFIG's save(path) and load(path): a config as a JSON file. Not part of an embedded
// build (no filesystem): there a config comes from a record's metadata or from code.
#include <fstream>
#include <sstream>

#include "ember/nn/config.hpp"

namespace ember::nn::detail {

void save_json(const Json& j, const std::string& path, const char* what) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  EMBER_CHECK(out.good(), std::string(what) + "::save: cannot open '" + path + "' for writing");
  out << j.dump(2) << '\n';
  out.close();
  EMBER_CHECK(out.good(), std::string(what) + "::save: writing '" + path + "' failed");
}

Json load_json(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), std::string(what) + "::load: cannot open '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  Json j = Json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  EMBER_CHECK(!j.is_discarded(), std::string(what) + "::load: '" + path + "' is not valid JSON");
  return j;
}

}  // namespace ember::nn::detail
