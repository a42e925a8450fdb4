//===- Help.h - fp8-opt --help in a newcomer's order ------------*- C++ -*-===//
//
// LLVM prints option categories in name order, each description on one line however long. fp8-opt's
// --help instead lists Octet's groups in the order a newcomer needs them, each option with a short form of its
// description wrapped to a width; --help-hidden keeps LLVM's listing with the full texts.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace octet {

/// The line --help shows for option `name`: its short form, or its whole description `desc`
/// where it has none.
std::string helpSummary(llvm::StringRef name, llvm::StringRef desc);

/// Octet's options, group by group in `order`, then LLVM's --help, --help-hidden and --version;
/// no line wider than `width` columns (a word longer than a line is never split).
void printGroupedHelp(llvm::raw_ostream &os, llvm::StringRef overview,
                      llvm::ArrayRef<const llvm::cl::OptionCategory *> order, unsigned width = 100);

} // namespace octet
