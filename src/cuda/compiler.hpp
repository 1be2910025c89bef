// NVRTC compilation of generated kernels to CUBIN for one GPU architecture, with a memory
// cache (by source hash and architecture) and a disk cache under $XDG_CACHE_HOME/ember/cuda
// (or ~/.cache/ember/cuda). Disk entries are keyed by source hash, architecture, NVRTC
// and driver versions, and carry their size and a checksum: an entry that fails either is
// recompiled and rewritten, never loaded. Needs no GPU, so CI tests it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ember::cuda {

// NVRTC's version as major * 1000 + minor * 10 (as CUDA versions are written).
int nvrtc_version();

// The NVRTC options of every compile but the architecture (Note [No contraction] in
// compiler.cpp: --fmad=false); part of the cache keys.
const std::vector<std::string>& compile_options();

// Compiles `source` to a CUBIN for sm_<arch> (e.g. 90). Throws ember::Error with NVRTC's log
// and `what` (the kernel or op being built) on failure.
std::vector<char> compile_cubin(const std::string& source, int arch, const std::string& what);
// Front end and NVVM only, fastest settings, to PTX for compute_<arch>: how CI checks that
// every generated kernel compiles (a CUBIN of all of them takes minutes).
std::vector<char> compile_ptx_fast(const std::string& source, int arch, const std::string& what);

class CubinCache {
 public:
  // driver_version: cudaDriverGetVersion's value (0 where unknown); part of disk keys.
  explicit CubinCache(int driver_version = 0, bool use_disk = true);
  // The CUBIN of source for sm_<arch>: from memory, disk or a fresh compile.
  const std::vector<char>& get(const std::string& source, int arch, const std::string& what);

  std::string directory() const;                      // "" when disk caching is off
  std::size_t compiles() const { return compiles_; }  // fresh NVRTC runs (for tests)

 private:
  std::string path_for(std::uint64_t hash, int arch) const;
  bool read_disk(const std::string& path, std::vector<char>& out) const;
  void write_disk(const std::string& path, const std::vector<char>& cubin) const;

  int driver_version_;
  std::string dir_;
  std::mutex mu_;
  std::map<std::pair<std::uint64_t, int>, std::vector<char>> mem_;  // node-stable references
  std::size_t compiles_ = 0;
};

}  // namespace ember::cuda
