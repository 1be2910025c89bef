// Runs the ONNX project's node tests (Debian's libonnx-testdata: one folder per test with
// model.onnx and test_data_set_*/input_*.pb, output_*.pb) through onnx::load and
// Model::run, compares every output with the expected one, and prints a line per test and
// the counts. Options:
//   --dir D        the node-test folder (default: Debian's install path)
//   --filter S     only tests whose name contains S
//   --sample N     every N-th test only (the fast CI run)
//   --min-pass P   exit 1 unless at least P tests pass (the ctest floor)
//   --report F     write the markdown report (docs/onnx.md's generated part) to F
//   --device D     the device (default cpu)
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ember/onnx/onnx.hpp"
#include "ember/tensor/ops.hpp"

namespace fs = std::filesystem;
using namespace ember;

namespace {

struct Result {
  std::string name, op;
  std::int64_t opset = 0;
  bool pass = false;
  std::string reason;
};

// The op type of the model's first node and its default-domain opset, read with the ONNX
// protobuf classes (for the report only).
void describe_model(const fs::path& model, Result& r) {
  std::ifstream in(model, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  ::onnx::ModelProto m;
  if (!m.ParseFromString(ss.str())) return;
  if (m.graph().node_size() > 0) r.op = m.graph().node(0).op_type();
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") r.opset = o.version();
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> v;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && e.path().extension() == ".pb")
      v.emplace_back(std::stoi(n.substr(prefix.size())), e.path());
  }
  std::sort(v.begin(), v.end());
  std::vector<fs::path> out;
  for (auto& p : v) out.push_back(p.second);
  return out;
}

std::string first_line(const std::string& s) {
  std::string l = s.substr(0, s.find('\n'));
  if (l.size() > 300) l = l.substr(0, 300) + "...";
  return l;
}

// The node tests' generator stores bfloat16 tensors as uint16 (their bits), which read as
// i32; where the model declares bf16, those bits are the bf16 values.
TensorData as_declared(TensorData t, DType declared) {
  if (declared != DType::BF16 || t.dtype() != DType::I32) return t;
  const auto v = t.to_vector<std::int64_t>();
  std::vector<std::byte> bytes(v.size() * 2);
  for (std::size_t k = 0; k < v.size(); ++k) {
    const auto bits = static_cast<std::uint16_t>(v[k] & 0xffff);
    std::memcpy(bytes.data() + 2 * k, &bits, 2);
  }
  return TensorData(std::move(bytes), t.shape(), DType::BF16);
}

void run_test(const fs::path& dir, const Device& dev, Result& r) {
  describe_model(dir / "model.onnx", r);
  try {
    ember::onnx::Model m = ember::onnx::load((dir / "model.onnx").string(), dev);
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
        sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) throw Error("no test_data_set folder");
    for (const auto& set : sets) {
      std::vector<DynTensor> inputs;
      for (const auto& f : sorted_files(set, "input_")) {
        TensorData t = ember::onnx::read_tensor_file(f.string());
        if (inputs.size() < m.inputs().size())
          t = as_declared(std::move(t), m.inputs()[inputs.size()].dtype);
        inputs.push_back(ops::from_data(t, dev));
      }
      const auto expected = sorted_files(set, "output_");
      std::vector<DynTensor> out = m.run(inputs);
      if (out.size() != expected.size())
        throw Error("produced " + std::to_string(out.size()) + " outputs, expected " +
                    std::to_string(expected.size()));
      for (std::size_t i = 0; i < out.size(); ++i) {
        TensorData want = ember::onnx::read_tensor_file(expected[i].string());
        if (i < m.outputs().size()) want = as_declared(std::move(want), m.outputs()[i].dtype);
        TensorData got = out[i].to_data();
        if (got.dtype() != want.dtype())
          throw Error("output " + std::to_string(i) + " has dtype " + name(got.dtype()) +
                      ", expected " + name(want.dtype()));
        if (got.shape() != want.shape())
          throw Error("output " + std::to_string(i) + " has shape " + got.shape().to_string() +
                      ", expected " + want.shape().to_string());
        // The ONNX backend tests' tolerance (rtol 1e-3, atol 1e-7), atol widened for halves.
        const bool half = want.dtype() == DType::F16 || want.dtype() == DType::BF16;
        try {
          got.convert(DType::F64)
              .assert_approx_eq(want.convert(DType::F64), 1e-3, half ? 1e-3 : 1e-6);
        } catch (const Error& e) {
          throw Error("output " + std::to_string(i) + " differs: " + first_line(e.what()));
        }
      }
    }
    r.pass = true;
  } catch (const std::exception& e) {
    r.reason = first_line(e.what());
  }
}

