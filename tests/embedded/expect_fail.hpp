// The fail handler of firmware tests that give ember a bad input: on_fail (installed with
// set_fail_handler) keeps the message and jumps back into expect_fail, which checks that the
// handler was called once with a message naming what was wrong. longjmp skips the
// destructors of what the failing call held, so such cases run where a leak does not matter.
#pragma once

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "check.hpp"

namespace ember::firmware {

inline std::jmp_buf g_back;
inline char g_message[768];
inline int g_calls = 0;

inline void on_fail(const char* message) {
  ++g_calls;
  std::snprintf(g_message, sizeof g_message, "%s", message);
  std::longjmp(g_back, 1);
}

// Runs body; passes when it reached the fail handler once with a message containing every
// one of `parts`.
template <class Body>
void expect_fail(const char* name, Body body, std::vector<const char*> parts) {
  const int before = g_calls;
  g_message[0] = '\0';
  if (setjmp(g_back) == 0) {
    body();
    return report(name, false, "returned without calling the fail handler");
  }
  std::printf("# %s: %s\n", name, g_message);
  if (g_calls != before + 1) return report(name, false, "the handler was not called once");
  for (const char* p : parts) {
    if (std::strstr(g_message, p) == nullptr) {
      char why[96];
      std::snprintf(why, sizeof why, "the message lacks \"%s\"", p);
      return report(name, false, why);
    }
  }
  report(name, true);
}

}  // namespace ember::firmware
