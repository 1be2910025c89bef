// EMBER_CONFIG(Type, fields...): JSON for plain aggregate configs (nlohmann::json), and a
// with_<field>(v) setter per field returning a changed copy. docs/nn.md is the reference.
//
// Field types: bool, integers, floating point, std::string, enums (as their integer
// value), std::optional (null when empty), std::vector, std::array, nested EMBER_CONFIG
// types (JSON objects), types with ember_to_json() / ember_from_json(json, key) members
// (nn::Padding), and anything else nlohmann::json converts. from_json starts from Type{}
// (so fields with defaults keep them when their key is absent), and a key that is not a
// field, or a value of the wrong JSON type or out of the field's range, is an ember::Error
// naming the key.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/base/config.hpp"

// Note [JSON without exceptions]
// Without exceptions (an embedded build), nlohmann::json's own errors — a get<T>() of the
// wrong type, at() of a missing key — call ember's fail handler with nlohmann's message
// rather than std::abort(), and its stream operators are left out (no iostreams). ember's
// code checks a value's type before reading it, so these are a backstop; parsing uses
// allow_exceptions = false and checks is_discarded().
#if !EMBER_HAS_EXCEPTIONS
namespace ember::nn::detail {
[[noreturn]] void json_failed(const char* what);
}
#ifndef JSON_THROW_USER
#define JSON_THROW_USER(exception) ::ember::nn::detail::json_failed((exception).what())
#endif
#ifndef JSON_NO_IO
#define JSON_NO_IO 1
#endif
#endif
#include <nlohmann/json.hpp>

#include "ember/base/error.hpp"
#include "ember/nn/preprocessor.hpp"

namespace ember::nn {

using Json = nlohmann::json;

namespace detail {

template <class T>
concept IsConfig = requires(const T& c) {
  c.ember_config_fields([](const char*, const auto&) {});
  T::ember_config_name();
};
template <class T>
concept HasJsonHooks = requires(const T& c, const Json& j, const std::string& key) {
  { c.ember_to_json() } -> std::convertible_to<Json>;
  { T::ember_from_json(j, key) } -> std::same_as<T>;
};
template <class T>
struct is_std_vector : std::false_type {};
template <class T, class A>
struct is_std_vector<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_std_array : std::false_type {};
template <class T, std::size_t N>
struct is_std_array<std::array<T, N>> : std::true_type {};
template <class T>
struct is_std_optional : std::false_type {};
template <class T>
struct is_std_optional<std::optional<T>> : std::true_type {};

// Throws ember::Error "config key 'key': expected <what>, got <j>".
[[noreturn]] void bad_config_value(const std::string& key, const char* what, const Json& j);
// Checks j is an object whose keys are all in `names`; throws naming the first unknown key.
void check_config_keys(const Json& j, const std::vector<std::string_view>& names,
                       const std::string& where);
void save_json(const Json& j, const std::string& path, const char* what);
Json load_json(const std::string& path, const char* what);

template <class T>
Json write_value(const T& v);
template <class T>
void read_value(const Json& j, T& out, const std::string& key);

template <class C>
Json config_to_json(const C& c) {
  Json j = Json::object();
  c.ember_config_fields([&](const char* name, const auto& field) { j[name] = write_value(field); });
  return j;
}

template <class C>
void config_read(const Json& j, C& c, const std::string& where) {
  std::vector<std::string_view> names;
  c.ember_config_fields([&](const char* name, const auto&) { names.emplace_back(name); });
  check_config_keys(j, names, where);
  c.ember_config_fields([&](const char* name, auto& field) {
    auto it = j.find(name);
    if (it != j.end())
      read_value(*it, field, where.empty() ? std::string(name) : where + "." + name);
  });
}

// A config from JSON; errors name the config type and the key.
template <class C>
C config_from_json(const Json& j) {
  C c{};
#if EMBER_HAS_EXCEPTIONS
  try {
    config_read(j, c, "");
  } catch (const Error& e) {
    fail(std::string(C::ember_config_name()) + "::from_json: " + e.what());
  }
#else
  config_read(j, c, "");  // a failure reaches the fail handler with the key, unprefixed
#endif
  return c;
}

template <class T>
Json write_value(const T& v) {
  if constexpr (IsConfig<T>) {
    return config_to_json(v);
  } else if constexpr (HasJsonHooks<T>) {
    return v.ember_to_json();
  } else if constexpr (is_std_optional<T>::value) {
    return v ? write_value(*v) : Json(nullptr);
  } else if constexpr (is_std_vector<T>::value || is_std_array<T>::value) {
    Json a = Json::array();
    for (const auto& e : v) a.push_back(write_value(e));
    return a;
  } else if constexpr (std::is_enum_v<T>) {
    return Json(static_cast<std::underlying_type_t<T>>(v));
  } else {
    return Json(v);
  }
}

template <class T>
void read_value(const Json& j, T& out, const std::string& key) {
  if constexpr (IsConfig<T>) {
    if (!j.is_object()) bad_config_value(key, "an object", j);
    T c{};
    config_read(j, c, key);
    out = std::move(c);
  } else if constexpr (HasJsonHooks<T>) {
    out = T::ember_from_json(j, key);
  } else if constexpr (is_std_optional<T>::value) {
    if (j.is_null()) {
      out.reset();
    } else {
      typename T::value_type v{};
      read_value(j, v, key);
      out = std::move(v);
    }
  } else if constexpr (is_std_vector<T>::value) {
    if (!j.is_array()) bad_config_value(key, "an array", j);
    T v;
    for (std::size_t i = 0; i < j.size(); ++i) {
      typename T::value_type e{};
      read_value(j[i], e, key + "[" + std::to_string(i) + "]");
      v.push_back(std::move(e));
    }
    out = std::move(v);
  } else if constexpr (is_std_array<T>::value) {
    if (!j.is_array() || j.size() != std::tuple_size_v<T>)
      bad_config_value(key, ("an array of " + std::to_string(std::tuple_size_v<T>)).c_str(), j);
    for (std::size_t i = 0; i < j.size(); ++i)
      read_value(j[i], out[i], key + "[" + std::to_string(i) + "]");
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) bad_config_value(key, "a boolean", j);
    out = j.get<bool>();
  } else if constexpr (std::is_enum_v<T>) {
    std::underlying_type_t<T> u{};
    read_value(j, u, key);
    out = static_cast<T>(u);
  } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
    if (!j.is_number_unsigned() || j.get<std::uint64_t>() > std::numeric_limits<T>::max())
      bad_config_value(key, "a non-negative integer in range", j);
    out = static_cast<T>(j.get<std::uint64_t>());
  } else if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) bad_config_value(key, "an integer", j);
    const std::int64_t v = j.get<std::int64_t>();
    if (v < std::int64_t(std::numeric_limits<T>::min()) ||
        (v > 0 && std::uint64_t(v) > std::uint64_t(std::numeric_limits<T>::max())))
      bad_config_value(key, "an integer in range", j);
    out = static_cast<T>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!j.is_number()) bad_config_value(key, "a number", j);
    out = j.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) bad_config_value(key, "a string", j);
    out = j.get<std::string>();
  } else {
#if EMBER_HAS_EXCEPTIONS
    try {
      out = j.get<T>();
    } catch (const nlohmann::json::exception& e) {
      bad_config_value(key, e.what(), j);
    }
#else
    out = j.get<T>();     // Note [JSON without exceptions]
#endif
  }
}

}  // namespace detail

