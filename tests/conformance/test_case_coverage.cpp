// Every public tensor function has a conformance case. The functions are read from the
// headers' own declarations (ember/tensor/ops.hpp, the public methods of Tensor<D, K> in
// ember/tensor/tensor.hpp, ember/tensor/activation.hpp) by a small declaration scanner, so
// a function added to a header without a case fails here, naming itself; no list of
// functions is kept by hand. The one hand-kept list is kNotOps below: what is genuinely not
// an op, each with its reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "conformance/harness.hpp"

namespace conformance {
namespace {

// ---- the declaration scanner ----
//
// It reads a header as a C++ programmer skims it: comments, string literals and
// preprocessor lines are dropped; braces open scopes (a namespace, a class or struct, or a
// body); in the scope asked for, each declaration (the text up to `;`, `{` or `}` outside
// parentheses) that contains a call-like `name(` at parenthesis depth 0 declares `name`, the
// first such name of the declaration. A class's members count from `public:` on. Macros
// that declare functions are understood from their own #define: in EMBER_UNARY(method, fn)
// each `method(` or `method##_suffix(` of the body declares `<first argument>` or
// `<first argument>_suffix` at every invocation.

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// The identifier ending at s's end (trailing spaces skipped), or "".
std::string trailing_ident(const std::string& s) {
  std::size_t e = s.size();
  while (e > 0 && std::isspace(static_cast<unsigned char>(s[e - 1])) != 0) --e;
  std::size_t b = e;
  while (b > 0 && is_ident(s[b - 1])) --b;
  return s.substr(b, e - b);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Removes preprocessor lines (returning the function-declaring macros: name -> suffixes),
// comments and the contents of string and character literals.
std::string strip(const std::string& src, std::map<std::string, std::set<std::string>>& macros) {
  std::string code;
  std::istringstream lines(src);
  std::string line;
  while (std::getline(lines, line)) {
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] != '#') {
      code += line + '\n';
      continue;
    }
    std::string full = line;
    while (!full.empty() && full.back() == '\\' && std::getline(lines, line)) {
      full.pop_back();
      full += ' ' + line;
    }
    code += '\n';
    // #define NAME(param, ...) body
    std::istringstream d(full.substr(first + 1));
    std::string word;
    d >> word;
    if (word != "define") continue;
    std::string rest;
    std::getline(d, rest);
    const auto open = rest.find('('), close = rest.find(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    const std::string name = trailing_ident(rest.substr(0, open));
    std::string param = rest.substr(open + 1, close - open - 1);
    param = param.substr(0, param.find(','));
    param.erase(std::remove_if(param.begin(), param.end(),
                               [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
                param.end());
    const std::string body = rest.substr(close + 1);
    for (std::size_t at = body.find(param); at != std::string::npos;
         at = body.find(param, at + 1)) {
      if (at > 0 && is_ident(body[at - 1])) continue;
      std::size_t p = at + param.size();
      std::string suffix;
      if (body.compare(p, 2, "##") == 0) {
        p += 2;
        while (p < body.size() && is_ident(body[p])) suffix += body[p++];
      } else if (p < body.size() && is_ident(body[p])) {
        continue;
      }
      while (p < body.size() && body[p] == ' ') ++p;
      if (p < body.size() && body[p] == '(') macros[name].insert(suffix);
    }
  }
  std::string out;
  for (std::size_t i = 0; i < code.size(); ++i) {
    const char c = code[i];
    if (c == '/' && i + 1 < code.size() && code[i + 1] == '/') {
      while (i < code.size() && code[i] != '\n') ++i;
      out += '\n';
    } else if (c == '/' && i + 1 < code.size() && code[i + 1] == '*') {
      i = code.find("*/", i + 2);
      if (i == std::string::npos) break;
      ++i;
    } else if (c == '"' || c == '\'') {
      out += c;
      for (++i; i < code.size() && code[i] != c; ++i) {
        if (code[i] == '\\') ++i;
      }
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

// The public functions declared directly in the scope `kind name` ("namespace ops",
// "class Tensor") of the header at path.
std::set<std::string> declared_functions(const std::string& path, const std::string& kind,
                                         const std::string& name) {
  std::map<std::string, std::set<std::string>> macros;
  const std::string s = strip(read_file(path), macros);
  struct Scope {
    std::string kind, name;
    bool is_public;
  };
  std::vector<Scope> stack;
  std::set<std::string> found;
  std::string decl;
  bool named = false;  // the declaration's first name( was seen
  int paren = 0;
  const auto in_target = [&] {
    return !stack.empty() && stack.back().kind == kind && stack.back().name == name &&
           stack.back().is_public;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (paren == 0 && (c == '{' || c == '}' || c == ';')) {
      if (c == '{') {
        Scope sc{"body", "", true};
        // The last `namespace X`, `class X` or `struct X` of a declaration that names no
        // function opens that scope (`enum class X` opens none).
        std::size_t best = std::string::npos;
        for (const std::string k : {"namespace", "class", "struct"}) {
          for (std::size_t at = named ? std::string::npos : decl.find(k); at != std::string::npos;
               at = decl.find(k, at + 1)) {
            const std::size_t e = at + k.size();
            if ((at > 0 && is_ident(decl[at - 1])) || e >= decl.size() || is_ident(decl[e]) ||
                trailing_ident(decl.substr(0, at)) == "enum")
              continue;
            if (best != std::string::npos && at < best) continue;
            best = at;
            std::size_t p = decl.find_first_not_of(" \t\n", e), q = p;
            while (q < decl.size() && (is_ident(decl[q]) || decl[q] == ':')) ++q;
            std::string n = decl.substr(p, q - p);
            if (const auto colon = n.rfind(':'); colon != std::string::npos)
              n = n.substr(colon + 1);
            sc = Scope{k, n, k != "class"};
          }
        }
        stack.push_back(sc);
      } else if (c == '}') {
        if (!stack.empty()) stack.pop_back();
      }
      decl.clear();
      named = false;
      continue;
    }
    if (c == '(') {
      if (paren == 0 && !named) {
        named = true;
        const std::string id = trailing_ident(decl);
        if (!id.empty() && in_target() && id != name && id != "static_assert" && id != "operator" &&
            !std::isdigit(static_cast<unsigned char>(id[0]))) {
          if (const auto m = macros.find(id); m != macros.end()) {
            // A declaring macro's invocation: names from its first argument, and the
            // invocation is the whole declaration.
            const std::size_t close = s.find(')', i);
            std::string arg = s.substr(i + 1, close - i - 1);
            arg = arg.substr(0, arg.find(','));
            arg.erase(std::remove_if(
                          arg.begin(), arg.end(),
                          [](char ch) { return std::isspace(static_cast<unsigned char>(ch)); }),
                      arg.end());
            for (const std::string& suffix : m->second) found.insert(arg + suffix);
            i = close;
            decl.clear();
            named = false;
            continue;
          }
          found.insert(id);
        }
      }
      ++paren;
    } else if (c == ')') {
      --paren;
    } else if (paren == 0 && c == ':' && (i + 1 >= s.size() || s[i + 1] != ':') &&
               (i == 0 || s[i - 1] != ':')) {
      const std::string id = trailing_ident(decl);
      if (id == "public" || id == "private" || id == "protected") {
        if (!stack.empty()) stack.back().is_public = id == "public";
        decl.clear();
        continue;
      }
    }
    decl += c;
  }
  return found;
}

// What the headers declare that is genuinely not an op, so has no case of its own.
const std::map<std::string, std::string> kNotOps = {
    // accessors and the typed facade's plumbing
    {"shape", "accessor"},
    {"dims", "accessor"},
    {"dtype", "accessor"},
    {"device", "accessor"},
    {"num_elements", "accessor"},
    {"dyn", "accessor: the DynTensor under a Tensor"},
    {"default_dtype", "the device's default dtype of a kind"},
    // host data in and out: every case makes its inputs with from_data and reads its
    // outputs with to_data
    {"from_data", "host data in (every case's inputs)"},
    {"to_data", "host data out (every case's outputs)"},
    {"into_scalar", "host data out of a one-element tensor"},
    {"adopt_host", "hands host memory to a backend, no computation (tests/tensor)"},
    {"empty_host", "a fresh tensor's host bytes for a record load, no computation (tests/record)"},
    {"host_bytes", "a tensor's host bytes read in place for a save, no computation (tests/record)"},
    // autodiff's API: the grad mode and tests/autodiff check it
    {"require_grad", "autodiff API"},
    {"is_require_grad", "autodiff API"},
    {"detach", "autodiff API"},
    {"backward", "autodiff API"},
    {"grad", "autodiff API"},
    {"grad_remove", "autodiff API"},
    {"inner", "autodiff API"},
    {"from_inner", "autodiff API"},
    // The IR-level entries: each UnaryFn / BinaryFn has a case
    // (ConformanceCases.EveryElementwiseFunctionHasACase), and each ReduceFn / ScanFn its
    // named methods (sum_dim, sum_dims, cumsum, ...), which are checked here.
    {"unary", "IR-level entry (every UnaryFn has a case)"},
    {"binary", "IR-level entry (every BinaryFn has a case)"},
    {"binary_scalar", "IR-level entry (the <fn>_scalar methods have cases)"},
    {"rbinary_scalar", "IR-level entry (rsub, rdiv have cases)"},
    {"reduce", "IR-level entry (the <fn>_dim methods have cases)"},
    {"reduce_all", "IR-level entry (the full reductions have cases)"},
    {"reduce_dims", "dispatch over ReduceFn (the <fn>_dims methods have cases)"},
    {"reduce_dims_squeeze", "dispatch over ReduceFn (the <fn>_dims_squeeze methods have cases)"},
    {"scan", "IR-level entry (cumsum, cumprod, cummax, cummin have cases)"},
    // shape arithmetic for other functions' validation
    {"broadcast_shapes", "shape helper"},
    {"normalize_dim", "shape helper"},
    {"interpolate_mode",
     "parses PyTorch's mode names (the interpolate_<mode> cases run each mode)"},
};

struct Header {
  const char* path;  // under the source tree
  const char* kind;
  const char* scope;
};
const Header kHeaders[] = {
    {"include/ember/tensor/ops.hpp", "namespace", "ops"},
    {"include/ember/tensor/tensor.hpp", "class", "Tensor"},
    {"include/ember/tensor/activation.hpp", "namespace", "activation"},
    {"include/ember/tensor/module_ops.hpp", "namespace", "module_ops"},
};

std::set<std::string> case_names() {
  std::set<std::string> names;
  for (const Case& c : all_cases()) {
    names.insert(c.fn);
    names.insert(c.also.begin(), c.also.end());
  }
  return names;
}

}  // namespace

// The scanner reads what the headers declare: a sample of each kind of declaration
// (plain, template, overloaded, macro-made with and without a suffix, in a struct or not).
TEST(ConformanceCoverage, ScannerFindsTheHeadersFunctions) {
  const std::string root = EMBER_SOURCE_DIR "/";
  const auto ops = declared_functions(root + kHeaders[0].path, "namespace", "ops");
  for (const char* f : {"matmul", "logsumexp", "var_mean", "vector_norm", "svd", "grid_sample",
                        "split_sizes", "normalize_dim"}) {
    EXPECT_TRUE(ops.count(f)) << "ops.hpp: " << f << " not found";
  }
  EXPECT_FALSE(ops.count("Range")) << "a struct's constructor is not a function of ops";
  EXPECT_FALSE(ops.count("SvdResult"));
  const auto tensor = declared_functions(root + kHeaders[1].path, "class", "Tensor");
  for (const char* f :
       {"exp", "add", "add_scalar", "equal_elem", "sum", "sum_dim", "sum_dims", "sum_dims_squeeze",
        "reshape", "diag", "max_dim_with_indices", "zeros", "require_grad"}) {
    EXPECT_TRUE(tensor.count(f)) << "tensor.hpp: " << f << " not found";
  }
  for (const char* f :
       {"Tensor", "same_kind", "dyns", "wrap_all", "static_assert", "EMBER_CHECK"}) {
    EXPECT_FALSE(tensor.count(f)) << "tensor.hpp: " << f << " is not a public method";
  }
  const auto act = declared_functions(root + kHeaders[2].path, "namespace", "activation");
  for (const char* f : {"relu", "gelu_tanh", "softplus", "hard_sigmoid", "quiet_softmax"}) {
    EXPECT_TRUE(act.count(f)) << "activation.hpp: " << f << " not found";
  }
}

// Every public function of the headers is some case's fn (or in its also), or is listed
// in kNotOps with the reason it is not an op; and every kNotOps entry is still declared.
TEST(ConformanceCoverage, EveryPublicFunctionHasACase) {
  const std::string root = EMBER_SOURCE_DIR "/";
  const std::set<std::string> cases = case_names();
  std::set<std::string> declared;
  for (const Header& h : kHeaders) {
    for (const std::string& f : declared_functions(root + h.path, h.kind, h.scope)) {
      declared.insert(f);
      EXPECT_TRUE(cases.count(f) || kNotOps.count(f))
          << h.path << ": " << f
          << " has no conformance case: add one (Case::fn, or Case::also where a case "
             "already runs it under another name), or list it in kNotOps with the reason "
             "it is not an op";
    }
  }
  for (const auto& [f, why] : kNotOps) {
    EXPECT_TRUE(declared.count(f)) << "kNotOps lists " << f << ", which no header declares";
  }
}

}  // namespace conformance
