//===- InitAll.h - Register everything Octet provides ---------------------===//
//
// One call each, for fp8-opt and for compilers that embed Octet.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_INITALL_H
#define OCTET_INITALL_H

namespace mlir {
class DialectRegistry;
}

namespace octet {
/// The onnx and fp8 dialects plus the upstream dialects Octet's IR uses.
void registerAllDialects(mlir::DialectRegistry &registry);
/// Octet's passes, the recipe pipelines, and the upstream passes fp8-opt offers.
void registerAllPasses();
} // namespace octet

#endif // OCTET_INITALL_H
