// The nn tests' check of bad input: a call must raise an ember::Error whose message says
// what was wrong.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

#include <ember/ember.hpp>

// f's ember::Error message, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ember::Error& e) {
    return e.what();
  }
  return "(no error)";
}
// Runs f and expects an ember::Error whose message holds every string of `wants`.
inline void expect_error_has(const std::function<void()>& f,
                             std::initializer_list<const char*> wants) {
  const std::string msg = error_of(f);
  for (const char* want : wants)
    EXPECT_NE(msg.find(want), std::string::npos) << "'" << want << "' not in: " << msg;
}
inline void expect_error(const std::function<void()>& f, const char* what) {
  expect_error_has(f, {what});
}
