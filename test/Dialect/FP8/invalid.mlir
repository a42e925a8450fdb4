// RUN: fp8-opt %s -split-input-file -verify-diagnostics

func.func @cast_shape(%x: tensor<16x64xf32>, %s: tensor<f32>) -> tensor<16x32xf8E4M3FN> {
  // expected-error @+1 {{input and result shapes differ}}
  %q = fp8.cast %x, %s : tensor<16x64xf32>, tensor<f32> -> tensor<16x32xf8E4M3FN>
  return %q : tensor<16x32xf8E4M3FN>
}

// -----

func.func @cast_scale(%x: tensor<16x64xf32>, %s: tensor<64xf32>) -> tensor<16x64xf8E4M3FN> {
  // expected-error @+1 {{scale_inv must be per-tensor (0-d) or per-row ([..., 1])}}
  %q = fp8.cast %x, %s : tensor<16x64xf32>, tensor<64xf32> -> tensor<16x64xf8E4M3FN>
  return %q : tensor<16x64xf8E4M3FN>
}

// -----

func.func @cast_rows(%x: tensor<16x64xf32>, %s: tensor<8x1xf32>) -> tensor<16x64xf8E4M3FN> {
  // expected-error @+1 {{scale_inv shape 'tensor<8x1xf32>' is not per-row for 'tensor<16x64xf32>'}}
  %q = fp8.cast %x, %s : tensor<16x64xf32>, tensor<8x1xf32> -> tensor<16x64xf8E4M3FN>
  return %q : tensor<16x64xf8E4M3FN>
}

// -----

func.func @dequantize_shape(%q: tensor<4xf8E5M2>, %s: tensor<f32>) -> tensor<8xf32> {
  // expected-error @+1 {{input and result shapes differ}}
  %x = fp8.dequantize %q, %s : tensor<4xf8E5M2>, tensor<f32> -> tensor<8xf32>
  return %x : tensor<8xf32>
}

// -----

func.func @amax_tensor(%x: tensor<16x64xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{a per-tensor amax must be 0-d}}
  %a = fp8.amax %x : tensor<16x64xf32> -> tensor<16xf32>
  return %a : tensor<16xf32>
}

// -----

func.func @amax_rows(%x: tensor<16x64xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{rowwise amax must have shape [..., 1] matching the input}}
  %a = fp8.amax %x {rowwise = true} : tensor<16x64xf32> -> tensor<16xf32>
  return %a : tensor<16xf32>
}

// -----

func.func @amax_rank0(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{rowwise amax needs an input of rank >= 1}}
  %a = fp8.amax %x {rowwise = true} : tensor<f32> -> tensor<f32>
  return %a : tensor<f32>
}

// -----

func.func @history_rank(%h: tensor<4x4xf32>, %s: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{history must be a non-empty 1-D tensor}}
  %h2, %n, %ni = fp8.delayed_scale %h, %s, %s {format = f8E4M3FN} : tensor<4x4xf32>, tensor<f32>, tensor<f32>
  return %n : tensor<f32>
}

// -----

func.func @history_scale(%h: tensor<16xf32>, %s: tensor<2xf32>, %a: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{scales and amax must be 0-d}}
  %h2, %n, %ni = fp8.delayed_scale %h, %s, %a {format = f8E4M3FN} : tensor<16xf32>, tensor<2xf32>, tensor<f32>
  return %n : tensor<2xf32>
}

// -----

func.func @margin(%h: tensor<16xf32>, %s: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{margin must be >= 0, got -1}}
  %h2, %n, %ni = fp8.delayed_scale %h, %s, %s {format = f8E5M2, margin = -1 : si64} : tensor<16xf32>, tensor<f32>, tensor<f32>
  return %n : tensor<f32>
}

// -----

func.func @format(%h: tensor<16xf32>, %s: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{format must be f8E4M3FN or f8E5M2, got 'f16'}}
  %h2, %n, %ni = fp8.delayed_scale %h, %s, %s {format = f16} : tensor<16xf32>, tensor<f32>, tensor<f32>
  return %n : tensor<f32>
}

// -----

