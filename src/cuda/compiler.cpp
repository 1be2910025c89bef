// NVRTC compilation and the CUBIN caches (see compiler.hpp).
#include "cuda/compiler.hpp"

#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "ember/base/error.hpp"
#include "ember/base/hash.hpp"

namespace ember::cuda {
namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'C', 'U', 'B', '0', '1'};

void check_nvrtc(nvrtcResult r, const char* call, const std::string& what) {
  if (r != NVRTC_SUCCESS) {
    fail(std::string("cuda: ") + call + " failed for " + what + ": " + nvrtcGetErrorString(r));
  }
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

int nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
  return major * 1000 + minor * 10;
}

namespace {
// Runs NVRTC on source with opts; returns the CUBIN (cubin = true) or the PTX.
std::vector<char> run_nvrtc(const std::string& source, const std::vector<std::string>& options,
                            bool cubin, const std::string& what) {
  nvrtcProgram prog = nullptr;
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), "ember_kernel.cu", 0, nullptr, nullptr),
              "nvrtcCreateProgram", what);
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  if (r != NVRTC_SUCCESS) {
    std::size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    if (log_size) nvrtcGetProgramLog(prog, log.data());
    nvrtcDestroyProgram(&prog);
    fail("cuda: NVRTC could not compile " + what + " (" + options[0] +
         "): " + nvrtcGetErrorString(r) + "\n" + log);
  }
  std::size_t size = 0;
  std::vector<char> out;
  if (cubin) {
    check_nvrtc(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize", what);
    out.resize(size);
    check_nvrtc(nvrtcGetCUBIN(prog, out.data()), "nvrtcGetCUBIN", what);
  } else {
    check_nvrtc(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize", what);
    out.resize(size);
    check_nvrtc(nvrtcGetPTX(prog, out.data()), "nvrtcGetPTX", what);
  }
  nvrtcDestroyProgram(&prog);
  return out;
}
}  // namespace

// Note [No contraction]: every kernel is compiled with --fmad=false, so NVVM and ptxas never
// contract a multiply and an add into one fused multiply-add. Contraction would round a
// fused kernel differently from the same instructions run as single-op kernels (x * y + z
// as two kernels rounds x * y when it is stored; one kernel could keep it exact in an FMA),
// and its choice depends on the code around an expression, so the same function could
// round differently in two kernels. Without it, each + - * / of a printed expression rounds
// as written (IEEE, as the C++ the Cpu backend runs), in every kernel alike; code that
// wants an FMA says so (fmaf, as em_gelu does). Element-wise kernels are bound by memory,
// so the extra instructions cost nothing measurable there.
const std::vector<std::string>& compile_options() {
  static const std::vector<std::string> o = {"--std=c++17", "-diag-suppress=186", "--fmad=false"};
  return o;
}

std::vector<char> compile_cubin(const std::string& source, int arch, const std::string& what) {
  // No fast-math: kernels keep IEEE semantics (NaN, denormals, exact division) to agree
  // with the Cpu backend. Warning 186 (an unsigned compared with zero) is expected: one
  // table expression serves signed and unsigned types.
  std::vector<std::string> o = {"--gpu-architecture=sm_" + std::to_string(arch)};
  o.insert(o.end(), compile_options().begin(), compile_options().end());
  return run_nvrtc(source, o, true, what);
}

std::vector<char> compile_ptx_fast(const std::string& source, int arch, const std::string& what) {
  std::vector<std::string> o = {"--gpu-architecture=compute_" + std::to_string(arch)};
  o.insert(o.end(), compile_options().begin(), compile_options().end());
  o.push_back("-Ofc=max");
  return run_nvrtc(source, o, false, what);
}

CubinCache::CubinCache(int driver_version, bool use_disk) : driver_version_(driver_version) {
  if (!use_disk) return;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    dir_ = std::string(xdg) + "/ember/cuda";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir_ = std::string(home) + "/.cache/ember/cuda";
  }
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) dir_.clear();  // an unwritable cache only costs compile time
  }
}

std::string CubinCache::directory() const { return dir_; }

std::string CubinCache::path_for(std::uint64_t hash, int arch) const {
  return dir_ + "/" + hex(hash) + "-sm" + std::to_string(arch) + "-nvrtc" +
         std::to_string(nvrtc_version()) + "-drv" + std::to_string(driver_version_) + ".cubin";
}

// Entry layout: magic, payload size (u64), payload checksum (u64), payload.
bool CubinCache::read_disk(const std::string& path, std::vector<char>& out) const {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  char magic[8];
  std::uint64_t size = 0, sum = 0;
  if (!f.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return false;
  if (!f.read(reinterpret_cast<char*>(&size), 8) || !f.read(reinterpret_cast<char*>(&sum), 8)) {
    return false;
  }
  if (size == 0 || size > (std::uint64_t(1) << 30)) return false;
  std::vector<char> data(size);
  if (!f.read(data.data(), static_cast<std::streamsize>(size))) return false;
  if (f.peek() != std::char_traits<char>::eof()) return false;  // trailing bytes: corrupt
  if (hash_bytes(data.data(), data.size()) != sum) return false;
  out = std::move(data);
  return true;
}

void CubinCache::write_disk(const std::string& path, const std::vector<char>& cubin) const {
  // Written to a unique temporary and renamed, so concurrent processes never see a torn file.
  const std::string tmp =
      path + ".tmp" +
      hex(reinterpret_cast<std::uintptr_t>(this) ^ static_cast<std::uint64_t>(std::rand()));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return;
    const std::uint64_t size = cubin.size(), sum = hash_bytes(cubin.data(), cubin.size());
    f.write(kMagic, 8);
    f.write(reinterpret_cast<const char*>(&size), 8);
    f.write(reinterpret_cast<const char*>(&sum), 8);
    f.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
    if (!f) {
      std::remove(tmp.c_str());
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::remove(tmp.c_str());
}

const std::vector<char>& CubinCache::get(const std::string& source, int arch,
                                         const std::string& what) {
  // The key covers the options too: a CUBIN built with other options is another entry.
  std::string keyed = source;
  for (const auto& o : compile_options()) keyed += "\n// " + o;
  const std::uint64_t h = hash_bytes(keyed.data(), keyed.size());
  std::lock_guard lk(mu_);
  auto key = std::make_pair(h, arch);
  if (auto it = mem_.find(key); it != mem_.end()) return it->second;
  std::vector<char> cubin;
  const std::string path = dir_.empty() ? "" : path_for(h, arch);
  if (path.empty() || !read_disk(path, cubin)) {
    cubin = compile_cubin(source, arch, what);
    ++compiles_;
    if (!path.empty()) write_disk(path, cubin);
  }
  return mem_.emplace(key, std::move(cubin)).first->second;
}

}  // namespace ember::cuda
