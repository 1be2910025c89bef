// SQLite datasets: a table written with SQLite's own API read back through SqliteDataset,
// SqliteWriter's output read back with SQLite's own API, a loader over blob rows, and
// errors naming the file, table and column.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>

#include <ember/data/data.hpp>
#include <ember/data/sqlite.hpp>

#include "data/expect_error.hpp"

using namespace ember;
using ember::data::testing::expect_error;
using namespace ember::data;

namespace {

std::string temp_db(const std::string& name) {
  const auto p = (std::filesystem::temp_directory_path() / ("ember_test_sqlite_" + name)).string();
  std::remove(p.c_str());
  return p;
}

void run_sql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

}  // namespace

TEST(Sqlite, ReadsEveryColumnTypeInRowidOrder) {
  const auto path = temp_db("read.db");
  run_sql(
      path,
      "CREATE TABLE items (label INTEGER, score REAL, name TEXT, image BLOB);"
      "INSERT INTO items (rowid, label, score, name, image) VALUES"
      " (10, 3, 0.5, 'ten', x'00ff10'), (2, -7, 2.25, 'two', x''), (5, NULL, 1, 'five', NULL);");
  SqliteDataset d(path, "items");
  EXPECT_EQ(d.columns(), (std::vector<std::string>{"label", "score", "name", "image"}));
  ASSERT_EQ(d.len(), 3u);
  // Rowid order: 2, 5, 10.
  const SqliteRow a = *d.get(0), b = *d.get(1), c = *d.get(2);
  EXPECT_EQ(a.integer("label"), -7);
  EXPECT_EQ(a.real("score"), 2.25);
  EXPECT_EQ(a.text("name"), "two");
  EXPECT_TRUE(a.blob("image").empty());
  EXPECT_TRUE(b.is_null("label"));
  EXPECT_EQ(b.real("score"), 1.0);  // stored as the integer 1 (REAL affinity keeps 1.0)
  EXPECT_TRUE(b.is_null("image"));
  EXPECT_EQ(c.blob("image"), (std::vector<std::uint8_t>{0x00, 0xff, 0x10}));
  EXPECT_EQ(c.text("name"), "ten");
  EXPECT_FALSE(d.get(3).has_value());
  expect_error([&] { c.integer("name"); }, "column 'name' holds text, not integer");
  expect_error([&] { c.at("nope"); }, "no column 'nope'");

  SqliteDataset some(path, "items", {"name"});
  EXPECT_EQ(some.get(2)->values.size(), 1u);
  EXPECT_EQ(some.get(2)->text("name"), "ten");
  std::remove(path.c_str());
}

TEST(Sqlite, WriterOutputReadBySqlite) {
  const auto path = temp_db("write.db");
  {
    SqliteWriter w(path, "train", {{"image", "BLOB"}, {"label", "INTEGER"}, {"note", "TEXT"}});
    for (int i = 0; i < 50; ++i) {
      w.write({std::vector<std::uint8_t>(std::size_t(i % 5), std::uint8_t(i)), std::int64_t(i % 10),
               i % 2 ? SqliteValue(std::string("odd")) : SqliteValue(std::monostate{})});
    }
    EXPECT_EQ(w.rows_written(), 50u);
    expect_error([&] { w.write({std::int64_t(1)}); }, "a row of 1 values for 3 columns");
    w.finish();
    expect_error(
        [&] {
          w.write({std::int64_t(1), std::int64_t(1), std::int64_t(1)});
        },
        "write after finish()");
  }
  // Read with SQLite's API directly.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT image, label, note FROM train ORDER BY rowid", -1, &st,
                               nullptr),
            SQLITE_OK);
  int i = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    EXPECT_EQ(sqlite3_column_bytes(st, 0), i % 5);
    if (i % 5 > 0) {
      EXPECT_EQ(static_cast<const std::uint8_t*>(sqlite3_column_blob(st, 0))[0], i);
    }
    EXPECT_EQ(sqlite3_column_int64(st, 1), i % 10);
    EXPECT_EQ(sqlite3_column_type(st, 2), i % 2 ? SQLITE_TEXT : SQLITE_NULL);
    ++i;
  }
  EXPECT_EQ(i, 50);
  sqlite3_finalize(st);
  sqlite3_close(db);

  // An existing table is kept unless replaced.
  expect_error([&] { SqliteWriter(path, "train", {{"x", "INTEGER"}}); }, "already exists");
  {
    SqliteWriter w(path, "train", {{"x", "INTEGER"}}, /*replace=*/true);
    w.write({std::int64_t(4)});
  }
  EXPECT_EQ(SqliteDataset(path, "train").len(), 1u);
  std::remove(path.c_str());
}

TEST(Sqlite, LoaderOverBlobRowsWithWorkers) {
  const auto path = temp_db("loader.db");
  {
    SqliteWriter w(path, "rows", {{"bytes", "BLOB"}, {"label", "INTEGER"}});
    for (int i = 0; i < 97; ++i) {
      w.write({std::vector<std::uint8_t>{std::uint8_t(i), std::uint8_t(i + 1)}, std::int64_t(i)});
    }
  }
  struct SumBatcher {
    std::vector<std::int64_t> batch(std::vector<SqliteRow> rows, const Device&) const {
      std::vector<std::int64_t> out;
      for (const auto& r : rows) {
        const auto& b = r.blob("bytes");
        EMBER_CHECK(b[0] == r.integer("label"), "SumBatcher: row mismatch");
        out.push_back(r.integer("label"));
      }
      return out;
    }
  };
  auto ds = std::make_shared<SqliteDataset>(path, "rows");
  auto serial = DataLoaderBuilder(SumBatcher{}).batch_size(10).shuffle(3).build(ds);
  auto threaded =
      DataLoaderBuilder(SumBatcher{}).batch_size(10).shuffle(3).num_workers(3).build(ds);
  std::vector<std::vector<std::int64_t>> a, b;
  for (auto& x : serial) a.push_back(x);
  for (auto& x : threaded) b.push_back(x);
  EXPECT_EQ(a.size(), 10u);
  EXPECT_EQ(a, b);
  std::remove(path.c_str());
}

TEST(Sqlite, Errors) {
  expect_error([] { SqliteDataset("/nonexistent/dir/x.db", "t"); },
               "cannot open '/nonexistent/dir/x.db'");
  const auto path = temp_db("errors.db");
  run_sql(path, "CREATE TABLE t (a INTEGER);");
  expect_error([&] { SqliteDataset(path, "missing"); }, "table 'missing': no such table: missing");
  expect_error([&] { SqliteDataset(path, "t", {"b"}); }, "no such column: b");
  // A file that is not a database.
  const auto junk = temp_db("junk.db");
  {
    std::FILE* f = std::fopen(junk.c_str(), "wb");
    std::fputs("this is not an sqlite database, just some text long enough to have a header", f);
    std::fclose(f);
  }
  expect_error([&] { SqliteDataset(junk, "t"); }, "not a database");
  std::remove(path.c_str());
  std::remove(junk.c_str());
}
