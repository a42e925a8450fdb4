//===- octet-batch.cpp - Many fp8-opt and fp8-run command lines in one process ---===//
//
// ONNX's backend node tests (test/tools/onnx_node_tests.py) run about 2,500 command lines of
// fp8-opt and fp8-run on tiny models, and starting a process that maps MLIR and LLVM took most of
// their time (0.09 s each; under ASan 0.11 s). This runs them through the same entry points the
// tools' mains call, one after another in one process:
//
//   octet-batch DIR < commands
//
// Each line of standard input is one command: fields separated by tabs, an ID (a file name), the
// tool (fp8-opt or fp8-run), then its arguments. The command runs with its standard output in
// DIR/ID.out and its standard error in DIR/ID.err; the batch prints "ID start" before and
// "ID exit RC" after it, each line flushed, so that a caller that sees the batch die (a crash) or
// stall (a hang) knows which command it was, and can start another batch after it. Commands of one
// process only: fp8-run's ranks (--nproc-per-node) start /proc/self/exe, which here is the batch.
//
//===----------------------------------------------------------------------===//
#include "octet/Tools/Fp8OptMain.h"
#include "octet/runtime/Fp8RunMain.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <fcntl.h>
#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

/// Standard output and error sent to two files for the life of this object.
class Redirect {
public:
  Redirect(const std::string &out, const std::string &err) {
    flushAll();
    savedOut_ = ::dup(1);
    savedErr_ = ::dup(2);
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ok_ = savedOut_ >= 0 && savedErr_ >= 0 && o >= 0 && e >= 0 && ::dup2(o, 1) >= 0 && ::dup2(e, 2) >= 0;
    if (o >= 0)
      ::close(o);
    if (e >= 0)
      ::close(e);
  }
  ~Redirect() {
    flushAll();
    if (savedOut_ >= 0)
      ::dup2(savedOut_, 1), ::close(savedOut_);
    if (savedErr_ >= 0)
      ::dup2(savedErr_, 2), ::close(savedErr_);
  }
  bool ok() const { return ok_; }

private:
  static void flushAll() {
    llvm::outs().flush();
    llvm::errs().flush();
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
  }
  int savedOut_ = -1, savedErr_ = -1;
  bool ok_ = false;
};

std::vector<std::string> splitTabs(const std::string &line) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
    fields.push_back(line.substr(start, tab - start));
  fields.push_back(line.substr(start));
  return fields;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  if (argc != 2) {
    std::cerr << "usage: octet-batch DIR < commands (each line: ID, tool, arguments; tab-separated)\n";
    return 2;
  }
  const std::string dir = argv[1];
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty())
      continue;
    std::vector<std::string> f = splitTabs(line);
    if (f.size() < 2 || (f[1] != "fp8-opt" && f[1] != "fp8-run")) {
      std::cerr << "octet-batch: error: '" << line << "': want ID, fp8-opt or fp8-run, then arguments\n";
      return 2;
    }
    std::vector<char *> args;
    for (size_t i = 1; i < f.size(); ++i)
      args.push_back(f[i].data());
    args.push_back(nullptr);
    std::cout << f[0] << " start" << std::endl;
    int rc;
    {
      Redirect r(dir + "/" + f[0] + ".out", dir + "/" + f[0] + ".err");
      if (!r.ok())
        rc = 2;
      else if (f[1] == "fp8-opt")
        rc = octet::fp8OptRun(int(args.size() - 1), args.data());
      else
        rc = octet::rt::fp8RunMain(int(args.size() - 1), args.data());
    }
    std::cout << f[0] << " exit " << rc << std::endl;
  }
  return 0;
}
