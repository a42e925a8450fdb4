//===- Fp8RunMain.h - The fp8-run driver ------------------------*- C++ -*-===//
#ifndef OCTET_RUNTIME_FP8RUNMAIN_H
#define OCTET_RUNTIME_FP8RUNMAIN_H

namespace octet::rt {
/// The whole fp8-run tool; tools/fp8-run.cpp only calls this.
int fp8RunMain(int argc, char **argv);
} // namespace octet::rt

#endif
