// CSV rows: quoting, line endings, blank lines, typed access, and errors naming the file
// and the line. Expected fields are written out by hand from the file text.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <ember/data/csv.hpp>

#include "data/expect_error.hpp"

using namespace ember;
using ember::data::testing::expect_error;
using namespace ember::data;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  const auto path = (std::filesystem::temp_directory_path() / ("ember_test_csv_" + name)).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST(Csv, HeaderQuotesAndLineEndings) {
  const auto path = write_file("basic.csv",
                               "name,value,note\r\n"
                               "a,1.5,plain\r\n"
                               "\"b, quoted\",-2e3,\"say \"\"hi\"\"\"\n"
                               "\n"
                               "c,7,\"two\nlines\"\n"
                               "d,,\n");
  CsvDataset d(path);
  EXPECT_EQ(d.columns(), (std::vector<std::string>{"name", "value", "note"}));
  ASSERT_EQ(d.len(), 4u);
  EXPECT_EQ(d.get(0)->fields, (std::vector<std::string>{"a", "1.5", "plain"}));
  EXPECT_EQ(d.get(1)->fields, (std::vector<std::string>{"b, quoted", "-2e3", "say \"hi\""}));
  EXPECT_EQ(d.get(2)->fields, (std::vector<std::string>{"c", "7", "two\nlines"}));
  EXPECT_EQ(d.get(3)->fields, (std::vector<std::string>{"d", "", ""}));
  EXPECT_FALSE(d.get(4).has_value());
  const CsvRow r = *d.get(1);
  EXPECT_EQ(r.at("name"), "b, quoted");
  EXPECT_EQ(r.number("value"), -2000.0);
  EXPECT_EQ(d.get(0)->number(1), 1.5);
  EXPECT_EQ(d.column("note"), 2u);
  expect_error([&] { r.at("missing"); }, "has no column 'missing'");
  expect_error([&] { d.get(0)->number("name"); }, "field 0 = 'a' is not a number (row 0");
  expect_error([&] { d.get(3)->number(1); }, "field 1 = '' is not a number");
  std::remove(path.c_str());
}

TEST(Csv, NoHeaderAndOtherDelimiter) {
  const auto path = write_file("semi.csv", "1;2\n3;\"4;5\"");  // no final newline
  CsvDataset d(path, {';', false});
  EXPECT_TRUE(d.columns().empty());
  ASSERT_EQ(d.len(), 2u);
  EXPECT_EQ(d.get(1)->fields, (std::vector<std::string>{"3", "4;5"}));
  expect_error([&] { d.get(0)->at("x"); }, "read without a header");
  std::remove(path.c_str());
}

TEST(Csv, Errors) {
  expect_error([] { CsvDataset("/nonexistent/ember.csv"); },
               "cannot open '/nonexistent/ember.csv'");
  auto p = write_file("ragged.csv", "a,b\n1,2\n\n3,4,5\n");
  expect_error([&] { CsvDataset{p}; }, "line 4: row 1 has 3 fields but the header has 2");
  p = write_file("open.csv", "a,b\n1,\"never\nclosed\n");
  expect_error([&] { CsvDataset{p}; }, "line 2: a quoted field is never closed");
  p = write_file("after.csv", "a,b\n\"x\"y,2\n");
  expect_error([&] { CsvDataset{p}; }, "line 2: text after a closing quote");
  p = write_file("inner.csv", "a,b\nx\"y,2\n");
  expect_error([&] { CsvDataset{p}; }, "line 2: a quote inside an unquoted field");
  p = write_file("empty.csv", "");
  expect_error([&] { CsvDataset{p}; }, "has no header row");
  EXPECT_EQ(CsvDataset(p, {',', false}).len(), 0u);
  std::remove(p.c_str());
}

TEST(Csv, RandomBytesParseOrFailCleanly) {
  // Random texts over the characters that matter to the parser: each either parses, with
  // every row as wide as the first, or is an ember::Error; never a crash or a hang.
  const char alphabet[] = {'a', ',', '"', '\n', '\r', ' ', '1', ';'};
  data::Rng rng(77);
  int parsed = 0, rejected = 0;
  for (int round = 0; round < 400; ++round) {
    std::string text;
    const auto n = rng.below(60);
    for (std::uint64_t i = 0; i < n; ++i) text += alphabet[rng.below(sizeof alphabet)];
    const auto path = write_file("fuzz.csv", text);
    try {
      CsvDataset d(path, {',', round % 2 == 0});
      for (std::size_t r = 0; r < d.len(); ++r) {
        ASSERT_EQ(d.get(r)->fields.size(), d.get(0)->fields.size());
      }
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
    std::remove(path.c_str());
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}
