// The pictures: PNG charts decode (stb) to the requested size with the curve's pixels where
// the data puts them and none in a gap of missing points; SVG charts and confusion
// matrices parse as XML (expat) and carry their text; bad input is an ember::Error.
#include <gtest/gtest.h>

#include <expat.h>
#include <stb_image.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <ember/train/plot.hpp>

#include "data/expect_error.hpp"

namespace ember::train::plot {
namespace {

namespace fs = std::filesystem;
using data::testing::expect_error;

class Plot : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ember_plot_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

struct Image {
  int w = 0, h = 0;
  std::vector<unsigned char> rgba;
  const unsigned char* at(int x, int y) const {
    return &rgba[4 * (static_cast<std::size_t>(y) * w + x)];
  }
};

Image decode_png(const std::string& file) {
  Image im;
  int channels = 0;
  unsigned char* p = stbi_load(file.c_str(), &im.w, &im.h, &channels, 4);
  EXPECT_NE(p, nullptr) << file << ": " << stbi_failure_reason();
  if (p == nullptr) return im;
  im.rgba.assign(p, p + 4 * static_cast<std::size_t>(im.w) * im.h);
  stbi_image_free(p);
  return im;
}

bool near_colour(const unsigned char* px, int r, int g, int b, int tolerance = 30) {
  return std::abs(px[0] - r) <= tolerance && std::abs(px[1] - g) <= tolerance &&
         std::abs(px[2] - b) <= tolerance;
}

// An SVG's root attributes, the texts of its <text> elements and its element counts.
struct Svg {
  std::map<std::string, std::string> root;
  std::vector<std::string> texts;
  std::map<std::string, int> elements;
  std::vector<std::string> rect_fills;
  bool parsed = false;
  std::string error;
};

Svg parse_svg(const std::string& file) {
  std::ifstream f(file, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string xml = ss.str();
  struct State {
    Svg svg;
    bool in_text = false;
    std::string current;
  } st;
  XML_Parser p = XML_ParserCreate("UTF-8");
  XML_SetUserData(p, &st);
  XML_SetElementHandler(
      p,
      [](void* u, const XML_Char* name, const XML_Char** attrs) {
        auto& s = *static_cast<State*>(u);
        const std::string n = name;
        ++s.svg.elements[n];
        for (int i = 0; attrs[i] != nullptr; i += 2) {
          if (n == "svg") s.svg.root[attrs[i]] = attrs[i + 1];
          if (n == "rect" && std::string(attrs[i]) == "fill")
            s.svg.rect_fills.push_back(attrs[i + 1]);
        }
        if (n == "text") {
          s.in_text = true;
          s.current.clear();
        }
      },
      [](void* u, const XML_Char* name) {
        auto& s = *static_cast<State*>(u);
        if (std::string(name) == "text") {
          s.svg.texts.push_back(s.current);
          s.in_text = false;
        }
      });
  XML_SetCharacterDataHandler(p, [](void* u, const XML_Char* data, int len) {
    auto& s = *static_cast<State*>(u);
    if (s.in_text) s.current.append(data, static_cast<std::size_t>(len));
  });
  st.svg.parsed = XML_Parse(p, xml.data(), static_cast<int>(xml.size()), 1) == XML_STATUS_OK;
  if (!st.svg.parsed) st.svg.error = XML_ErrorString(XML_GetErrorCode(p));
  XML_ParserFree(p);
  return st.svg;
}

bool has_text(const Svg& s, const std::string& t) {
  return std::find(s.texts.begin(), s.texts.end(), t) != s.texts.end();
}

// y = x on [0, 10] in steps of 0.05, missing (NaN) strictly between 4 and 6.
Chart rising_with_gap() {
  Series s{"train loss", {}, {}};
  for (int i = 0; i <= 200; ++i) {
    const double x = 0.05 * i;
    s.x.push_back(x);
    s.y.push_back(x > 4.0 + 1e-9 && x < 6.0 - 1e-9 ? NAN : x);
  }
  return {"Loss", "epoch", "loss", {s}};
}

TEST_F(Plot, PngCurveLiesWhereTheDataIsAndSkipsMissingPoints) {
  write_png(rising_with_gap(), path("c.png"));
  const Image im = decode_png(path("c.png"));
  ASSERT_EQ(im.w, 900);
  ASSERT_EQ(im.h, 560);
  EXPECT_TRUE(near_colour(im.at(2, 2), 255, 255, 255, 0));  // a white background
  // Columns holding the first series colour, and the mean row of those pixels per column.
  std::vector<int> columns;
  std::map<int, double> mean_row;
  for (int x = 0; x < im.w; ++x) {
    double sum = 0;
    int count = 0;
    for (int y = 0; y < im.h; ++y) {
      if (near_colour(im.at(x, y), 31, 120, 181)) {
        sum += y;
        ++count;
      }
    }
    if (count > 0) {
      columns.push_back(x);
      mean_row[x] = sum / count;
    }
  }
  // Runs of adjacent columns: the curve before the gap, after it, and the legend's sample.
  std::vector<std::pair<int, int>> runs;
  for (int x : columns) {
    if (runs.empty() || x > runs.back().second + 3) runs.push_back({x, x});
    runs.back().second = x;
  }
  ASSERT_EQ(runs.size(), 3u);
  const double span = runs[1].second - runs[0].first;
  const double before = runs[0].second - runs[0].first, gap = runs[1].first - runs[0].second,
               after = runs[1].second - runs[1].first;
  EXPECT_NEAR(before / span, 0.4, 0.02);
  EXPECT_NEAR(gap / span, 0.2, 0.02);
  EXPECT_NEAR(after / span, 0.4, 0.02);
  // Rising data: the curve climbs (rows decrease) from left to right, linearly.
  const double slope = (mean_row[runs[1].second - 2] - mean_row[runs[0].first + 2]) /
                       (runs[1].second - 2 - (runs[0].first + 2));
  EXPECT_LT(slope, 0);
  const int mid = (runs[0].first + runs[0].second) / 2;
  const double predicted = mean_row[runs[0].first + 2] + slope * (mid - runs[0].first - 2);
  EXPECT_NEAR(mean_row[mid], predicted, 2.0);
  // The legend sample is right of the plot, near the top.
  EXPECT_GT(runs[2].first, runs[1].second + 10);
  EXPECT_LT(mean_row[runs[2].first + 5], im.h / 4.0);
}

TEST_F(Plot, PngHonoursTheSizeAndColoursEachSeries) {
  Chart c{"accuracy",
          "step",
          "",
          {{"train", {1, 2, 3}, {0.5, 0.7, 0.8}}, {"valid", {1, 2, 3}, {0.4, 0.6, 0.65}}}};
  write_png(c, path("s.png"), 320, 200);
  const Image im = decode_png(path("s.png"));
  ASSERT_EQ(im.w, 320);
  ASSERT_EQ(im.h, 200);
  int first = 0, second = 0;
  for (int y = 0; y < im.h; ++y) {
    for (int x = 0; x < im.w; ++x) {
      first += near_colour(im.at(x, y), 31, 120, 181) ? 1 : 0;
      second += near_colour(im.at(x, y), 255, 128, 13) ? 1 : 0;
    }
  }
  EXPECT_GT(first, 100);
  EXPECT_GT(second, 100);
}

TEST_F(Plot, SvgParsesAndCarriesItsText) {
  Chart c = rising_with_gap();
  c.series.push_back({"valid <a & b>", {0, 5, 10}, {1, 2, 3}});
  write_svg(c, path("c.svg"), 640, 400);
  const Svg s = parse_svg(path("c.svg"));
  ASSERT_TRUE(s.parsed) << s.error;
  EXPECT_EQ(s.root.at("width"), "640");
  EXPECT_EQ(s.root.at("height"), "400");
  EXPECT_TRUE(has_text(s, "train loss"));
  EXPECT_TRUE(has_text(s, "valid <a & b>"));
  EXPECT_TRUE(has_text(s, "Loss"));
  EXPECT_TRUE(has_text(s, "epoch"));
  EXPECT_TRUE(has_text(s, "loss"));
  EXPECT_TRUE(has_text(s, "10"));           // a tick of the x axis
  EXPECT_EQ(s.elements.at("polyline"), 3);  // the gap splits the first series in two
}

TEST_F(Plot, LogScaleTicksAtPowersOfTenAndSkipsNonPositiveValues) {
  Series s{"lr", {}, {}};
  for (int i = 0; i <= 40; ++i) {
    s.x.push_back(i);
    s.y.push_back(i == 7 ? 0.0 : std::pow(10.0, -4 + i / 10.0));
  }
  Chart c{"learning rate", "step", "lr", {s}, true};
  write_svg(c, path("log.svg"));
  const Svg svg = parse_svg(path("log.svg"));
  ASSERT_TRUE(svg.parsed) << svg.error;
  for (const char* t : {"0.0001", "0.001", "0.01", "0.1", "1"}) EXPECT_TRUE(has_text(svg, t)) << t;
  EXPECT_EQ(svg.elements.at("polyline"), 2);  // y = 0 at step 7 is missing on a log axis
  write_png(c, path("log.png"));
  EXPECT_EQ(decode_png(path("log.png")).w, 900);
  Chart nothing{"t", "", "", {{"zero", {1, 2}, {0, -1}}}, true};
  expect_error([&] { write_png(nothing, path("n.png")); }, "no point with finite x and y");
}

TEST_F(Plot, ConfusionMatrixPictures) {
  const std::vector<std::vector<std::int64_t>> counts{{50, 2, 0}, {3, 41, 6}, {0, 9, 37}};
  write_confusion_matrix(counts, {"cat", "dog", "bird"}, path("cm.svg"));
  const Svg s = parse_svg(path("cm.svg"));
  ASSERT_TRUE(s.parsed) << s.error;
  for (const char* t :
       {"50", "2", "0", "3", "41", "6", "9", "37", "cat", "dog", "bird", "True", "Predicted"}) {
    EXPECT_TRUE(has_text(s, t)) << t;
  }
  // The largest count has the darkest cell, and only it; empty cells stay white.
  EXPECT_EQ(std::count(s.rect_fills.begin(), s.rect_fills.end(), "#08306b"), 1);
  EXPECT_EQ(std::count(s.rect_fills.begin(), s.rect_fills.end(), "#ffffff"),
            1 + 2);  // + background
  write_confusion_matrix(counts, {}, path("cm.png"));
  const Image im = decode_png(path("cm.png"));
  ASSERT_GT(im.w, 3 * 64);
  int dark = 0;
  for (int y = 0; y < im.h; ++y) {
    for (int x = 0; x < im.w; ++x) dark += near_colour(im.at(x, y), 8, 48, 107, 4) ? 1 : 0;
  }
  EXPECT_GT(dark, 40 * 40);  // most of the 64-pixel cell of the 50
  EXPECT_LT(dark, 64 * 64);
}

TEST_F(Plot, AxesSurviveExtremeRanges) {
  // A constant series, a span tiny against its offset, values spanning many decades.
  for (const Series& s :
       {Series{"flat", {1, 2, 3}, {5, 5, 5}}, Series{"offset", {1e17, 1e17 + 32}, {1, 2}},
        Series{"wide", {-1e200, 1e200}, {1e-200, 1e200}}, Series{"zero", {0}, {0}}}) {
    write_svg(Chart{"t", "", "", {s}}, path("e.svg"));
    const Svg svg = parse_svg(path("e.svg"));
    ASSERT_TRUE(svg.parsed) << s.name;
    EXPECT_TRUE(has_text(svg, s.name));
    EXPECT_LE(svg.elements.at("line"), 2 * 2 * 22 + 2) << s.name;  // grid and tick per tick, legend
  }
  Chart huge{"h", "", "", {{"a", {1, 2}, {1, 1e308}}}};
  expect_error([&] { write_png(huge, path("h.png")); }, "values beyond +-1e300");
}

TEST_F(Plot, BadInput) {
  Chart c{"t", "x", "y", {{"a", {1, 2, 3}, {1, 2}}}};
  expect_error([&] { write_png(c, path("a.png")); },
               "plot::write_png: series 'a' of chart 't' has 3 x values but 2 y values");
  expect_error(
      [&] {
        write_svg(Chart{"empty", "", "", {}}, path("a.svg"));
      },
      "plot::write_svg: chart 'empty' has no series");
  Chart all_nan{"t", "", "", {{"a", {1, NAN}, {NAN, 2}}}};
  expect_error([&] { write_svg(all_nan, path("a.svg")); }, "no point with finite x and y");
  Chart ok{"t", "", "", {{"a", {1, 2}, {1, 2}}}};
  expect_error([&] { write_png(ok, path("a.png"), 10, 560); },
               "plot::write_png: size 10 x 560 is out of range");
  expect_error([&] { write_png(ok, path("no/such/dir/a.png")); }, "plot::write_png: cannot write");
  expect_error([&] { write_svg(ok, path("no/such/dir/a.svg")); }, "plot::write_svg: cannot write");
  EXPECT_TRUE(fs::is_empty(dir_));  // nothing half-written
  expect_error([&] { write_confusion_matrix({}, {}, path("m.png")); }, "the matrix has no class");
  expect_error(
      [&] {
        write_confusion_matrix({{1, 2}, {3}}, {}, path("m.png"));
      },
      "row 1 has 1 counts");
  expect_error(
      [&] {
        write_confusion_matrix({{1, -2}, {3, 4}}, {}, path("m.png"));
      },
      "count [0][1] is -2");
  expect_error(
      [&] {
        write_confusion_matrix({{1, 2}, {3, 4}}, {"a"}, path("m.png"));
      },
      "1 class names for 2 classes");
  expect_error([&] { write_confusion_matrix({{1}}, {}, path("m.jpg")); },
               "ends in neither .png nor .svg");
  // A single point draws as a dot.
  write_png(ok, path("ok.png"));
  write_svg(Chart{"one", "", "", {{"p", {3}, {4}}}}, path("one.svg"));
  EXPECT_EQ(parse_svg(path("one.svg")).elements.at("circle"), 1);
}

}  // namespace
}  // namespace ember::train::plot
