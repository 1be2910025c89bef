#include "ember/data/sqlite.hpp"

#include <sqlite3.h>

#include "ember/base/error.hpp"

namespace ember::data {

namespace {

// "name" with embedded quotes doubled: an SQL identifier whatever it holds.
std::string quoted(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

// SQLite by default reads a double-quoted name that matches no column as a string literal
// (so a misspelt column would read as its own name); this turns that off.
void strict_identifiers(sqlite3* db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DML, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL, 0, nullptr);
}

std::string db_error(sqlite3* db) { return db != nullptr ? sqlite3_errmsg(db) : "out of memory"; }

sqlite3_stmt* prepare(sqlite3* db, const std::string& sql, const std::string& who) {
  sqlite3_stmt* st = nullptr;
  const int rc = sqlite3_prepare_v2(db, sql.c_str(), int(sql.size()), &st, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(st);
    fail(who + ": " + db_error(db));
  }
  return st;
}

void exec(sqlite3* db, const std::string& sql, const std::string& who) {
  char* msg = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
    std::string m = msg != nullptr ? msg : db_error(db);
    sqlite3_free(msg);
    fail(who + ": " + m);
  }
}

const char* type_name(const SqliteValue& v) {
  switch (v.index()) {
    case 0:
      return "null";
    case 1:
      return "integer";
    case 2:
      return "real";
    case 3:
      return "text";
    default:
      return "blob";
  }
}

template <class T>
const T& typed(const SqliteRow& row, const std::string& column, const char* want) {
  const SqliteValue& v = row.at(column);
  const T* p = std::get_if<T>(&v);
  EMBER_CHECK(p != nullptr,
              "SqliteRow: column '" + column + "' holds " + type_name(v) + ", not " + want);
  return *p;
}

}  // namespace

const SqliteValue& SqliteRow::at(const std::string& column) const {
  EMBER_CHECK(columns != nullptr, "SqliteRow::at: the row has no columns");
  for (std::size_t i = 0; i < columns->size(); ++i) {
    if ((*columns)[i] == column) return values.at(i);
  }
  fail("SqliteRow: no column '" + column + "'");
}
std::int64_t SqliteRow::integer(const std::string& c) const {
  return typed<std::int64_t>(*this, c, "integer");
}
double SqliteRow::real(const std::string& c) const {
  const SqliteValue& v = at(c);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return double(*i);
  return typed<double>(*this, c, "real");
}
const std::string& SqliteRow::text(const std::string& c) const {
  return typed<std::string>(*this, c, "text");
}
const std::vector<std::uint8_t>& SqliteRow::blob(const std::string& c) const {
  return typed<std::vector<std::uint8_t>>(*this, c, "blob");
}
bool SqliteRow::is_null(const std::string& c) const {
  return std::holds_alternative<std::monostate>(at(c));
}

SqliteDataset::SqliteDataset(const std::string& path, const std::string& table,
                             std::vector<std::string> columns)
    : path_(path), table_(table) {
  const std::string who = "SqliteDataset: '" + path + "' table '" + table + "'";
  const int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr);
  if (rc != SQLITE_OK) {
    const std::string m = db_error(db_);
    sqlite3_close(db_);
    db_ = nullptr;
    fail("SqliteDataset: cannot open '" + path + "': " + m);
  }
  strict_identifiers(db_);
  try {
    if (columns.empty()) {
      // The table's own columns, in declaration order.
      sqlite3_stmt* info = prepare(db_, "SELECT * FROM " + quoted(table) + " LIMIT 0", who);
      for (int i = 0; i < sqlite3_column_count(info); ++i) {
        columns.emplace_back(sqlite3_column_name(info, i));
      }
      sqlite3_finalize(info);
    }
    EMBER_CHECK(!columns.empty(), who + " has no columns");
    std::string list;
    for (const auto& c : columns) list += (list.empty() ? "" : ", ") + quoted(c);
    select_ = prepare(db_, "SELECT " + list + " FROM " + quoted(table) + " WHERE rowid = ?", who);
    sqlite3_stmt* ids = prepare(db_, "SELECT rowid FROM " + quoted(table) + " ORDER BY rowid", who);
    int step;
    while ((step = sqlite3_step(ids)) == SQLITE_ROW)
      rowids_.push_back(sqlite3_column_int64(ids, 0));
    sqlite3_finalize(ids);
    EMBER_CHECK(step == SQLITE_DONE, who + ": " + db_error(db_));
  } catch (...) {
    sqlite3_finalize(select_);
    sqlite3_close(db_);
    throw;
  }
  columns_ = std::make_shared<const std::vector<std::string>>(std::move(columns));
}

SqliteDataset::~SqliteDataset() {
  sqlite3_finalize(select_);
  sqlite3_close(db_);
}

