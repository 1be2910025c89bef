// The PyTorch child process: spawned once with two pipes, then asked one workload at a time.
// Its stderr is left on ours so a Python traceback is seen as is.
#include "torch_bridge.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace ember::bench {
namespace {

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

// "ok a=1 b=x,y" -> value of key, or "".
std::string field(const std::string& reply, const std::string& key) {
  std::istringstream is(reply);
  std::string tok;
  while (is >> tok) {
    if (tok.rfind(key + "=", 0) == 0) return tok.substr(key.size() + 1);
  }
  return {};
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, sep)) {
    if (!cur.empty()) out.push_back(cur);
  }
  return out;
}

TensorData read_output(const std::string& path, const std::string& dtype,
                       const std::string& shape) {
  std::vector<std::size_t> dims;
  for (const auto& d : split(shape, ',')) dims.push_back(std::stoull(d));
  const DType dt = dtype == "i64" ? DType::I64 : DType::F32;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot read PyTorch output " + path);
  std::vector<std::byte> bytes(static_cast<std::size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return TensorData(std::move(bytes), Shape(std::move(dims)), dt);
}

}  // namespace

std::string default_python() {
  const char* env = std::getenv("EMBER_BENCH_PYTHON");
  if (!env || !*env) return "/usr/bin/python3";
  const std::string py = env;
  if (py.find('/') != std::string::npos) return py;
  // A bare name ("python3"): the first executable of that name on PATH.
  const char* path = std::getenv("PATH");
  for (const auto& dir : split(path ? path : "", ':')) {
    const std::string candidate = dir + "/" + py;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return py;
}

std::string default_torch_script() {
  const char* env = std::getenv("EMBER_BENCH_TORCH_SCRIPT");
  if (env && *env) return env;
  std::vector<std::string> candidates;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<std::size_t>(n));
    dir = dir.substr(0, dir.rfind('/') + 1);
    candidates.push_back(dir + "torch_workloads.py");
  }
  candidates.emplace_back("benches/torch_workloads.py");
  for (const auto& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return EMBER_BENCH_TORCH_SCRIPT;
}

TorchBridge::TorchBridge(const std::string& python, const std::string& script, int threads,
                         bool compile, const std::string& device) {
  if (access(python.c_str(), X_OK) != 0) {
    why_ = "no Python interpreter at " + python;
    return;
  }
  if (access(script.c_str(), R_OK) != 0) {
    why_ = "no PyTorch workload script at " + script;
    return;
  }
  // A child that dies must surface as an error reply, not kill the runner.
  signal(SIGPIPE, SIG_IGN);
  int in_pipe[2], out_pipe[2];  // in: we write, child reads; out: child writes, we read
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0) {
    why_ = "pipe() failed";
    return;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  const std::string th = std::to_string(threads);
  std::vector<std::string> args{python, script, "--threads", th, "--device", device};
  if (compile) args.emplace_back("--compile");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&pid_, python.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    pid_ = -1;
    why_ = "cannot start " + python;
    return;
  }
  to_ = fdopen(in_pipe[1], "w");
  from_ = fdopen(out_pipe[0], "r");
  std::string hello;
  try {
    hello = request("");  // the child speaks first
  } catch (const std::exception& e) {
    why_ = e.what();
    return;
  }
  if (hello.rfind("ok", 0) != 0) {
    why_ = hello.rfind("err ", 0) == 0 ? hello.substr(4) : "unexpected greeting: " + hello;
    return;
  }
  info_ = hello.size() > 3 ? hello.substr(3) : "";
  available_ = true;
}

TorchBridge::~TorchBridge() {
  if (to_) std::fclose(to_);  // EOF on stdin ends the child's loop
  if (from_) std::fclose(from_);
  if (pid_ > 0) {
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

std::string TorchBridge::request(const std::string& line) {
  if (!line.empty()) {
    if (std::fputs((line + "\n").c_str(), to_) < 0 || std::fflush(to_) != 0) {
      throw std::runtime_error("the PyTorch process is gone");
    }
  }
  std::string reply;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, from_)) {
    reply += buf;
    if (!reply.empty() && reply.back() == '\n') {
      reply.pop_back();
      return reply;
    }
  }
  throw std::runtime_error("the PyTorch process ended without replying (see its stderr above)");
}

std::string TorchBridge::info_field(const std::string& key) const { return field(info_, key); }

TorchRun TorchBridge::run(const std::string& workload, const Params& params, int warmup,
                          int warmup_ms, int reps, const std::string& out_path, bool eager) {
  std::ostringstream req;
  req << "{\"name\": \"" << json_escape(workload) << "\", \"warmup\": " << warmup
      << ", \"warmup_ms\": " << warmup_ms << ", \"reps\": " << reps
      << ", \"eager\": " << (eager ? "true" : "false") << ", \"out\": \"" << json_escape(out_path)
      << "\", \"params\": {";
  bool first = true;
  for (const auto& [k, v] : params) {
    req << (first ? "" : ", ") << "\"" << json_escape(k) << "\": [";
    for (std::size_t i = 0; i < v.size(); ++i) req << (i ? ", " : "") << v[i];
    req << "]";
    first = false;
  }
  req << "}}";
  const std::string reply = request(req.str());
  if (reply.rfind("ok", 0) != 0) {
    throw std::runtime_error(reply.rfind("err ", 0) == 0 ? reply.substr(4) : reply);
  }
  TorchRun r;
  // "note=" is free text and always the last field.
  if (const auto at = reply.find(" note="); at != std::string::npos) {
    r.note = reply.substr(at + 6);
  }
  for (const auto& t : split(field(reply, "times"), ',')) r.times_ms.push_back(std::stod(t));
  if (!out_path.empty())
    r.output = read_output(out_path, field(reply, "dtype"), field(reply, "shape"));
  return r;
}

}  // namespace ember::bench
