// Checkpoints of a training run: a folder per checkpoint under <artifacts>/checkpoints/,
//
//   checkpoints/epoch-0003/                model.ember, optimizer.ember, learner.json
//   checkpoints/epoch-0004-step-000931/    (a stop in the middle of an epoch)
//   checkpoints/latest                     the name of the newest one
//   checkpoints/best                       the name of the best one by the chosen metric
//
// Note [Atomic checkpoints]: a checkpoint is written into a staging folder
// (".staging-<name>"), every file fsync'd, then renamed to its name, the folder fsync'd,
// and only then does `latest` (itself written to a temporary file and renamed) point at
// it. A crash at any moment leaves `latest` naming a complete checkpoint (or none); a
// staging folder left by a crash is removed by the next commit. Pruning (keep-last-N)
// removes folders only after `latest` names the new one, and never the best.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ember/train/history.hpp"

namespace ember::train {

struct CheckpointPolicy {
  bool every_epoch = true;      // a checkpoint at the end of each epoch
  std::size_t every_steps = 0;  // also every n optimizer steps (0: none)
  std::size_t keep_last = 2;    // checkpoints kept besides the best (0: all)
  // The best checkpoint by this epoch metric (empty: none kept apart).
  std::string best_metric = {};
  Split best_split = Split::Valid;
};

// The checkpoints folder: staging, committing, pruning, finding.
class CheckpointStore {
 public:
  // Creates `dir` when missing; an ember::Error naming it when it cannot be written.
  explicit CheckpointStore(std::string dir);

  // A fresh, empty staging folder for checkpoint `name`; returns its path.
  std::string stage(const std::string& name) const;
  // Moves the staged checkpoint into place and points `latest` (and `best` when is_best)
  // at it, then prunes to the newest keep_last (0: keeps all) and the best.
  std::string commit(const std::string& name, bool is_best, std::size_t keep_last) const;

  // The folder `latest` (or `best`) names, when it exists.
  std::optional<std::string> latest() const;
  std::optional<std::string> best() const;
  // Committed checkpoints, oldest first.
  std::vector<std::string> list() const;
  const std::string& dir() const { return dir_; }

 private:
  std::optional<std::string> pointer(const char* which) const;
  std::string dir_;
};

// Writes `content` to `path` atomically: a temporary file in the same folder, fsync'd,
// renamed over `path`. An ember::Error naming the path and the system's reason on failure.
void write_file_atomically(const std::string& path, const std::string& content);
// The whole file; an ember::Error naming it when it cannot be read.
std::string read_file(const std::string& path);
// Creates `dir` (and its parents) and checks that a file can be written in it; an
// ember::Error naming `who`, the folder and the system's reason otherwise.
void ensure_writable_dir(const std::string& dir, const char* who);

}  // namespace ember::train
