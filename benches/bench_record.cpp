// bench_record: saving and loading a model of about 1 GB (64 f32 tensors of [2048, 2048])
// in .ember and safetensors, against the disk's sequential bandwidth measured in the same
// run on the same bytes: a plain write of the same size from a host buffer, fsync'd, and a
// plain read of it. PyTorch's side (torch.save / torch.load, safetensors' save_file /
// load_file) is benches/record_torch.py, run beside it on the same directory.
//
// Page cache: every save ends with fsync (record::save fsyncs the file and its directory;
// the plain write fsyncs too), so saves are timed to the disk. Before each cold read the
// file's pages are dropped with posix_fadvise(POSIX_FADV_DONTNEED) after an fsync, so the
// read comes from the disk; "warm" rows read the file again with its pages cached.
//
// Mapped loads ({.mmap = true}) adopt each tensor's pages with no copy (docs/record.md):
// with the per-tensor checksums (the default) the load reads every page once to check
// them; without (verify_checksums = false) it reads the metadata only, and the data comes
// from the disk when first touched ("then touch every page" reads one element per 4 KiB).
//
// --loads times the plain (pread) .ember load alone, alternated with the plain read of the
// same file, cold and warm (the A/B of load changes). --python PY runs record_torch.py
// with that interpreter on the same directory and sizes after ember's rows (with --loads,
// its torch.load rows only), so torch.save / torch.load print beside them.
//
//   bench_record [--dir DIR] [--mib N] [--reps N] [--loads] [--python PY]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <ember/ember.hpp>

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

struct Blob {
  std::vector<nn::Param<Tensor<2>>> ws;
  EMBER_MODULE(Blob, ws)
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void drop_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// A plain sequential write of `bytes` from a host buffer in 16 MiB chunks, then fsync.
double plain_write(const std::string& path, std::size_t bytes) {
  std::vector<char> chunk(std::size_t(16) << 20, 'e');
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) std::abort();
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(chunk.size(), bytes - done);
    const ssize_t w = ::write(fd, chunk.data(), n);
    if (w <= 0) std::abort();
    done += std::size_t(w);
  }
  ::fsync(fd);
  ::close(fd);
  return seconds_since(t0);
}

double plain_read(const std::string& path) {
  std::vector<char> chunk(std::size_t(16) << 20);
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) std::abort();
  while (::read(fd, chunk.data(), chunk.size()) > 0) {
  }
  ::close(fd);
  return seconds_since(t0);
}

// The same read into fresh memory, one page-aligned buffer per `piece` bytes, all kept until
// the end, as a load that makes the model's tensors must: the kernel supplies (and zeroes)
// every page, which a read into one reused buffer never pays.
double plain_read_fresh(const std::string& path, std::size_t piece) {
  struct Free {
    void operator()(char* p) const { ::operator delete (p, std::align_val_t{4096}); }
  };
  std::vector<std::unique_ptr<char, Free>> kept;
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) std::abort();
  for (;;) {
    kept.emplace_back(static_cast<char*>(::operator new (piece, std::align_val_t{4096})));
    if (::read(fd, kept.back().get(), piece) <= 0) break;
  }
  ::close(fd);
  return seconds_since(t0);
}