func.func @eps(%a: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{eps must be positive}}
  %s, %si = fp8.dynamic_scale %a {format = f8E4M3FN, eps = 0.0 : f32} : tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @e5m2_both(%a: tensor<16x64xf8E5M2>, %b: tensor<64x32xf8E5M2>, %s: tensor<f32>) -> tensor<16x32xbf16> {
  // expected-error @+1 {{E5M2 x E5M2 is not supported by FP8 tensor cores}}
  %d = fp8.gemm %a, %b, %s, %s : (tensor<16x64xf8E5M2>, tensor<64x32xf8E5M2>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
  return %d : tensor<16x32xbf16>
}

// -----

func.func @gemm_k(%a: tensor<16x64xf8E4M3FN>, %b: tensor<32x32xf8E4M3FN>, %s: tensor<f32>) -> tensor<16x32xbf16> {
  // expected-error @+1 {{contraction dimensions differ: K=64 vs K=32}}
  %d = fp8.gemm %a, %b, %s, %s : (tensor<16x64xf8E4M3FN>, tensor<32x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
  return %d : tensor<16x32xbf16>
}

// -----

func.func @gemm_b_rank(%a: tensor<16x64xf8E4M3FN>, %b: tensor<2x64x32xf8E4M3FN>, %s: tensor<f32>) -> tensor<16x32xbf16> {
  // expected-error @+1 {{B must be 2-D}}
  %d = fp8.gemm %a, %b, %s, %s : (tensor<16x64xf8E4M3FN>, tensor<2x64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
  return %d : tensor<16x32xbf16>
}

// -----

func.func @gemm_a_rank(%a: tensor<64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %s: tensor<f32>) -> tensor<32xbf16> {
  // expected-error @+1 {{A must have rank >= 2}}
  %d = fp8.gemm %a, %b, %s, %s : (tensor<64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<32xbf16>
  return %d : tensor<32xbf16>
}

// -----

func.func @gemm_fp8_out(%a: tensor<16x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %s: tensor<f32>) -> tensor<16x32xf8E4M3FN> {
  // expected-error @+1 {{an FP8 output needs a d_scale operand}}
  %d = fp8.gemm %a, %b, %s, %s : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xf8E4M3FN>
  return %d : tensor<16x32xf8E4M3FN>
}

// -----

func.func @gemm_d_scale(%a: tensor<16x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %s: tensor<f32>) -> tensor<16x32xbf16> {
  // expected-error @+1 {{d_scale is only meaningful for an FP8 output}}
  %d = fp8.gemm %a, %b, %s, %s d_scale %s : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
  return %d : tensor<16x32xbf16>
}

// -----

func.func @gemm_amax(%a: tensor<16x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %s: tensor<f32>) -> tensor<16x32xbf16> {
  // expected-error @+1 {{with_amax requires exactly one d_amax result}}
  %d = fp8.gemm %a, %b, %s, %s {with_amax = true} : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>) -> tensor<16x32xbf16>
  return %d : tensor<16x32xbf16>
}

// -----

func.func @gemm_scales(%a: tensor<16x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %s: tensor<f32>, %r: tensor<32x1xf32>) -> tensor<16x32xbf16> {
  // expected-error @+1 {{b_scale_inv must be per tensor (0-d) or per row of B stored [N, K]}}
  %d = fp8.gemm %a, %b, %s, %r : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<32x1xf32>) -> tensor<16x32xbf16>
  return %d : tensor<16x32xbf16>
}

// -----

func.func @gemm_row_scale_a(%a: tensor<16x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %s: tensor<f32>, %r: tensor<8x1xf32>) -> tensor<16x32xbf16> {
  // expected-error @+1 {{a_scale_inv must be per tensor (0-d) or per row of a 2-D A ([M, 1])}}
  %d = fp8.gemm %a, %b, %r, %s : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<8x1xf32>, tensor<f32>) -> tensor<16x32xbf16>
  return %d : tensor<16x32xbf16>
}

// -----

func.func @delayed_interval(%h: tensor<16xf32>, %s: tensor<f32>, %a: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{interval must be >= 1}}
  %h2, %s2, %si = fp8.delayed_scale %h, %s, %a {format = f8E4M3FN, interval = 0 : si64} : tensor<16xf32>, tensor<f32>, tensor<f32>
  return %s2 : tensor<f32>
}

