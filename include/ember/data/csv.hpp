// CSV files as datasets: one item per row, read whole at construction. The format is RFC
// 4180's: fields separated by a delimiter, optionally in double quotes (which may hold
// delimiters, newlines and "" for a quote), rows ended by LF or CRLF; blank lines are
// skipped. Every row must have as many fields as the first (the header, when there is one).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/data/dataset.hpp"

namespace ember::data {

struct CsvOptions {
  char delimiter = ',';
  bool header = true;  // the first row names the columns
};

// What the rows of one file share: its path and column names.
struct CsvTable {
  std::string path;
  std::vector<std::string> columns;  // empty without a header
};

struct CsvRow {
  std::shared_ptr<const CsvTable> table;
  std::size_t row = 0;  // data row number, from 0 (the header excluded)
  std::vector<std::string> fields;

  const std::string& operator[](std::size_t column) const;
  // The field of a named column; throws ember::Error naming the column and the file.
  const std::string& at(const std::string& column) const;
  // The field as a number (whole field, no spaces); throws ember::Error naming the field,
  // the row and the file when it is not one.
  double number(std::size_t column) const;
  double number(const std::string& column) const;
};

class CsvDataset : public Dataset<CsvRow> {
 public:
  // Throws ember::Error naming the file and the line for an unreadable file, a quote that
  // is never closed, text after a closing quote, or a row with a different field count.
  explicit CsvDataset(const std::string& path, CsvOptions options = {});

  std::optional<CsvRow> get(std::size_t index) const override;
  std::size_t len() const override { return rows_.size(); }
  const std::vector<std::string>& columns() const { return table_->columns; }
  // Index of a named column; throws ember::Error when there is none.
  std::size_t column(const std::string& name) const;

 private:
  std::shared_ptr<const CsvTable> table_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace ember::data
