// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-data-parallel{num-processes=4 num-machines=2 main-process-ip=10.1.2.3 main-process-port=29501})' | FileCheck %s
// RUN: fp8-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(octet-data-parallel{num-processes=4 num-machines=1})' | FileCheck %s --check-prefix=ONE
// RUN: not fp8-opt %s -o /dev/null --pass-pipeline='builtin.module(octet-data-parallel{num-processes=3 num-machines=2})' 2>&1 | FileCheck %s --check-prefix=UNEVEN
// RUN: not fp8-opt %s -o /dev/null --pass-pipeline='builtin.module(octet-data-parallel{num-processes=4 num-machines=2 main-process-port=70000})' 2>&1 | FileCheck %s --check-prefix=BADPORT
// UNEVEN: octet-data-parallel: num-machines=2 is not valid with num-processes=3; use 0 or a divisor of num-processes (each machine runs as many)
// BADPORT: octet-data-parallel: main-process-ip='' main-process-port=70000 is not a host and port; use a host name or address and a port in 1..65535

// An Accelerate config's machines and where they meet go to the plan's training section, as
// fp8-run's defaults for --nnodes, --master-addr and --master-port; one machine writes nothing.
// CHECK-LABEL: module attributes {octet.data_parallel, octet.training = {data_parallel = "true", main_process_ip = "10.1.2.3", main_process_port = "29501", num_machines = "2", num_processes = "4"}}
// ONE-LABEL: module attributes {octet.data_parallel, octet.training = {data_parallel = "true", num_processes = "4"}}
module {
func.func @gradients(%l: tensor<f32>, %gw: tensor<8x5xf32>)
    -> (tensor<f32> {octet.loss, onnx.name = "loss"},
        tensor<8x5xf32> {octet.grad_of = "w", onnx.name = "w.grad"}) {
  %w = onnx.initializer "w" = dense<1.0> : tensor<8x5xf32>
  return %l, %gw : tensor<f32>, tensor<8x5xf32>
}
}
