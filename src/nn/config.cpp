// The non-template parts of EMBER_CONFIG: key checks and error messages (config_file.cpp
// has the files; an embedded build has no filesystem and leaves it out).
#include "ember/nn/config.hpp"

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

#if !EMBER_HAS_EXCEPTIONS
void json_failed(const char* what) { fail(std::string("json: ") + what); }
#endif

}  // namespace ember::nn::detail