std::optional<SqliteRow> SqliteDataset::get(std::size_t index) const {
  if (index >= rowids_.size()) return std::nullopt;
  std::lock_guard lk(mu_);
  sqlite3_reset(select_);
  sqlite3_bind_int64(select_, 1, rowids_[index]);
  const int rc = sqlite3_step(select_);
  EMBER_CHECK(rc == SQLITE_ROW, "SqliteDataset: '" + path_ + "' table '" + table_ + "': row " +
                                    std::to_string(index) + " (rowid " +
                                    std::to_string(rowids_[index]) + ") is gone: " + db_error(db_));
  SqliteRow row{columns_, {}};
  row.values.reserve(columns_->size());
  for (int i = 0; i < int(columns_->size()); ++i) {
    switch (sqlite3_column_type(select_, i)) {
      case SQLITE_INTEGER:
        row.values.emplace_back(std::int64_t(sqlite3_column_int64(select_, i)));
        break;
      case SQLITE_FLOAT:
        row.values.emplace_back(sqlite3_column_double(select_, i));
        break;
      case SQLITE_TEXT: {
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(select_, i));
        row.values.emplace_back(std::string(p, std::size_t(sqlite3_column_bytes(select_, i))));
        break;
      }
      case SQLITE_BLOB: {
        const auto* p = static_cast<const std::uint8_t*>(sqlite3_column_blob(select_, i));
        const auto n = std::size_t(sqlite3_column_bytes(select_, i));
        row.values.emplace_back(std::vector<std::uint8_t>(p, p + n));
        break;
      }
      default:
        row.values.emplace_back(std::monostate{});
    }
  }
  sqlite3_reset(select_);
  return row;
}

SqliteWriter::SqliteWriter(const std::string& path, const std::string& table,
                           std::vector<SqliteColumn> columns, bool replace)
    : path_(path), table_(table), columns_(std::move(columns)) {
  const std::string who = "SqliteWriter: '" + path + "' table '" + table + "'";
  EMBER_CHECK(!columns_.empty(), who + ": no columns");
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    const std::string m = db_error(db_);
    sqlite3_close(db_);
    db_ = nullptr;
    fail("SqliteWriter: cannot open '" + path + "': " + m);
  }
  strict_identifiers(db_);
  try {
    exec(db_, "BEGIN", who);
    if (replace) exec(db_, "DROP TABLE IF EXISTS " + quoted(table), who);
    std::string defs, marks;
    for (const auto& c : columns_) {
      defs += (defs.empty() ? "" : ", ") + quoted(c.name) + " " + c.type;
      marks += marks.empty() ? "?" : ", ?";
    }
    exec(db_, "CREATE TABLE " + quoted(table) + " (" + defs + ")", who);
    insert_ = prepare(db_, "INSERT INTO " + quoted(table) + " VALUES (" + marks + ")", who);
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

SqliteWriter::~SqliteWriter() {
  if (db_ == nullptr) return;
  try {
    finish();
  } catch (const Error&) {
    // Documented: the destructor cannot report; finish() does.
  }
}

void SqliteWriter::write(const std::vector<SqliteValue>& row) {
  const std::string who = "SqliteWriter: '" + path_ + "' table '" + table_ + "'";
  EMBER_CHECK(db_ != nullptr, who + ": write after finish()");
  EMBER_CHECK(row.size() == columns_.size(), who + ": a row of " + std::to_string(row.size()) +
                                                 " values for " + std::to_string(columns_.size()) +
                                                 " columns");
  sqlite3_reset(insert_);
  sqlite3_clear_bindings(insert_);
  for (int i = 0; i < int(row.size()); ++i) {
    const SqliteValue& v = row[std::size_t(i)];
    int rc = SQLITE_OK;
    if (const auto* n = std::get_if<std::int64_t>(&v)) {
      rc = sqlite3_bind_int64(insert_, i + 1, *n);
    } else if (const auto* d = std::get_if<double>(&v)) {
      rc = sqlite3_bind_double(insert_, i + 1, *d);
    } else if (const auto* s = std::get_if<std::string>(&v)) {
      rc = sqlite3_bind_text64(insert_, i + 1, s->data(), s->size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    } else if (const auto* b = std::get_if<std::vector<std::uint8_t>>(&v)) {
      rc = sqlite3_bind_blob64(insert_, i + 1, b->data(), b->size(), SQLITE_TRANSIENT);
    } else {
      rc = sqlite3_bind_null(insert_, i + 1);
    }
    EMBER_CHECK(rc == SQLITE_OK,
                who + ": column '" + columns_[std::size_t(i)].name + "': " + db_error(db_));
  }
  EMBER_CHECK(sqlite3_step(insert_) == SQLITE_DONE,
              who + ": row " + std::to_string(rows_) + ": " + db_error(db_));
  ++rows_;
}

void SqliteWriter::finish() {
  if (db_ == nullptr) return;
  sqlite3_finalize(insert_);
  insert_ = nullptr;
  sqlite3* db = db_;
  db_ = nullptr;
  char* msg = nullptr;
  const int rc = sqlite3_exec(db, "COMMIT", nullptr, nullptr, &msg);
  std::string m = msg != nullptr ? msg : "";
  sqlite3_free(msg);
  const int closed = sqlite3_close(db);
  EMBER_CHECK(rc == SQLITE_OK && closed == SQLITE_OK,
              "SqliteWriter: '" + path_ + "' table '" + table_ + "': commit failed: " + m);
}

}  // namespace ember::data
