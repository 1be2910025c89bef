#include "ember/data/csv.hpp"

#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

#include "ember/base/error.hpp"

namespace ember::data {

namespace {

std::size_t column_index(const CsvTable& table, const std::string& name) {
  for (std::size_t i = 0; i < table.columns.size(); ++i) {
    if (table.columns[i] == name) return i;
  }
  fail("CSV '" + table.path + "' has no column '" + name + "'" +
       (table.columns.empty() ? " (it was read without a header)" : ""));
}

// Splits text into rows of fields. `line` counts physical lines for error messages.
struct Parsed {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::size_t> lines;  // the line each row starts on
};

Parsed parse(const std::string& text, char delim, const std::string& path) {
  Parsed out;
  std::vector<std::string> row;
  std::string field;
  std::size_t line = 1, row_line = 1;
  bool quoted = false;        // inside a quoted field
  bool was_quoted = false;    // the current field was quoted and has closed
  bool row_has_data = false;  // distinguishes a blank line from a row of one empty field
  auto where = [&](std::size_t l) { return "'" + path + "' line " + std::to_string(l); };
  auto end_field = [&] {
    row.push_back(std::move(field));
    field.clear();
    was_quoted = false;
  };
  auto end_row = [&] {
    if (row_has_data) {
      end_field();
      out.rows.push_back(std::move(row));
      out.lines.push_back(row_line);
    }
    row.clear();
    field.clear();
    was_quoted = false;
    row_has_data = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
          was_quoted = true;
        }
      } else {
        if (ch == '\n') ++line;
        field += ch;
      }
      continue;
    }
    if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    if (ch == '\n') {
      end_row();
      row_line = ++line;
      continue;
    }
    if (!row_has_data) row_line = line;
    row_has_data = true;
    if (ch == delim) {
      end_field();
    } else if (ch == '"') {
      EMBER_CHECK(field.empty() && !was_quoted,
                  "CsvDataset: " + where(line) + ": a quote inside an unquoted field");
      quoted = true;
    } else {
      EMBER_CHECK(!was_quoted, "CsvDataset: " + where(line) + ": text after a closing quote");
      field += ch;
    }
  }
  EMBER_CHECK(!quoted, "CsvDataset: " + where(row_line) + ": a quoted field is never closed");
  end_row();
  return out;
}

}  // namespace

const std::string& CsvRow::operator[](std::size_t column) const {
  EMBER_CHECK(column < fields.size(), "CsvRow: column " + std::to_string(column) + " of a row of " +
                                          std::to_string(fields.size()) + " fields (row " +
                                          std::to_string(row) + " of '" +
                                          (table ? table->path : std::string()) + "')");
  return fields[column];
}

const std::string& CsvRow::at(const std::string& column) const {
  EMBER_CHECK(table != nullptr, "CsvRow::at: the row has no table");
  return (*this)[column_index(*table, column)];
}

double CsvRow::number(std::size_t column) const {
  const std::string& f = (*this)[column];
  double v = 0;
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  EMBER_CHECK(!f.empty() && ec == std::errc() && end == f.data() + f.size(),
              "CsvRow::number: field " + std::to_string(column) + " = '" + f +
                  "' is not a number (row " + std::to_string(row) + " of '" +
                  (table ? table->path : std::string()) + "')");
  return v;
}

double CsvRow::number(const std::string& column) const {
  EMBER_CHECK(table != nullptr, "CsvRow::number: the row has no table");
  return number(column_index(*table, column));
}

CsvDataset::CsvDataset(const std::string& path, CsvOptions options) {
  EMBER_CHECK(options.delimiter != '"' && options.delimiter != '\n' && options.delimiter != '\r',
              "CsvDataset: '" + path + "': the delimiter cannot be a quote or a line break");
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "CsvDataset: cannot open '" + path + "' (missing or unreadable)");
  std::ostringstream buf;
  buf << in.rdbuf();
  EMBER_CHECK(!in.bad(), "CsvDataset: reading '" + path + "' failed");
  Parsed parsed = parse(buf.str(), options.delimiter, path);
  rows_ = std::move(parsed.rows);
  auto table = std::make_shared<CsvTable>();
  table->path = path;
  if (options.header) {
    EMBER_CHECK(!rows_.empty(), "CsvDataset: '" + path + "' has no header row");
    table->columns = std::move(rows_.front());
    rows_.erase(rows_.begin());
    parsed.lines.erase(parsed.lines.begin());
  }
  const std::size_t width = options.header  ? table->columns.size()
                            : rows_.empty() ? 0
                                            : rows_.front().size();
  for (std::size_t r = 0; r < rows_.size(); ++r) {
    EMBER_CHECK(rows_[r].size() == width,
                "CsvDataset: '" + path + "' line " + std::to_string(parsed.lines[r]) + ": row " +
                    std::to_string(r) + " has " + std::to_string(rows_[r].size()) + " fields but " +
                    (options.header ? "the header has " : "the first row has ") +
                    std::to_string(width));
  }
  table_ = std::move(table);
}

std::optional<CsvRow> CsvDataset::get(std::size_t index) const {
  if (index >= rows_.size()) return std::nullopt;
  return CsvRow{table_, index, rows_[index]};
}

std::size_t CsvDataset::column(const std::string& name) const {
  return column_index(*table_, name);
}

}  // namespace ember::data
