// Runs a piece of code in a forked child with a time limit, so that a crash, a hang or an
// abort fails the calling test (or fuzz case) instead of ending the test binary. The
// child reports one line through a pipe: "ok: <text>", "error: <ember::Error message>" or
// "foreign: <another exception>"; the parent adds "crash: signal N", "timeout" and
// "exit N" for a child that ended without reporting.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>

#include <ember/base/error.hpp>

namespace ember::testing {

struct Outcome {
  std::string kind;  // ok, error, foreign, crash, timeout, exit
  std::string text;  // what the child reported, or how it ended
  bool ok() const { return kind == "ok"; }
  bool error() const { return kind == "error"; }
  std::string str() const { return kind + ": " + text; }
};

inline Outcome run_isolated(const std::function<std::string()>& f, unsigned seconds = 30) {
  int fds[2];
  if (pipe(fds) != 0) return {"exit", "pipe failed"};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return {"exit", "fork failed"};
  if (pid == 0) {
    close(fds[0]);
    alarm(seconds);  // SIGALRM ends a hang
    std::string r;
    try {
      r = "ok\n" + f();
    } catch (const Error& e) {
      r = std::string("error\n") + e.what();
    } catch (const std::exception& e) {
      r = std::string("foreign\n") + typeid(e).name() + ": " + e.what();
    } catch (...) {
      r = "foreign\nan exception of unknown type";
    }
    for (std::size_t off = 0; off < r.size();) {
      const ssize_t n = write(fds[1], r.data() + off, r.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGALRM) return {"timeout", "no answer within " + std::to_string(seconds) + " s"};
    return {"crash", "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")"};
  }
  const std::size_t nl = out.find('\n');
  if (nl == std::string::npos) {
    return {"exit", "status " + std::to_string(WEXITSTATUS(status)) + " without a report: " + out};
  }
  return {out.substr(0, nl), out.substr(nl + 1)};
}

}  // namespace ember::testing
