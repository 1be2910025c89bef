// The data tests' check for bad input: `f` must throw an ember::Error whose message
// contains `what`.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <ember/base/error.hpp>

namespace ember::data::testing {

inline void expect_error(const std::function<void()>& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << what << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

}  // namespace ember::data::testing
