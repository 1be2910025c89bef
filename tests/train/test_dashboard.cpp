// Braille curves, the plain progress lines, the metric logs and the checkpoint folder.
#include <gtest/gtest.h>

#include <bitset>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/expect_error.hpp"
#include "train/tiny_task.hpp"

using namespace ember;
using namespace ember::train;
using namespace ember::train::testing;
using ember::data::testing::expect_error;
namespace fs = std::filesystem;

namespace {
// The dot bits of a braille character (UTF-8, U+2800 + bits).
unsigned braille_bits(const std::string& row, std::size_t cell) {
  const auto b = [&](std::size_t i) {
    return unsigned(static_cast<unsigned char>(row[3 * cell + i]));
  };
  const unsigned cp = ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  return cp - 0x2800;
}
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TEST(Braille, AFlatLineFillsTheMiddleRowOfDots) {
  // y is constant: it sits at the middle, dot row round(0.5 * 3) = 2 of a 1-cell-high
  // canvas; dots (col 0, row 2) = 0x04 and (col 1, row 2) = 0x20 in every cell.
  const auto cv = braille_plot({{{0.0, 1.0}, {10.0, 1.0}}}, 3, 1);
  ASSERT_EQ(cv.rows.size(), 1u);
  ASSERT_EQ(cv.rows[0].size(), 9u);
  for (std::size_t c = 0; c < 3; ++c) {
    EXPECT_EQ(braille_bits(cv.rows[0], c), 0x24u) << c;
    EXPECT_EQ(cv.cell_series[0][c], 0);
  }
}

TEST(Braille, ADiagonalRisesFromBottomLeftToTopRight) {
  // One cell, 2 x 4 dots: the line from the minimum to the maximum sets the bottom-left
  // dot (col 0, row 3: 0x40), the top-right one (col 1, row 0: 0x08), and exactly one dot
  // in each of the 4 dot rows.
  const auto cv = braille_plot({{{0.0, 0.0}, {1.0, 1.0}}}, 1, 1);
  const unsigned bits = braille_bits(cv.rows[0], 0);
  EXPECT_TRUE(bits & 0x40u);
  EXPECT_TRUE(bits & 0x08u);
  EXPECT_EQ(std::bitset<8>(bits).count(), 4u);
  EXPECT_EQ(cv.y_min, 0.0);
  EXPECT_EQ(cv.y_max, 1.0);
}

TEST(Braille, EmptySeriesGiveBlankCells) {
  const auto cv = braille_plot({{}, {{1.0, std::nan("")}}}, 4, 2);
  for (const auto& row : cv.rows)
    for (std::size_t c = 0; c < 4; ++c) EXPECT_EQ(braille_bits(row, c), 0u);
  EXPECT_EQ(cv.cell_series[1][3], -1);
}

TEST(Dashboard, PlainModePrintsProgressLinesAndEpochs) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    auto d = make_dashboard(DashboardMode::Plain, f, /*plain_interval_seconds=*/0.0);
    History h;
    Progress p;
    p.epoch = 2;
    p.epochs = 5;
    p.batch = 3;
    p.batches = 12;
    p.run_batch = 15;
    p.run_batches = 60;
    p.run_eta = 65;
    d->update(p, {{"loss", 0.25}}, h);
    d->epoch_end(Split::Valid, 2, {{"accuracy", 0.875}}, h);
    d->finish();
  }
  std::rewind(f);
  char buf[512] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const std::string out(buf, n);
  EXPECT_NE(out.find("train epoch 2/5 batch 3/12 (25%) run 25% eta 1:05"), std::string::npos)
      << out;
  EXPECT_NE(out.find("loss 0.2500"), std::string::npos) << out;
  EXPECT_NE(out.find("epoch 2 valid:  accuracy 0.8750"), std::string::npos) << out;
  EXPECT_EQ(out.find("\x1b["), std::string::npos);  // no escapes off a terminal
}

