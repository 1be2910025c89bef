// Cairo and fontconfig keep process-wide font caches; a test program that draws pictures
// releases them at its end, so that LeakSanitizer sees only what the pictures' code itself
// might leak. Linked into every train test program that draws.
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <gtest/gtest.h>

namespace {
class ReleaseFontCaches : public ::testing::Environment {
 public:
  void TearDown() override {
    cairo_debug_reset_static_data();
    FcFini();
  }
};
const auto* const kReleaseFontCaches =
    ::testing::AddGlobalTestEnvironment(new ReleaseFontCaches);  // gtest owns it
}  // namespace
