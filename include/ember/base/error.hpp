// ember's two kinds of failure. `Error` is for users: bad input to a public function, with
// a message naming the op, the shapes and what was expected. `EMBER_ASSERT` is for
// internal invariants and stays on in release builds. Builds without exceptions route both
// to a fail handler (set_fail_handler) that must not return.
#pragma once

#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using FailHandler = void (*)(const char* message);
// Installs the handler called instead of throwing (used when built with -fno-exceptions).
void set_fail_handler(FailHandler handler);

// Throws ember::Error(message) (or calls the fail handler). Never returns.
[[noreturn]] void fail(const std::string& message);

namespace detail {
[[noreturn]] void assert_failed(const char* expr, const char* file, int line);
}

}  // namespace ember

#define EMBER_ASSERT(cond) \
  ((cond) ? static_cast<void>(0) : ::ember::detail::assert_failed(#cond, __FILE__, __LINE__))

// Checks user input: on failure throws ember::Error with `msg` (a std::string expression,
// evaluated only on failure).
#define EMBER_CHECK(cond, msg) ((cond) ? static_cast<void>(0) : ::ember::fail(msg))