// Reads one f32 of every 4 KiB page of a Cpu tensor in place (a strided view: no copy).
double touch_pages(const DynTensor& t) {
  const std::size_t n = t.shape().num_elements(), step = 1024;
  DynTensor column = ops::slice(ops::permute(ops::reshape(t, Shape{n / step, step}), {1, 0}),
                                {{0, 1}});  // [1, n / 1024]: element 0 of each page
  return ops::reduce_dims(ir::ReduceFn::Sum, ops::cast(column, DType::F64), {0, 1})
      .to_data()
      .to_vector<double>()[0];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::filesystem::temp_directory_path().string();
  std::size_t mib = 1024;
  int reps = 3;
  bool loads_only = false;
  std::string python;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--loads") {
      loads_only = true;
      continue;
    }
    if (i + 1 >= argc) break;
    if (a == "--dir")
      dir = argv[++i];
    else if (a == "--mib")
      mib = std::size_t(std::atol(argv[++i]));
    else if (a == "--reps")
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--python")
      python = argv[++i];
  }
  const Device cpu = Device::cpu();
  const std::size_t per = std::size_t(2048) * 2048;  // 16 MiB of f32
  const std::size_t count = std::max<std::size_t>(1, mib / 16);
  Blob blob;
  for (std::size_t i = 0; i < count; ++i)
    blob.ws.emplace_back(Tensor<2>::full(Shape{2048, 2048}, double(i) * 0.5, cpu));
  const std::size_t bytes = count * per * sizeof(float);
  const double gb = double(bytes) / 1e9;
  std::printf("bench_record: %zu tensors [2048, 2048] f32 = %.3f GB in %s, %d reps (median)\n",
              count, gb, dir.c_str(), reps);

  const std::string plain = dir + "/bench_record.plain", ember = dir + "/bench_record.ember",
                    st = dir + "/bench_record.safetensors";
  // PyTorch's side, on the same directory and sizes, after ember's rows.
  const auto run_torch = [&] {
    if (python.empty()) return 0;
    const std::string cmd = python + " " + EMBER_SOURCE_DIR + "/benches/record_torch.py --dir " +
                            dir + " --mib " + std::to_string(mib) + " --reps " +
                            std::to_string(reps) + (loads_only ? " --loads" : "");
    std::fflush(stdout);
    return std::system(cmd.c_str()) == 0 ? 0 : 1;
  };
  const auto row = [&](const char* what, const std::vector<double>& t, double ceiling,
                       const char* of = "the disk's") {
    const double rate = gb / median(t);
    std::printf("%-34s %8.3f s  %7.2f GB/s", what, median(t), rate);
    if (ceiling > 0) std::printf("  %5.0f%% of %s", 100.0 * rate / ceiling, of);
    std::printf("\n");
  };
  if (loads_only) {
    // Each repetition: the plain read (dd's 16 MiB reads) and the load, cold then warm.
    record::save(blob, ember);
    std::vector<double> pr, el, prw, elw;
    for (int r = 0; r < reps; ++r) {
      drop_cache(ember);
      pr.push_back(plain_read(ember));
      drop_cache(ember);
      auto t0 = Clock::now();
      blob = record::load(std::move(blob), ember, cpu);
      el.push_back(seconds_since(t0));
      prw.push_back(plain_read(ember));
      t0 = Clock::now();
      blob = record::load(std::move(blob), ember, cpu);
      elw.push_back(seconds_since(t0));
    }
    row("disk: plain read, cold", pr, 0);
    row("ember load .ember, cold", el, gb / median(pr), "the cold plain read");
    row("page cache: plain read, warm", prw, 0);
    row("ember load .ember, warm", elw, gb / median(prw), "the warm plain read");
    for (int r = 0; r < reps; ++r) {
      std::printf("  rep %d: plain %.3f / load %.3f s cold, %.3f / %.3f s warm\n", r, pr[r], el[r],
                  prw[r], elw[r]);
    }
    const float v = blob.ws.back().val().to_data().to_vector<float>()[12345];
    std::remove(ember.c_str());
    if (v != float(double(count - 1) * 0.5)) return 1;
    return run_torch();
  }
  std::vector<double> pw, pr, prw, prf, es, el, em, ss, sl, sm, ew, en, et;
  for (int r = 0; r < reps; ++r) {
    pw.push_back(plain_write(plain, bytes));
    drop_cache(plain);
    pr.push_back(plain_read(plain));
    prw.push_back(plain_read(plain));  // warm: its pages were just read
    drop_cache(plain);
    prf.push_back(plain_read_fresh(plain, per * sizeof(float)));
    auto t0 = Clock::now();
    record::save(blob, ember);
    es.push_back(seconds_since(t0));
    drop_cache(ember);
    t0 = Clock::now();
    blob = record::load(std::move(blob), ember, cpu);
    el.push_back(seconds_since(t0));
    drop_cache(ember);
    t0 = Clock::now();
    blob = record::load(std::move(blob), ember, cpu, {.mmap = true});
    em.push_back(seconds_since(t0));
    t0 = Clock::now();
    blob = record::load(std::move(blob), ember, cpu, {.mmap = true});
    ew.push_back(seconds_since(t0));  // warm mapped load
    // Pages of a live mapping stay cached whatever posix_fadvise says: the model lets go of
    // the mapping (a plain load, untimed) before the cold mapped load.
    blob = record::load(std::move(blob), ember, cpu);
    drop_cache(ember);
    t0 = Clock::now();
    blob = record::load(std::move(blob), ember, cpu, {.mmap = true, .verify_checksums = false});
    en.push_back(seconds_since(t0));  // O(metadata)
    t0 = Clock::now();
    double sum = 0;
    for (const auto& w : blob.ws) sum += touch_pages(w.val().dyn());
    et.push_back(en.back() + seconds_since(t0));
    if (sum != sum) std::abort();  // keeps the reads
    t0 = Clock::now();
    record::save(blob, st);
    ss.push_back(seconds_since(t0));
    drop_cache(st);
    t0 = Clock::now();
    blob = record::load(std::move(blob), st, cpu);
    sl.push_back(seconds_since(t0));
    drop_cache(st);
    t0 = Clock::now();
    blob = record::load(std::move(blob), st, cpu, {.mmap = true});
    sm.push_back(seconds_since(t0));
  }
  const double disk_w = gb / median(pw), disk_r = gb / median(pr);
  row("disk: plain write + fsync", pw, 0);
  row("disk: plain read, cold", pr, 0);
  row("page cache: plain read, warm", prw, 0);
  row("disk: plain read, cold, fresh memory", prf, 0);
  row("ember save .ember (fsync'd)", es, disk_w);
  row("ember load .ember, cold", el, disk_r);
  row("ember load .ember, mmap, cold", em, disk_r);
  row("ember load .ember, mmap, warm", ew, 0);
  row("ember load .ember, mmap, no checksums", en, 0);
  row("  then touch every page (cold)", et, disk_r);
  row("ember save .safetensors (fsync'd)", ss, disk_w);
  row("ember load .safetensors, cold", sl, disk_r);
  row("ember load .safetensors, mmap, cold", sm, disk_r);
  // The values survived every round trip.
  const float v = blob.ws.back().val().to_data().to_vector<float>()[12345];
  std::printf("check: last tensor %g (expected %g)\n", double(v), double(count - 1) * 0.5);
  std::remove(plain.c_str());
  std::remove(ember.c_str());
  std::remove(st.c_str());
  if (v != float(double(count - 1) * 0.5)) return 1;
  return run_torch();
}
