// Pictures of a training run: line charts of metric curves (train against valid, per
// epoch or per step) and the confusion matrix of a classifier, as PNG (drawn by Cairo) or
// SVG (text elements, so titles and series names stay searchable). The Learner writes
// them at the end of every epoch; a custom loop calls them directly.
//
// A chart draws each series as a polyline over the points whose x and y are finite
// (missing points, NaN or infinite, break the line; an isolated point is a dot), with
// axes at nice tick values (1, 2 or 5 times a power of ten), the labels, a light grid and
// a legend. Bad input (no series, no finite point at all, x and y of different lengths,
// a size out of [64, 16384], a path that cannot be written) is an ember::Error naming the
// function and what was wrong; a file is written whole or not at all (a temporary file
// renamed into place).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::train::plot {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool log_y = false;  // a base-10 logarithmic y axis; points with y <= 0 count as missing
};

void write_png(const Chart& chart, const std::string& path, int width = 900, int height = 560);
void write_svg(const Chart& chart, const std::string& path, int width = 900, int height = 560);

// counts[true class][predicted class] as a grid of cells shaded by count, each with its
// number; rows are the true classes (top to bottom), columns the predictions. class_names
// labels the rows and columns (empty: the class indices). The format follows the path's
// extension, .png or .svg. A matrix that is not square, has no class or a negative count,
// or names of another count are an ember::Error.
void write_confusion_matrix(const std::vector<std::vector<std::int64_t>>& counts,
                            const std::vector<std::string>& class_names, const std::string& path);

}  // namespace ember::train::plot
