//===- import_fuzzer.cpp - libFuzzer target over the ONNX importer --------===//
//
// Any bytes: parse as a ModelProto, import, and export what imports. The
// importer must reject bad input with a diagnostic, never crash or hang. A model
// with symbolic input dimensions is imported again with each bound to 2
// (--input-shape), which evaluates the dimension expressions its types name.
//
//===----------------------------------------------------------------------===//
#include "octet/Conversion/ONNXExport.h"
#include "octet/Conversion/ONNXImport.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

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
  if (!module)
    return 0;
  std::string bytes;
  (void)octet::exportToOnnxBytes(*module, bytes);
  for (auto f : module->getOps<mlir::func::FuncOp>())
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto t = f.getArgument(i).getType().dyn_cast<mlir::RankedTensorType>();
      auto name = f.getArgAttrOfType<mlir::StringAttr>(i, octet::onnx_dialect::kNameAttr);
      if (!t || t.hasStaticShape() || !name)
        continue;
      std::vector<int64_t> dims;
      for (int64_t d : t.getShape())
        dims.push_back(mlir::ShapedType::isDynamic(d) ? 2 : d);
      opts.inputShapes[name.str()] = dims;
    }
  if (!opts.inputShapes.empty())
    (void)octet::importOnnxBuffer(llvm::StringRef(reinterpret_cast<const char *>(data), size), &ctx, opts);
  return 0;
}
