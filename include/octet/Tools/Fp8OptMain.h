//===- Fp8OptMain.h - The fp8-opt driver as a library call ----------------===//
#ifndef OCTET_TOOLS_FP8OPTMAIN_H
#define OCTET_TOOLS_FP8OPTMAIN_H

namespace octet {
/// Parses fp8-opt's command line and runs it; returns the exit code.
int fp8OptMain(int argc, char **argv);
} // namespace octet

#endif // OCTET_TOOLS_FP8OPTMAIN_H
