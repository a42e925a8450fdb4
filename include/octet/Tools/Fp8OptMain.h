//===- Fp8OptMain.h - The fp8-opt driver as a library call ----------------===//
#ifndef OCTET_TOOLS_FP8OPTMAIN_H
#define OCTET_TOOLS_FP8OPTMAIN_H

namespace octet {
/// Parses fp8-opt's command line and runs it; returns the exit code.
int fp8OptMain(int argc, char **argv);
/// The same without LLVM's process set-up (InitLLVM: signal handlers, and llvm_shutdown on the way
/// out): callable again in one process, each call with its own command line (test/tools/octet-batch).
int fp8OptRun(int argc, char **argv);
} // namespace octet

#endif // OCTET_TOOLS_FP8OPTMAIN_H
