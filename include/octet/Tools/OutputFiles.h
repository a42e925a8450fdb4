//===- OutputFiles.h - fp8-opt's diagnostics locations and output files -*- C++ -*-===//
#ifndef OCTET_TOOLS_OUTPUTFILES_H
#define OCTET_TOOLS_OUTPUTFILES_H

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace octet {
/// "file: 'node'" / "file:line:col" / "file" for one-line diagnostics.
std::string describeLocation(mlir::Location loc);
/// Writes the result: stdout for "-", in place for devices like /dev/null, otherwise atomically
/// (temporary, fsync, rename) so nothing half-written stays. False, with one line said, if it
/// cannot.
bool writeOutput(llvm::StringRef path, const std::string &data);
} // namespace octet

#endif // OCTET_TOOLS_OUTPUTFILES_H
