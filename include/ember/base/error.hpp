// ember's two kinds of failure. `Error` is for users: bad input to a public function, with
// a message naming the op, the shapes and what was expected. `EMBER_ASSERT` is for
// internal invariants and stays on in release builds. Builds without exceptions route both
// to a fail handler (set_fail_handler) that must not return.
#pragma once

#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ember/base/config.hpp"

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

// Whether catch_std passes ember::Error through (the default) or hands it to the handler.
enum class OnError { Pass, Handle };

// The one boundary between the standard library's exceptions and ember's failures. Runs
// body(). In a build with exceptions, a std::exception leaving it (an ember::Error only with
// OnError::Handle) calls on_exception(what, out_of_memory), out_of_memory saying it was a
// std::bad_alloc; where body returns a value the handler must fail (not return). In a build
// without exceptions nothing is thrown: ember's checks and allocation failures reach the
// fail handler themselves, and body() simply runs.
template <OnError errors = OnError::Pass, class Body, class Handler>
decltype(auto) catch_std(Body&& body, Handler&& on_exception) {
#if EMBER_HAS_EXCEPTIONS
  try {
    return body();
  } catch (const Error& e) {
    if constexpr (errors == OnError::Pass) {
      throw;
    } else {
      on_exception(e.what(), false);
    }
  } catch (const std::bad_alloc& e) {
    on_exception(e.what(), true);
  } catch (const std::exception& e) {
    on_exception(e.what(), false);
  }
  if constexpr (!std::is_void_v<decltype(body())>) std::abort();
#else
  static_cast<void>(on_exception);
  return body();
#endif
}
}  // namespace detail

}  // namespace ember

#define EMBER_ASSERT(cond) \
  ((cond) ? static_cast<void>(0) : ::ember::detail::assert_failed(#cond, __FILE__, __LINE__))

// Checks user input: on failure throws ember::Error with `msg` (a std::string expression,
// evaluated only on failure).
#define EMBER_CHECK(cond, msg) ((cond) ? static_cast<void>(0) : ::ember::fail(msg))