TEST(Dashboard, Durations) {
  EXPECT_EQ(format_duration(7), "0:07");
  EXPECT_EQ(format_duration(245), "4:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "--:--");
}

TEST(MetricLogger, CsvAndJsonLinesAndRewrite) {
  const std::string dir = fresh_dir("logger");
  History h;
  {
    MetricLogger log(dir, {"loss", "accuracy"}, {"loss"});
    log.step(Split::Train, 1, 1, {{"loss", 0.5}, {"accuracy", std::nan("")}});
    h.add_step(Split::Train, "loss", {1, 1, 0.5});
    h.add_step(Split::Train, "accuracy", {1, 1, std::nan("")});
    log.epoch(Split::Valid, 1, 1, {{"loss", 0.25}});
    h.add_epoch(Split::Valid, "loss", {1, 1, 0.25});
    log.flush();
    EXPECT_EQ(slurp(dir + "/train_steps.csv"), "epoch,step,loss,accuracy\n1,1,0.5,\n");
    EXPECT_EQ(slurp(dir + "/valid_epochs.csv"), "epoch,step,loss\n1,1,0.25\n");
    EXPECT_EQ(slurp(dir + "/steps.jsonl"),
              "{\"accuracy\":null,\"epoch\":1,\"loss\":0.5,\"split\":\"train\",\"step\":1}\n");
    log.step(Split::Train, 1, 2, {{"loss", 9.0}, {"accuracy", 1.0}});  // not in the history
  }
  MetricLogger again(dir, {"loss", "accuracy"}, {"loss"});
  again.rewrite(h);
  EXPECT_EQ(slurp(dir + "/train_steps.csv"), "epoch,step,loss,accuracy\n1,1,0.5,\n");
  EXPECT_EQ(slurp(dir + "/epochs.jsonl"),
            "{\"epoch\":1,\"loss\":0.25,\"split\":\"valid\",\"step\":1}\n");
}

TEST(CheckpointStore, CommitPointsLatestAndPrunesKeepingTheBest) {
  const std::string dir = fresh_dir("store");
  CheckpointStore store(dir);
  EXPECT_FALSE(store.latest());
  for (const char* name : {"epoch-0001", "epoch-0002-step-000007", "epoch-0002", "epoch-0003"}) {
    const std::string staged = store.stage(name);
    std::ofstream(staged + "/x") << name;
    store.commit(name, std::string(name) == "epoch-0001", /*keep_last=*/2);
  }
  EXPECT_EQ(store.list(), (std::vector<std::string>{"epoch-0001", "epoch-0002", "epoch-0003"}));
  EXPECT_EQ(fs::path(*store.latest()).filename(), "epoch-0003");
  EXPECT_EQ(fs::path(*store.best()).filename(), "epoch-0001");
  EXPECT_EQ(slurp(*store.latest() + "/x"), "epoch-0003");
  // A staging folder left by a crash is not a checkpoint and goes at the next commit.
  store.stage("epoch-0004");
  EXPECT_EQ(store.list().size(), 3u);
  store.stage("epoch-0005");
  store.commit("epoch-0005", false, 2);
  EXPECT_FALSE(fs::exists(dir + "/.staging-epoch-0004"));
}

TEST(CheckpointStore, WriteFileAtomicallyReplacesWhole) {
  const std::string dir = fresh_dir("atomic");
  fs::create_directories(dir);
  write_file_atomically(dir + "/f", "first");
  write_file_atomically(dir + "/f", "second");
  EXPECT_EQ(read_file(dir + "/f"), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  expect_error([&] { write_file_atomically(dir + "/no/such/f", "x"); }, "cannot create");
  expect_error([&] { (void)read_file(dir + "/missing"); }, "cannot open");
}

TEST(Interrupter, StopsAtAStepAndOnRequest) {
  Interrupter i;
  EXPECT_FALSE(i.should_stop(100));
  i.stop_at_step(5);
  EXPECT_FALSE(i.should_stop(4));
  EXPECT_TRUE(i.should_stop(5));
  Interrupter copy = i;
  i.reset();
  EXPECT_FALSE(copy.should_stop(5));
  copy.stop();
  EXPECT_TRUE(i.stop_requested());
  {
    Interrupter sig;
    SigintGuard guard(sig);
    std::raise(SIGINT);  // the guard's handler sets the flag; the process goes on
    EXPECT_TRUE(sig.stop_requested());
  }
}

TEST(Dashboard, TerminalModeDrawsCurvesWithinTheWidth) {
  std::FILE* f = std::tmpfile();  // not a terminal: the width is taken as 80 columns
  ASSERT_NE(f, nullptr);
  History h;
  for (std::size_t s = 1; s <= 50; ++s) h.add_step(Split::Train, "loss", {1, s, 2.0 / double(s)});
  h.add_epoch(Split::Valid, "loss", {1, 25, 0.5});
  h.add_epoch(Split::Valid, "loss", {2, 50, 0.2});
  {
    auto d = make_dashboard(DashboardMode::Terminal, f, 10.0, {"loss", "accuracy"});
    Progress p;
    p.batch = p.batches = 50;
    d->update(p,
              {{"loss", 0.123456},
               {"accuracy", 0.5},
               {"items_per_second", 12345.678},
               {"epoch_time", 12.3},
               {"lr", 0.001},
               {"another_long_metric_name", 1.0}},
              h);
    d->finish();
  }
  std::rewind(f);
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  // Visible columns of each line: escapes skipped, one column per UTF-8 character.
  std::size_t braille = 0;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line)) {
    std::size_t cols = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const auto c = static_cast<unsigned char>(line[i]);
      if (c == 0x1b) {
        while (i < line.size() && !std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
        continue;
      }
      if ((c & 0xC0) != 0x80) ++cols;
      if (c == 0xE2 && i + 1 < line.size() &&
          (static_cast<unsigned char>(line[i + 1]) & 0xFC) == 0xA0)
        ++braille;
    }
    EXPECT_LE(cols, 79u) << line;
  }
  EXPECT_GT(braille, 0u);
  EXPECT_NE(out.find("\x1b[?25h"), std::string::npos);  // the cursor is shown again
}
