// SQLite tables as datasets: one item per row, in rowid order, with integer, real, text,
// blob and null columns; and a writer that creates such a table. Rows are read on demand,
// so a dataset larger than memory (images stored as blobs, say) costs only its rowids.
// SQLite itself stays out of this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ember/data/dataset.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace ember::data {

// One cell: null, integer, real, text or blob.
using SqliteValue =
    std::variant<std::monostate, std::int64_t, double, std::string, std::vector<std::uint8_t>>;

struct SqliteRow {
  std::shared_ptr<const std::vector<std::string>> columns;
  std::vector<SqliteValue> values;

  const SqliteValue& at(const std::string& column) const;
  // Typed access; an ember::Error names the column and the type found. real() also takes
  // an integer cell.
  std::int64_t integer(const std::string& column) const;
  double real(const std::string& column) const;
  const std::string& text(const std::string& column) const;
  const std::vector<std::uint8_t>& blob(const std::string& column) const;
  bool is_null(const std::string& column) const;
};

class SqliteDataset : public Dataset<SqliteRow> {
 public:
  // Opens `path` read-only and reads `columns` of `table` (all of them when empty). Throws
  // ember::Error naming the file, table or column SQLite rejects.
  SqliteDataset(const std::string& path, const std::string& table,
                std::vector<std::string> columns = {});
  ~SqliteDataset() override;
  SqliteDataset(const SqliteDataset&) = delete;
  SqliteDataset& operator=(const SqliteDataset&) = delete;

  std::optional<SqliteRow> get(std::size_t index) const override;
  std::size_t len() const override { return rowids_.size(); }
  const std::vector<std::string>& columns() const { return *columns_; }

 private:
  std::string path_, table_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* select_ = nullptr;  // one statement, reused under mu_
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<std::string>> columns_;
  std::vector<std::int64_t> rowids_;
};

// A column of a table the writer creates: its name and SQLite type ("INTEGER", "REAL",
// "TEXT", "BLOB", or any other declared type).
struct SqliteColumn {
  std::string name, type;
};

// Writes rows into a new table, inside one transaction committed by finish() (or the
// destructor, which swallows errors: call finish() to see them). An existing table of the
// same name is an error unless `replace` drops it first.
class SqliteWriter {
 public:
  SqliteWriter(const std::string& path, const std::string& table, std::vector<SqliteColumn> columns,
               bool replace = false);
  ~SqliteWriter();
  SqliteWriter(const SqliteWriter&) = delete;
  SqliteWriter& operator=(const SqliteWriter&) = delete;

  // One value per column, in order.
  void write(const std::vector<SqliteValue>& row);
  // Commits and closes; further writes are errors.
  void finish();
  std::size_t rows_written() const { return rows_; }

 private:
  std::string path_, table_;
  std::vector<SqliteColumn> columns_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  std::size_t rows_ = 0;
};

}  // namespace ember::data
