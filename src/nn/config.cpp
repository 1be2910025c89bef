// The non-template parts of EMBER_CONFIG: key checks, error messages and files.
#include "ember/nn/config.hpp"

#include <fstream>
#include <sstream>

namespace ember::nn::detail {

void bad_config_value(const std::string& key, const char* what, const Json& j) {
  std::string shown = j.dump();
  if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
  fail("config key '" + key + "': expected " + what + ", got " + shown);
}

void check_config_keys(const Json& j, const std::vector<std::string_view>& names,
                       const std::string& where) {
  if (!j.is_object()) {
    fail(std::string("config") + (where.empty() ? "" : " key '" + where + "'") +
         ": expected a JSON object, got " + j.dump().substr(0, 80));
  }
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (auto n : names) known = known || n == key;
    if (known) continue;
    std::string list;
    for (auto n : names) list += (list.empty() ? "" : ", ") + std::string(n);
    fail("config: unknown key '" + (where.empty() ? key : where + "." + key) +
         "' (fields: " + list + ")");
  }
}

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