std::string md_escape(std::string s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|')
      out += "\\|";
    else if (ch == '\n')
      out += ' ';
    else
      out += ch;
  }
  return out;
}

std::string percent(std::size_t part, std::size_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", whole ? 100.0 * double(part) / double(whole) : 0.0);
  return buf;
}

void write_report(const std::string& path, const std::vector<Result>& rs) {
  std::ofstream out(path);
  std::size_t pass = 0;
  for (const auto& r : rs) pass += r.pass;
  out << "Generated by `onnx_node_tests --report` over the " << rs.size()
      << " node tests of ONNX 1.12 (Debian's libonnx-testdata), on the cpu device: **" << pass
      << " pass (" << percent(pass, rs.size()) << "%)**.\n\n";
  out << "### By operator\n\n| operator | opsets tested | pass | fail |\n|---|---|---|---|\n";
  std::map<std::string, std::tuple<std::set<std::int64_t>, int, int>> by_op;
  for (const auto& r : rs) {
    auto& [opsets, p, f] = by_op[r.op.empty() ? "(none)" : r.op];
    opsets.insert(r.opset);
    (r.pass ? p : f) += 1;
  }
  for (const auto& [op, e] : by_op) {
    const auto& [opsets, p, f] = e;
    std::string os;
    for (auto o : opsets) os += (os.empty() ? "" : ", ") + std::to_string(o);
    out << "| " << op << " | " << os << " | " << p << " | " << f << " |\n";
  }
  out << "\n### Failing tests\n\n| test | operator | opset | reason |\n|---|---|---|---|\n";
  for (const auto& r : rs)
    if (!r.pass)
      out << "| " << r.name << " | " << r.op << " | " << r.opset << " | " << md_escape(r.reason)
          << " |\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/usr/share/libonnx-testdata/data/node", filter, report, device = "cpu";
  std::size_t sample = 1, min_pass = 0;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dir")
      dir = next();
    else if (a == "--filter")
      filter = next();
    else if (a == "--sample")
      sample = std::max<std::size_t>(1, std::stoul(next()));
    else if (a == "--min-pass")
      min_pass = std::stoul(next());
    else if (a == "--report")
      report = next();
    else if (a == "--device")
      device = next();
    else if (a == "--quiet")
      quiet = true;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (!fs::is_directory(dir)) {
    std::printf("SKIPPED: no ONNX node tests at %s (install Debian's libonnx-testdata)\n",
                dir.c_str());
    return min_pass == 0 ? 0 : 77;
  }
  const Device dev = Device::parse(device);
  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") &&
        e.path().filename().string().find(filter) != std::string::npos)
      tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());
  std::vector<Result> results;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < tests.size(); i += sample) {
    Result r;
    r.name = tests[i].filename().string();
    run_test(tests[i], dev, r);
    if (!quiet || !r.pass)
      std::printf("%s %s%s%s\n", r.pass ? "PASS" : "FAIL", r.name.c_str(), r.pass ? "" : ": ",
                  r.reason.c_str());
    results.push_back(std::move(r));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::size_t pass = 0;
  for (const auto& r : results) pass += r.pass;
  std::printf("onnx node tests: %zu of %zu pass (%.1f%%) in %.1f s\n", pass, results.size(),
              results.empty() ? 0.0 : 100.0 * double(pass) / double(results.size()), secs);
  if (!report.empty()) write_report(report, results);
  if (pass < min_pass) {
    std::printf("below the floor: %zu pass, at least %zu expected\n", pass, min_pass);
    return 1;
  }
  return 0;
}
