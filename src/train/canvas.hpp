// A drawing surface for the train layer's pictures: the few primitives a chart needs, drawn
// by Cairo into a PNG or written as SVG elements. The layout code (plot.cpp) is written
// once against this interface; both surfaces measure text with Cairo and the same font, so
// a chart lays out the same in either format.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ember::train::plot::detail {

struct Rgb {
  double r = 0, g = 0, b = 0;
};

enum class Anchor { Start, Middle, End };  // where a text's x lies: its left, centre, right

struct TextStyle {
  double size = 12;  // pixels
  Rgb colour{};
  Anchor anchor = Anchor::Start;
  bool bold = false;
  bool vertical = false;  // rotated a quarter turn anticlockwise, reading upwards
};

class Canvas {
 public:
  virtual ~Canvas() = default;
  virtual void fill_rect(double x, double y, double w, double h, Rgb fill) = 0;
  virtual void stroke_rect(double x, double y, double w, double h, Rgb stroke, double width) = 0;
  virtual void line(double x0, double y0, double x1, double y1, Rgb stroke, double width) = 0;
  virtual void polyline(const std::vector<std::pair<double, double>>& points, Rgb stroke,
                        double width) = 0;
  virtual void dot(double cx, double cy, double radius, Rgb fill) = 0;
  // Text with its baseline at y (its centre line for vertical text at x).
  virtual void text(double x, double y, const std::string& s, const TextStyle& style) = 0;
  // The advance width of s in pixels.
  virtual double text_width(const std::string& s, double size, bool bold) = 0;
  // The file's bytes; throws ember::Error naming `function` when drawing failed.
  virtual std::string finish(const char* function) = 0;
};

std::unique_ptr<Canvas> make_png_canvas(int width, int height);
std::unique_ptr<Canvas> make_svg_canvas(int width, int height);

// Writes bytes to path through a temporary file in the same folder renamed into place, so
// a reader never sees half a picture. ember::Error naming `function` and the path on
// failure.
void write_file_atomically(const std::string& path, const std::string& bytes, const char* function);

}  // namespace ember::train::plot::detail
