//===- import_fuzzer.cpp - libFuzzer target over the ONNX importer --------===//
//
// Any bytes: parse as a ModelProto, import, and export what imports. The
// importer must reject bad input with a diagnostic, never crash or hang.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/ONNXExport.h"
#include "octet/Conversion/ONNXImport.h"
#include "octet/InitAll.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry();
    octet::registerAllDialects(*r);
    return r;
  }();
  mlir::MLIRContext ctx(*registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.printOpOnDiagnostic(false);
  mlir::ScopedDiagnosticHandler quiet(&ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  octet::ImportOptions opts;
  opts.fileName = "fuzz.onnx";
  opts.baseDir = "/nonexistent-fuzz-dir"; // external data must fail cleanly
  auto module = octet::importOnnxBuffer(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), &ctx, opts);
  if (module) {
    std::string bytes;
    (void)octet::exportToOnnxBytes(*module, bytes);
  }
  return 0;
}
