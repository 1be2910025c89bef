#include "ember/base/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace ember {
namespace {
FailHandler g_fail_handler = nullptr;
}

void set_fail_handler(FailHandler handler) { g_fail_handler = handler; }

void fail(const std::string& message) {
  if (g_fail_handler != nullptr) {
    g_fail_handler(message.c_str());
    std::abort();  // a fail handler must not return
  }
#if defined(__cpp_exceptions)
  throw Error(message);
#else
  std::fputs(message.c_str(), stderr);
  std::abort();
#endif
}

namespace detail {
void assert_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "ember: internal invariant violated: %s (%s:%d)\n", expr, file, line);
  std::abort();
}
}  // namespace detail

}  // namespace ember
