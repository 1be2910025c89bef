#include "train/canvas.hpp"

#include <cairo.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numbers>

#include <ember/base/error.hpp>

namespace ember::train::plot::detail {
namespace {

constexpr const char* kFontFamily = "DejaVu Sans";

// Text as drawable UTF-8: an invalid byte becomes '?' and a control character a space (Cairo
// refuses invalid UTF-8, and XML refuses control characters).
std::string drawable(const std::string& s) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t len = c < 0x80           ? 1
                            : (c >> 5) == 0x6  ? 2
                            : (c >> 4) == 0xE  ? 3
                            : (c >> 3) == 0x1E ? 4
                                               : 0;
    bool valid = len > 0 && i + len <= s.size();
    for (std::size_t k = 1; valid && k < len; ++k) {
      valid = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    }
    if (!valid) {
      out += '?';
      ++i;
    } else if (len == 1 && (c < 0x20 || c == 0x7F)) {
      out += ' ';
      ++i;
    } else {
      out.append(s, i, len);
      i += len;
    }
  }
  return out;
}

void select_font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, kFontFamily, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double measure(cairo_t* cr, const std::string& s, double size, bool bold) {
  select_font(cr, size, bold);
  cairo_text_extents_t e;
  cairo_text_extents(cr, drawable(s).c_str(), &e);
  return e.x_advance;
}

cairo_status_t append_to_string(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

// ---- PNG: Cairo's image surface ----

class PngCanvas final : public Canvas {
 public:
  PngCanvas(int width, int height)
      : surface_(cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height)),
        cr_(cairo_create(surface_)) {}
  ~PngCanvas() override {
    cairo_destroy(cr_);
    cairo_surface_destroy(surface_);
  }
  PngCanvas(const PngCanvas&) = delete;
  PngCanvas& operator=(const PngCanvas&) = delete;

  void fill_rect(double x, double y, double w, double h, Rgb fill) override {
    colour(fill);
    cairo_rectangle(cr_, x, y, w, h);
    cairo_fill(cr_);
  }
  void stroke_rect(double x, double y, double w, double h, Rgb stroke, double width) override {
    colour(stroke);
    cairo_set_line_width(cr_, width);
    cairo_rectangle(cr_, x, y, w, h);
    cairo_stroke(cr_);
  }
  void line(double x0, double y0, double x1, double y1, Rgb stroke, double width) override {
    colour(stroke);
    cairo_set_line_width(cr_, width);
    cairo_move_to(cr_, x0, y0);
    cairo_line_to(cr_, x1, y1);
    cairo_stroke(cr_);
  }
  void polyline(const std::vector<std::pair<double, double>>& points, Rgb stroke,
                double width) override {
    if (points.size() < 2) return;
    colour(stroke);
    cairo_set_line_width(cr_, width);
    cairo_set_line_join(cr_, CAIRO_LINE_JOIN_ROUND);
    cairo_move_to(cr_, points[0].first, points[0].second);
    for (std::size_t i = 1; i < points.size(); ++i) {
      cairo_line_to(cr_, points[i].first, points[i].second);
    }
    cairo_stroke(cr_);
  }
  void dot(double cx, double cy, double radius, Rgb fill) override {
    colour(fill);
    cairo_arc(cr_, cx, cy, radius, 0, 2 * std::numbers::pi);
    cairo_fill(cr_);
  }
  void text(double x, double y, const std::string& s, const TextStyle& style) override {
    const std::string t = drawable(s);
    const double w = measure(cr_, t, style.size, style.bold);
    const double shift = style.anchor == Anchor::Start    ? 0
                         : style.anchor == Anchor::Middle ? w / 2
                                                          : w;
    colour(style.colour);
    cairo_save(cr_);
    cairo_translate(cr_, x, y);
    if (style.vertical) cairo_rotate(cr_, -std::numbers::pi / 2);
    cairo_move_to(cr_, -shift, 0);
    cairo_show_text(cr_, t.c_str());
    cairo_restore(cr_);
  }
  double text_width(const std::string& s, double size, bool bold) override {
    return measure(cr_, s, size, bold);
  }
  std::string finish(const char* function) override {
    cairo_surface_flush(surface_);
    EMBER_CHECK(
        cairo_status(cr_) == CAIRO_STATUS_SUCCESS,
        std::string(function) + ": drawing failed: " + cairo_status_to_string(cairo_status(cr_)));
    std::string bytes;
    const cairo_status_t st = cairo_surface_write_to_png_stream(surface_, append_to_string, &bytes);
    EMBER_CHECK(st == CAIRO_STATUS_SUCCESS,
                std::string(function) + ": PNG encoding failed: " + cairo_status_to_string(st));
    return bytes;
  }

 private:
  void colour(Rgb c) { cairo_set_source_rgb(cr_, c.r, c.g, c.b); }
  cairo_surface_t* surface_;
  cairo_t* cr_;
};

