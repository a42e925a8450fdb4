//===- OutputFiles.cpp - fp8-opt's diagnostics locations and output files -===//
#include "octet/Tools/OutputFiles.h"

#include "octet/Support/ProtoIO.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/WithColor.h"

#include <functional>

using namespace mlir;

std::string octet::describeLocation(Location loc) {
  std::string name, file;
  unsigned line = 0, col = 0;
  std::function<void(Location)> visit = [&](Location l) {
    if (auto n = l.dyn_cast<NameLoc>()) {
      if (name.empty())
        name = n.getName().str();
      visit(n.getChildLoc());
    } else if (auto f = l.dyn_cast<FileLineColLoc>()) {
      if (file.empty()) {
        file = f.getFilename().str();
        line = f.getLine();
        col = f.getColumn();
      }
    } else if (auto fused = l.dyn_cast<FusedLoc>()) {
      for (Location x : fused.getLocations())
        visit(x);
    } else if (auto cs = l.dyn_cast<CallSiteLoc>()) {
      visit(cs.getCallee());
    }
  };
  visit(loc);
  std::string out = file;
  if (line)
    out += ":" + std::to_string(line) + ":" + std::to_string(col);
  if (!name.empty())
    out += (out.empty() ? "" : ": ") + std::string("node '") + name + "'";
  return out;
}

bool octet::writeOutput(llvm::StringRef path, const std::string &data) {
  if (path == "-") {
    llvm::outs() << data;
    llvm::outs().flush();
    return true;
  }
  llvm::sys::fs::file_status st;
  if (!llvm::sys::fs::status(path, st) && st.type() != llvm::sys::fs::file_type::regular_file &&
      st.type() != llvm::sys::fs::file_type::file_not_found) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec) {
      llvm::WithColor::error(llvm::errs(), "fp8-opt")
          << "cannot write '" << path << "': " << ec.message() << "\n";
      return false;
    }
    os << data;
    return true;
  }
  std::string error;
  if (!octet::proto::writeFileAtomically(path.str(), data, error)) {
    llvm::WithColor::error(llvm::errs(), "fp8-opt")
        << "cannot write '" << path << "': " << error << "\n";
    return false;
  }
  return true;
}
