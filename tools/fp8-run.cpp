//===- fp8-run.cpp - Runs a plan on the GPU or the CPU reference backend --===//
#include "octet/runtime/Distributed.h"
#include "octet/runtime/Fp8RunMain.h"

#ifdef OCTET_HAVE_CUDA
#include "octet/runtime/CudaExecutor.h"
#endif

int main(int argc, char **argv) {
  octet::rt::registerCollectives();
#ifdef OCTET_HAVE_CUDA
  octet::rt::cuda::registerBackend();
#endif
  return octet::rt::fp8RunMain(argc, argv);
}
