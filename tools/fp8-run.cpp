//===- fp8-run.cpp - Runs a plan on the GPU or the CPU reference backend --===//
// The CUDA backend is liboctet_cuda, a plugin the runtime loads when a device is asked for.
#include "octet/runtime/Distributed.h"
#include "octet/runtime/Fp8RunMain.h"

int main(int argc, char **argv) {
  octet::rt::registerCollectives();
  return octet::rt::fp8RunMain(argc, argv);
}
