// RUN: fp8-opt %S/Inputs/mlp.mlir -o /dev/null --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=ao},octet-fp8-report)' | FileCheck %s
// RUN: fp8-opt %S/Inputs/mlp.mlir -o /dev/null --pass-pipeline='builtin.module(octet-raise-layers,octet-fp8-substitute{recipe=te pad-inner-dim=true},octet-fp8-report{format=json})' | FileCheck %s --check-prefix=JSON
// RUN: not fp8-opt %S/Inputs/mlp.mlir -o /dev/null --pass-pipeline='builtin.module(octet-fp8-report{format=xml})' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: fp8-opt %S/Inputs/mlp.mlir -o /dev/null --octet-raise-layers --octet-fp8-substitute='recipe=te pad-inner-dim=true keep-output-layer=false' --octet-fp8-report | FileCheck %s --check-prefix=FLAG

// CHECK-LABEL: FP8 report (recipe ao:tensorwise): 0 of 3 Linear layers in FP8
// CHECK: fc1 4x64x128 high first
// CHECK: fc2 4x128x24 high dims
// CHECK: head 4x24x64 high last
// CHECK: kept 'first', 'last': ao keeps the first and last Linear in high precision, as torchao's policy in Accelerate does; --no-keep-first-last converts them
// CHECK: kept 'dims': K or N is not a multiple of 16
// CHECK: forward GEMM FLOPs: 0.000e+00 in FP8, 1.024e+05 in high precision (0.0% FP8)
// CHECK: Linear weight bytes: 51200 before, 51200 after (1.00x smaller)

// JSON-LABEL: "kept_because": {
// JSON-NEXT: "output": "the output layer (its result reaches no other Linear): FP8 there costs loss in every recipe (docs/BENCHMARKS.md, convergence); --keep-output-layer=false converts it"
// JSON-NEXT: },
// JSON: "layers": [
// JSON: "formats": "E4M3/E4M3/E5M2",
// JSON: "layer": "fc1",
// JSON: "precision": "fp8",
// JSON: "scaling": "delayed per-tensor (history 1024, max, margin 0)",
// JSON: "weight_bytes": 32768,
// JSON-NEXT: "weight_bytes_fp8": 8196
// JSON: "layer": "head",
// JSON: "precision": "high",
// JSON-NEXT: "reason": "output",
// JSON: "fp8_layers": 2,
// JSON: "weight_bytes_after": 18440,
// JSON-NEXT: "weight_bytes_before": 51200

// BAD: octet-fp8-report: format must be 'text' or 'json', got 'xml'

// FLAG-LABEL: FP8 report (recipe te): 3 of 3 Linear layers in FP8
// FLAG-NOT: kept