// Generic forms of the EMBER_CONFIG members.
template <class C>
requires detail::IsConfig<C> Json to_json(const C& c) { return detail::config_to_json(c); }
template <class C>
requires detail::IsConfig<C> C from_json(const Json& j) { return detail::config_from_json<C>(j); }

}  // namespace ember::nn

// EMBER_CONFIG(Type, fields...): to_json(), Type::from_json(j), save(path),
// Type::load(path) and with_<field>(v) for each field. Adds only member functions, so
// Type stays an aggregate.
#define EMBER_CONFIG(Type, ...)                                                            \
  EMBER_PP_FOR_EACH(EMBER_CONFIG_SETTER_, __VA_ARGS__)                                     \
  template <class F>                                                                       \
  void ember_config_fields(F&& ember_f) const {                                            \
    EMBER_PP_FOR_EACH(EMBER_CONFIG_FIELD_, __VA_ARGS__)                                    \
  }                                                                                        \
  template <class F>                                                                       \
  void ember_config_fields(F&& ember_f) {                                                  \
    EMBER_PP_FOR_EACH(EMBER_CONFIG_FIELD_, __VA_ARGS__)                                    \
  }                                                                                        \
  static constexpr const char* ember_config_name() { return #Type; }                       \
  ::ember::nn::Json to_json() const { return ::ember::nn::detail::config_to_json(*this); } \
  static Type from_json(const ::ember::nn::Json& j) {                                      \
    return ::ember::nn::detail::config_from_json<Type>(j);                                 \
  }                                                                                        \
  void save(const std::string& path) const {                                               \
    ::ember::nn::detail::save_json(to_json(), path, #Type);                                \
  }                                                                                        \
  static Type load(const std::string& path) {                                              \
    return from_json(::ember::nn::detail::load_json(path, #Type));                         \
  }

#define EMBER_CONFIG_FIELD_(field) ember_f(#field, field);
#define EMBER_CONFIG_SETTER_(field)                          \
  [[nodiscard]] auto with_##field(decltype(field) v) const { \
    auto c = *this;                                          \
    c.field = std::move(v);                                  \
    return c;                                                \
  }
