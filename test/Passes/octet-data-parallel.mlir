// RUN: fp8-opt %s -split-input-file -verify-diagnostics --octet-data-parallel | FileCheck %s
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-data-parallel{fp8-gradients=true num-processes=4})' | FileCheck %s --check-prefix=FP8
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-data-parallel{fp8-gradients=true fp8-format=e5m2})' | FileCheck %s --check-prefix=E5M2
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-data-parallel{bucket-bytes=64})' | FileCheck %s --check-prefix=BUCKET
// RUN: not fp8-opt %s -o /dev/null --pass-pipeline='builtin.module(octet-data-parallel{fp8-format=e3m4})' 2>&1 | FileCheck %s --check-prefix=BADFORMAT
// BADFORMAT: octet-data-parallel: fp8-format='e3m4' is not valid; use e4m3 or e5m2

// The loss becomes its mean over ranks and every gradient its average; other results stay. The
// module says the plan trains data-parallel.
// CHECK-LABEL: module attributes {octet.data_parallel, octet.training = {data_parallel = "true"}}
// CHECK-LABEL: func.func @gradients
// CHECK-DAG: %[[L:.+]] = fp8.all_reduce %arg0 {reduction = #fp8.reduction<avg>} : tensor<f32> -> tensor<f32>
// CHECK-DAG: %[[GW:.+]] = fp8.all_reduce %arg1 {reduction = #fp8.reduction<avg>} : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK-DAG: %[[GB:.+]] = fp8.all_reduce %arg2 {reduction = #fp8.reduction<avg>} : tensor<4xbf16> -> tensor<4xbf16>
// CHECK: return %[[L]], %[[GW]], %[[GB]], %arg3
// With fp8-gradients, a gradient of a weight no FP8 Linear reads still travels in float32.
// FP8-LABEL: module attributes {octet.data_parallel, octet.training = {data_parallel = "true", num_processes = "4"}}
// FP8-LABEL: func.func @gradients
// FP8-NOT: fp8.cast
// FP8: return
module {
func.func @gradients(%l: tensor<f32>, %gw: tensor<8x4xf32>, %gb: tensor<4xbf16>, %other: tensor<3xf32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<8x4xf32> {octet.grad_of = "w", onnx.name = "w.grad"},
        tensor<4xbf16> {octet.grad_of = "b", onnx.name = "b.grad"},
        tensor<3xf32> {onnx.name = "other"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<8x4xf32>
  %b = onnx.initializer "b" = dense<0.0> : tensor<4xbf16>
  return %l, %gw, %gb, %other : tensor<f32>, tensor<8x4xf32>, tensor<4xbf16>, tensor<3xf32>
}
}

// -----

// MS-AMP O1/O2 (fp8-gradients): the gradient of an FP8 Linear's weight travels as FP8 codes (E4M3 by
// default: the sum of the ranks' codes needs its third mantissa bit; fp8-format=e5m2 for range). The
// ranks agree on the scale through an all-reduce(max) of the amax, cast after dividing by the world
// size (the scale_inv times it), sum the codes and dequantize with the shared scale; the result is
// marked as held in FP8 so the optimizer does not quantize it again. Without the option it is an
// average in float32.
// FP8-LABEL: func.func @fp8_weight
// FP8-SAME: octet.grad_storage = f8E4M3FN
// FP8: %[[A:.+]] = fp8.amax %arg1 : tensor<16x8xf32> -> tensor<f32>
// FP8-NEXT: %[[GA:.+]] = fp8.all_reduce %[[A]] {reduction = #fp8.reduction<max>}
// FP8-NEXT: %{{.+}}, %[[SI:.+]] = fp8.dynamic_scale %[[GA]] {format = f8E4M3FN, power_of_two = true}
// FP8-NEXT: %[[N:.+]] = fp8.world_size : tensor<f32>
// FP8-NEXT: %[[SIN:.+]] = onnx.Mul %[[SI]], %[[N]]
// FP8-NEXT: %[[Q:.+]] = fp8.cast %arg1, %[[SIN]] : tensor<16x8xf32>, tensor<f32> -> tensor<16x8xf8E4M3FN>
// FP8-NEXT: %[[S:.+]] = fp8.all_reduce %[[Q]], %[[SI]] : tensor<16x8xf8E4M3FN>, tensor<f32> -> tensor<16x8xf8E4M3FN>
// FP8-NEXT: %[[D:.+]] = fp8.dequantize %[[S]], %[[SI]] : tensor<16x8xf8E4M3FN>, tensor<f32> -> tensor<16x8xf32>
// FP8-NEXT: return %{{.+}}, %[[D]]
// E5M2-LABEL: func.func @fp8_weight
// E5M2-SAME: octet.grad_storage = f8E5M2
// E5M2: fp8.dynamic_scale %{{.+}} {format = f8E5M2, power_of_two = true}
// E5M2: fp8.all_reduce %{{.+}}, %{{.+}} : tensor<16x8xf8E5M2>, tensor<f32> -> tensor<16x8xf8E5M2>
// CHECK-LABEL: func.func @fp8_weight
// CHECK-NOT: octet.grad_storage
// CHECK: fp8.all_reduce %arg1 {reduction = #fp8.reduction<avg>} : tensor<16x8xf32>
func.func @fp8_weight(%x: tensor<4x16xf32>, %gw: tensor<16x8xf32>)
    -> (tensor<4x8xf32> {onnx.name = "y"}, tensor<16x8xf32> {octet.grad_of = "fc.weight", onnx.name = "fc.weight.grad"}) {
  %w = onnx.initializer "fc.weight" = dense<0.5> : tensor<16x8xf32>
  %y = fp8.linear "fc" %x, %w {recipe = "msamp", scaling = #fp8.scaling<dynamic>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y, %gw : tensor<4x8xf32>, tensor<16x8xf32>
}

// -----

// Two FP8 Linears' gradients: their amaxes share one all-reduce (max), concatenated, and each
// takes its own back (exact: the scales one all-reduce each would give); then each is cast with
// its own scale and summed as FP8 codes on its own.
// FP8-LABEL: func.func @two_fp8_weights
// FP8: %[[A1:.+]] = fp8.amax %arg1
// FP8-NEXT: %[[A2:.+]] = fp8.amax %arg2
// FP8: %[[C:.+]] = onnx.Concat %{{.+}}, %{{.+}} {axis = 0 : si64} : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
// FP8-NEXT: %[[M:.+]] = fp8.all_reduce %[[C]] {reduction = #fp8.reduction<max>} : tensor<2xf32> -> tensor<2xf32>
// FP8: %[[M1:.+]] = onnx.Gather %[[M]], %{{.+}} {axis = 0 : si64} : (tensor<2xf32>, tensor<i64>) -> tensor<f32>
// FP8: %[[M2:.+]] = onnx.Gather %[[M]], %{{.+}} {axis = 0 : si64} : (tensor<2xf32>, tensor<i64>) -> tensor<f32>
// FP8: fp8.dynamic_scale %[[M1]]
// FP8: fp8.all_reduce %{{.+}}, %{{.+}} : tensor<16x8xf8E4M3FN>
// FP8: fp8.dynamic_scale %[[M2]]
// FP8: fp8.all_reduce %{{.+}}, %{{.+}} : tensor<8x8xf8E4M3FN>
// FP8-NOT: reduction<max>
// FP8: return
func.func @two_fp8_weights(%x: tensor<4x16xf32>, %gw: tensor<16x8xf32>, %gv: tensor<8x8xf32>)
    -> (tensor<4x8xf32> {onnx.name = "y"}, tensor<16x8xf32> {octet.grad_of = "fc.weight", onnx.name = "fc.weight.grad"},
        tensor<8x8xf32> {octet.grad_of = "fc2.weight", onnx.name = "fc2.weight.grad"}) {
  %w = onnx.initializer "fc.weight" = dense<0.5> : tensor<16x8xf32>
  %v = onnx.initializer "fc2.weight" = dense<0.5> : tensor<8x8xf32>
  %h = fp8.linear "fc" %x, %w {recipe = "msamp", scaling = #fp8.scaling<dynamic>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %y = fp8.linear "fc2" %h, %v {recipe = "msamp", scaling = #fp8.scaling<dynamic>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %y, %gw, %gv : tensor<4x8xf32>, tensor<16x8xf32>, tensor<8x8xf32>
}

// -----

// expected-error @+1 {{octet-data-parallel: the function has no gradients; run octet-autodiff first}}
func.func @no_gradients(%x: tensor<4xf32>) -> (tensor<4xf32> {onnx.name = "y"}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{octet-data-parallel: the gradient of 'n' has type 'tensor<4xi64>'; only float16/bfloat16/float32 gradients can be all-reduced}}
func.func @integer_gradient(%g: tensor<4xi64>) -> (tensor<4xi64> {octet.grad_of = "n"}) {
  return %g : tensor<4xi64>
}

// -----

// A computed gradient is all-reduced right after its definition (where octet-overlap-collectives
// can start it), not at the return.
// CHECK-LABEL: func.func @computed
// CHECK: %[[G:.+]] = onnx.Mul %arg0, %arg0
// CHECK-NEXT: fp8.all_reduce %[[G]] {reduction = #fp8.reduction<avg>}
// CHECK-NEXT: onnx.Exp
func.func @computed(%x: tensor<4xf32>) -> (tensor<4xf32> {octet.grad_of = "w"}, tensor<4xf32> {onnx.name = "e"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<4xf32>
  %g = onnx.Mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e = onnx.Exp %x : (tensor<4xf32>) -> tensor<4xf32>
  return %g, %e : tensor<4xf32>, tensor<4xf32>
}

// -----

// Gradients below bucket-bytes share an all-reduce, in the order they are complete: flattened and
// concatenated after the last of them, reduced, and sliced back before the return; one at or above
// it goes alone (bucket-bytes=64: 4 + 8 floats share, the 16-float one is alone).
// BUCKET-LABEL: func.func @buckets
// BUCKET: %[[A:.+]] = onnx.Mul %arg0, %arg0
// BUCKET: %[[BIG:.+]] = onnx.Neg %arg2
// BUCKET-NEXT: %[[RBIG:.+]] = fp8.all_reduce %[[BIG]] {reduction = #fp8.reduction<avg>} : tensor<16xf32>
// BUCKET: %[[B:.+]] = onnx.Exp %arg1
// BUCKET: %[[FA:.+]] = onnx.Reshape %[[A]]
// BUCKET: %[[FB:.+]] = onnx.Reshape %[[B]]
// BUCKET-NEXT: %[[CAT:.+]] = onnx.Concat %[[FA]], %[[FB]] {axis = 0 : si64} : (tensor<4xf32>, tensor<8xf32>) -> tensor<12xf32>
// BUCKET-NEXT: %[[R:.+]] = fp8.all_reduce %[[CAT]] {reduction = #fp8.reduction<avg>} : tensor<12xf32> -> tensor<12xf32>
// BUCKET: onnx.Slice %[[R]]
// BUCKET: onnx.Slice %[[R]]
// BUCKET: return
// BUCKET-NOT: fp8.all_reduce
func.func @buckets(%x: tensor<4xf32>, %y: tensor<2x4xf32>, %z: tensor<16xf32>)
    -> (tensor<4xf32> {octet.grad_of = "a"}, tensor<2x4xf32> {octet.grad_of = "b"}, tensor<16xf32> {octet.grad_of = "c"}) {
  %a = onnx.Mul %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %c = onnx.Neg %z : (tensor<16xf32>) -> tensor<16xf32>
  %b = onnx.Exp %y : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %a, %b, %c : tensor<4xf32>, tensor<2x4xf32>, tensor<16xf32>
}