// ---- SVG: elements written as text ----

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string hex(Rgb c) {
  auto byte = [](double v) {
    return static_cast<int>(std::lround(std::fmin(1.0, std::fmax(0.0, v)) * 255.0));
  };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", byte(c.r), byte(c.g), byte(c.b));
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : drawable(s)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

class SvgCanvas final : public Canvas {
 public:
  SvgCanvas(int width, int height)
      : measure_surface_(cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1)),
        measure_cr_(cairo_create(measure_surface_)) {
    const std::string w = std::to_string(width), h = std::to_string(height);
    out_ =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
        w + "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " + h + "\" font-family=\"" +
        kFontFamily + ", sans-serif\">\n";
  }
  ~SvgCanvas() override {
    cairo_destroy(measure_cr_);
    cairo_surface_destroy(measure_surface_);
  }
  SvgCanvas(const SvgCanvas&) = delete;
  SvgCanvas& operator=(const SvgCanvas&) = delete;

  void fill_rect(double x, double y, double w, double h, Rgb fill) override {
    out_ += "<rect x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" + number(w) +
            "\" height=\"" + number(h) + "\" fill=\"" + hex(fill) + "\"/>\n";
  }
  void stroke_rect(double x, double y, double w, double h, Rgb stroke, double width) override {
    out_ += "<rect x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" + number(w) +
            "\" height=\"" + number(h) + "\" fill=\"none\" stroke=\"" + hex(stroke) +
            "\" stroke-width=\"" + number(width) + "\"/>\n";
  }
  void line(double x0, double y0, double x1, double y1, Rgb stroke, double width) override {
    out_ += "<line x1=\"" + number(x0) + "\" y1=\"" + number(y0) + "\" x2=\"" + number(x1) +
            "\" y2=\"" + number(y1) + "\" stroke=\"" + hex(stroke) + "\" stroke-width=\"" +
            number(width) + "\"/>\n";
  }
  void polyline(const std::vector<std::pair<double, double>>& points, Rgb stroke,
                double width) override {
    if (points.size() < 2) return;
    out_ += "<polyline fill=\"none\" stroke-linejoin=\"round\" stroke=\"" + hex(stroke) +
            "\" stroke-width=\"" + number(width) + "\" points=\"";
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (i > 0) out_ += ' ';
      out_ += number(points[i].first) + "," + number(points[i].second);
    }
    out_ += "\"/>\n";
  }
  void dot(double cx, double cy, double radius, Rgb fill) override {
    out_ += "<circle cx=\"" + number(cx) + "\" cy=\"" + number(cy) + "\" r=\"" + number(radius) +
            "\" fill=\"" + hex(fill) + "\"/>\n";
  }
  void text(double x, double y, const std::string& s, const TextStyle& style) override {
    const char* anchor = style.anchor == Anchor::Start    ? "start"
                         : style.anchor == Anchor::Middle ? "middle"
                                                          : "end";
    out_ += "<text x=\"" + number(x) + "\" y=\"" + number(y) + "\" font-size=\"" +
            number(style.size) + "\" fill=\"" + hex(style.colour) + "\" text-anchor=\"" + anchor +
            "\"";
    if (style.bold) out_ += " font-weight=\"bold\"";
    if (style.vertical) out_ += " transform=\"rotate(-90 " + number(x) + " " + number(y) + ")\"";
    out_ += '>';  // appended piecewise: GCC 12 misreports ">" + string as -Wrestrict
    out_ += xml_escape(s);
    out_ += "</text>\n";
  }
  double text_width(const std::string& s, double size, bool bold) override {
    return measure(measure_cr_, s, size, bold);
  }
  std::string finish(const char*) override { return out_ + "</svg>\n"; }

 private:
  cairo_surface_t* measure_surface_;
  cairo_t* measure_cr_;
  std::string out_;
};

}  // namespace

std::unique_ptr<Canvas> make_png_canvas(int width, int height) {
  return std::make_unique<PngCanvas>(width, height);
}
std::unique_ptr<Canvas> make_svg_canvas(int width, int height) {
  return std::make_unique<SvgCanvas>(width, height);
}

void write_file_atomically(const std::string& path, const std::string& bytes,
                           const char* function) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    EMBER_CHECK(f.good(), std::string(function) + ": cannot write '" + path + "' (" +
                              std::strerror(errno) + ")");
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) {
      const int e = errno;
      std::remove(tmp.c_str());
      fail(std::string(function) + ": writing '" + path + "' failed (" + std::strerror(e) + ")");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    fail(std::string(function) + ": cannot write '" + path + "' (" + std::strerror(e) + ")");
  }
}

}  // namespace ember::train::plot::detail