// -----

func.func @linear_state(%x: tensor<16x64xf32>, %w: tensor<64x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{delayed scaling takes 6 state operands}}
  %y = fp8.linear "fc" %x, %w {recipe = "te", scaling = #fp8.scaling<delayed>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2} : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// -----

func.func @linear_rowwise(%x: tensor<16x64xf32>, %w: tensor<64x32xf32>, %h: tensor<16xf32>, %s: tensor<f32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{rowwise scales need dynamic scaling}}
  %y = fp8.linear "fc" %x, %w state(%h, %s, %s, %h, %s, %s) {recipe = "te", rowwise = true, scaling = #fp8.scaling<delayed>, input_format = f8E4M3FN, weight_format = f8E4M3FN, grad_format = f8E5M2} : (tensor<16x64xf32>, tensor<64x32xf32>, tensor<16xf32>, tensor<f32>, tensor<f32>, tensor<16xf32>, tensor<f32>, tensor<f32>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// -----

func.func @linear_formats(%x: tensor<16x64xf32>, %w: tensor<64x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{input and weight cannot both be E5M2}}
  %y = fp8.linear "fc" %x, %w {recipe = "ao", scaling = #fp8.scaling<dynamic>, input_format = f8E5M2, weight_format = f8E5M2, grad_format = f8E5M2} : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// -----

func.func @all_reduce_types(%q: tensor<64xf8E5M2>, %s: tensor<f32>) -> tensor<64xf8E4M3FN> {
  // expected-error @+1 {{input and result types must match}}
  %r = fp8.all_reduce %q, %s : tensor<64xf8E5M2>, tensor<f32> -> tensor<64xf8E4M3FN>
  return %r : tensor<64xf8E4M3FN>
}

// -----

func.func @all_reduce_scale(%q: tensor<64xf8E5M2>, %s: tensor<4xf32>) -> tensor<64xf8E5M2> {
  // expected-error @+1 {{scale_inv must be per-tensor (0-d)}}
  %r = fp8.all_reduce %q, %s : tensor<64xf8E5M2>, tensor<4xf32> -> tensor<64xf8E5M2>
  return %r : tensor<64xf8E5M2>
}

// -----

func.func @all_reduce_fp8_needs_scale(%q: tensor<64xf8E5M2>) -> tensor<64xf8E5M2> {
  // expected-error @+1 {{an FP8 input needs its scale_inv}}
  %r = fp8.all_reduce %q : tensor<64xf8E5M2> -> tensor<64xf8E5M2>
  return %r : tensor<64xf8E5M2>
}

// -----

func.func @all_reduce_high_no_scale(%x: tensor<64xf32>, %s: tensor<f32>) -> tensor<64xf32> {
  // expected-error @+1 {{a high-precision input takes no scale_inv}}
  %r = fp8.all_reduce %x, %s : tensor<64xf32>, tensor<f32> -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

func.func @all_reduce_fp8_avg(%q: tensor<64xf8E5M2>, %s: tensor<f32>) -> tensor<64xf8E5M2> {
  // expected-error @+1 {{an FP8 payload cannot be averaged by the collective}}
  %r = fp8.all_reduce %q, %s {reduction = #fp8.reduction<avg>} : tensor<64xf8E5M2>, tensor<f32> -> tensor<64xf8E5M2>
  return %r : tensor<64xf8E5M2>
}

// -----

func.func @all_reduce_start_readers(%x: tensor<64xf32>) -> tensor<64xf32> {
  // expected-error @+1 {{its result is in flight: only fp8.all_reduce_done may read it}}
  %f = fp8.all_reduce_start %x : tensor<64xf32> -> tensor<64xf32>
  %y = onnx.Neg %f : (tensor<64xf32>) -> tensor<64xf32>
  return %y : tensor<64xf32>
}

// -----

func.func @all_reduce_done_of_nothing(%x: tensor<64xf32>) -> tensor<64xf32> {
  // expected-error @+1 {{waits for a collective's start}}
  %r = fp8.all_reduce_done %x : tensor<64xf32> -> tensor<64xf32>
  return %r : tensor<64xf32>
}

// -----

func.func @all_reduce_start_fp8_avg(%q: tensor<64xf8E4M3FN>, %s: tensor<f32>) -> tensor<64xf8E4M3FN> {
  // expected-error @+1 {{an FP8 payload cannot be averaged by the collective}}
  %f = fp8.all_reduce_start %q, %s {reduction = #fp8.reduction<avg>} : tensor<64xf8E4M3FN>, tensor<f32> -> tensor<64xf8E4M3FN>
  %r = fp8.all_reduce_done %f : tensor<64xf8E4M3FN> -> tensor<64xf8E4M3FN>
  return %r : tensor<64xf8E4M3FN>
}

// -----

func.func @cast_amax_rowwise(%x: tensor<16x64xf32>, %s: tensor<f32>) -> tensor<16x1xf32> {
  // expected-error @+1 {{amax must be 0-d (per tensor), got 'tensor<16x1xf32>'}}
  %q, %a = fp8.cast_amax %x, %s : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<16x1xf32>
  return %a : tensor<16x1xf32>
}

// -----

func.func @cast_amax_shape(%x: tensor<16x64xf32>, %s: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{input and result shapes differ}}
  %q, %a = fp8.cast_amax %x, %s : tensor<16x64xf32>, tensor<f32> -> tensor<16x32xf8E4M3FN>, tensor<f32>
  return %a : tensor<f32>
}

// -----

func.func @cast_amax_transposed_shape(%x: tensor<2x8x64xf32>, %s: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{transposed must be [64, 16] (the input as 2-D, transposed), got 'tensor<16x64xf8E4M3FN>'}}
  %q, %a, %t = fp8.cast_amax %x, %s : tensor<2x8x64xf32>, tensor<f32> -> tensor<2x8x64xf8E4M3FN>, tensor<f32>, tensor<16x64xf8E4M3FN>
  return %a : tensor<f32>
}

// -----

func.func @cast_amax_transposed_type(%x: tensor<16x64xf32>, %s: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{transposed must have the output's element type, got 'tensor<64x16xf8E5M2>'}}
  %q, %a, %t = fp8.cast_amax %x, %s : tensor<16x64xf32>, tensor<f32> -> tensor<16x64xf8E4M3FN>, tensor<f32>, tensor<64x16xf8E5M2>
  return %a : tensor<f32>
}

// -----

func.func @gemm_accumulate_type(%a: tensor<16x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %s: tensor<f32>, %c: tensor<16x32xbf16>) -> tensor<16x32xbf16> {
  // expected-error @+1 {{accumulate must have the float32 result's type 'tensor<16x32xbf16>', got 'tensor<16x32xbf16>'}}
  %d = fp8.gemm %a, %b, %s, %s accumulate %c : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<16x32xbf16>) -> tensor<16x32xbf16>
  return %d : tensor<16x32xbf16>
}

// -----

func.func @gemm_accumulate_amax(%a: tensor<16x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>, %s: tensor<f32>, %c: tensor<16x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{accumulate takes neither with_amax nor d_scale}}
  %d, %m = fp8.gemm %a, %b, %s, %s accumulate %c {with_amax = true} : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<f32>, tensor<16x32xf32>) -> (tensor<16x32xf32>, tensor<f32>)
  return %d : tensor<16x32xf32>
}

// -----

func.func @adam_step_shape(%w: tensor<64x32xf16>, %g: tensor<32x64xf32>, %m: tensor<64x32xf8E4M3FN>, %v: tensor<64x32xf16>, %s: tensor<f32>) -> tensor<64x32xf16> {
  // expected-error @+1 {{grad, exp_avg and exp_avg_sq must have the weight's shape 'tensor<64x32xf16>', got 'tensor<32x64xf32>'}}
  %w2, %m2, %ms, %v2, %vs = fp8.adam_step %w, %g, %s, %m, %s, %v, %s, %s, %s, %s, %s {beta1 = 0.9 : f32, one_minus_beta1 = 0.1 : f32, beta2 = 0.999 : f32, one_minus_beta2 = 1.0e-3 : f32, eps = 1.0e-8 : f32} : (tensor<64x32xf16>, tensor<32x64xf32>, tensor<f32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<64x32xf16>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>)
  return %w2 : tensor<64x32xf16>
}

// -----

func.func @adam_step_types(%w: tensor<64x32xf16>, %g: tensor<64x32xf32>, %m: tensor<64x32xf8E4M3FN>, %v: tensor<64x32xf16>, %s: tensor<f32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{the new weight and moments must have the types of the old}}
  %w2, %m2, %ms, %v2, %vs = fp8.adam_step %w, %g, %s, %m, %s, %v, %s, %s, %s, %s, %s {beta1 = 0.9 : f32, one_minus_beta1 = 0.1 : f32, beta2 = 0.999 : f32, one_minus_beta2 = 1.0e-3 : f32, eps = 1.0e-8 : f32} : (tensor<64x32xf16>, tensor<64x32xf32>, tensor<f32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<64x32xf32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>)
  return %w2 : tensor<64x32xf32>
}

// -----

func.func @adam_step_moment_type(%w: tensor<64x32xf16>, %g: tensor<64x32xf32>, %m: tensor<64x32xf8E5M2>, %v: tensor<64x32xf16>, %s: tensor<f32>) -> tensor<64x32xf16> {
  // expected-error @+1 {{operand #3 must be tensor of f8E4M3FN type values}}
  %w2, %m2, %ms, %v2, %vs = fp8.adam_step %w, %g, %s, %m, %s, %v, %s, %s, %s, %s, %s {beta1 = 0.9 : f32, one_minus_beta1 = 0.1 : f32, beta2 = 0.999 : f32, one_minus_beta2 = 1.0e-3 : f32, eps = 1.0e-8 : f32} : (tensor<64x32xf16>, tensor<64x32xf32>, tensor<f32>, tensor<64x32xf8E5M2>, tensor<f32>, tensor<64x32xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<64x32xf16>, tensor<64x32xf8E5M2>, tensor<f32>, tensor<64x32xf16>, tensor<f32>)
  return %w2 : tensor<64x32xf16>
}

// -----

func.func @reduce_scatter_lengths(%x: tensor<64xf32>) -> tensor<30xf32> {
  // expected-error @+1 {{the whole tensor has 64 elements, not world_size (2) times the shard's 30}}
  %r = fp8.reduce_scatter %x {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<64xf32> -> tensor<30xf32>
  return %r : tensor<30xf32>
}

// -----

func.func @reduce_scatter_fp8_avg(%q: tensor<64xf8E4M3FN>, %s: tensor<f32>) -> tensor<32xf8E4M3FN> {
  // expected-error @+1 {{an FP8 payload cannot be averaged by the collective}}
  %r = fp8.reduce_scatter %q, %s {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<64xf8E4M3FN>, tensor<f32> -> tensor<32xf8E4M3FN>
  return %r : tensor<32xf8E4M3FN>
}

// -----

func.func @reduce_scatter_fp8_needs_scale(%q: tensor<64xf8E4M3FN>) -> tensor<32xf8E4M3FN> {
  // expected-error @+1 {{an FP8 input needs its scale_inv}}
  %r = fp8.reduce_scatter %q {world_size = 2 : i64} : tensor<64xf8E4M3FN> -> tensor<32xf8E4M3FN>
  return %r : tensor<32xf8E4M3FN>
}

// -----

func.func @all_gather_rank(%x: tensor<4x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{shards are static 1-D tensors (flatten and pad the tensor first)}}
  %r = fp8.all_gather %x {world_size = 2 : i64} : tensor<4x8xf32> -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

func.func @all_gather_types(%x: tensor<4xf16>) -> tensor<8xf32> {
  // expected-error @+1 {{input and result element types must match}}
  %r = fp8.all_gather %x {world_size = 2 : i64} : tensor<4xf16> -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func @shard_world(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{world_size must be at least 1}}
  %r = fp8.shard %x {world_size = 0 : i64} : tensor<8xf32> -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

func.func @reduce_scatter_start_reader(%x: tensor<64xf32>) -> tensor<64xf32> {
  // expected-error @+1 {{its result is in flight: only fp8.all_reduce_done may read it}}
  %f = fp8.reduce_scatter_start %x {reduction = #fp8.reduction<avg>, world_size = 2 : i64} : tensor<64xf32> -> tensor<64xf32>
  %n = onnx.Neg %f : (tensor<64xf32>) -> tensor<64xf32>
  return %n : tensor<64xf32>
}

// -----

func.func @reduce_scatter_start_length(%x: tensor<63xf32>) -> tensor<63xf32> {
  // expected-error @+1 {{the input is a static 1-D tensor whose length world_size divides}}
  %f = fp8.reduce_scatter_start %x {world_size = 2 : i64} : tensor<63xf32> -> tensor<63xf32>
  %d = fp8.all_reduce_done %f : tensor<63xf32> -> tensor<63xf32>
  return %d : tensor<63xf32>
}

// -----

func.func @all_gather_start_reader(%x: tensor<32xf32>) -> tensor<64xf32> {
  // expected-error @+1 {{its result is in flight: only fp8.all_reduce_done may read it}}
  %f = fp8.all_gather_start %x {world_size = 2 : i64} : tensor<32xf32> -> tensor<64xf32>
  %n = onnx.Neg %f : (tensor<64xf32>) -> tensor<64xf32>
  return %n : tensor<64xf32>
}

// -----

func.func @stochastic_round_shape(%x: tensor<64x32xf32>, %step: tensor<i64>) -> tensor<32x64xf16> {
  // expected-error @+1 {{the result must have the input's shape 'tensor<64x32xf32>'}}
  %y = fp8.stochastic_round %x, %step {salt = 7 : i64} : tensor<64x32xf32>, tensor<i64> -> tensor<32x64xf16>
  return %y : tensor<32x64xf16>
}

// -----

func.func @stochastic_round_to_bf16(%x: tensor<64x32xf32>, %step: tensor<i64>) -> tensor<64x32xbf16> {
  // expected-error @+1 {{result #0 must be tensor of 16-bit float values}}
  %y = fp8.stochastic_round %x, %step {salt = 7 : i64} : tensor<64x32xf32>, tensor<i64> -> tensor<64x32xbf16>
  return %y : tensor<64x32xbf16>
}

// -----

func.func @adam_step_rounding_f32_weight(%w: tensor<64x32xf32>, %g: tensor<64x32xf32>, %m: tensor<64x32xf8E4M3FN>, %v: tensor<64x32xf16>, %s: tensor<f32>, %step: tensor<i64>) -> tensor<64x32xf32> {
  // expected-error @+1 {{a rounding step needs a float16 weight, got 'tensor<64x32xf32>'}}
  %w2, %m2, %ms, %v2, %vs = fp8.adam_step %w, %g, %s, %m, %s, %v, %s, %s, %s, %s, %s, %step {beta1 = 0.9 : f32, one_minus_beta1 = 0.1 : f32, beta2 = 0.999 : f32, one_minus_beta2 = 1.0e-3 : f32, eps = 1.0e-8 : f32, rounding_salt = 3 : i64} : (tensor<64x32xf32>, tensor<64x32xf32>, tensor<f32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<i64>) -> (tensor<64x32xf32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>)
  return %w2 : tensor<64x32xf32>
}

// -----

func.func @adam_step_rounding_without_salt(%w: tensor<64x32xf16>, %g: tensor<64x32xf32>, %m: tensor<64x32xf8E4M3FN>, %v: tensor<64x32xf16>, %s: tensor<f32>, %step: tensor<i64>) -> tensor<64x32xf16> {
  // expected-error @+1 {{rounding_step and rounding_salt come together}}
  %w2, %m2, %ms, %v2, %vs = fp8.adam_step %w, %g, %s, %m, %s, %v, %s, %s, %s, %s, %s, %step {beta1 = 0.9 : f32, one_minus_beta1 = 0.1 : f32, beta2 = 0.999 : f32, one_minus_beta2 = 1.0e-3 : f32, eps = 1.0e-8 : f32} : (tensor<64x32xf16>, tensor<64x32xf32>, tensor<f32>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<i64>) -> (tensor<64x32xf16>, tensor<64x32xf8E4M3FN>, tensor<f32>, tensor<64x32xf16>, tensor<f32>)
  return %w2 : tensor<64x32xf16>
}
