//===- HostDevice.h - Functions both the host and a CUDA kernel call ----*- C++ -*-===//
//
// OCTET_HOST_DEVICE marks a function of the headers that the CPU reference and the CUDA kernels
// share (NormalInit.h, StochasticRound.h): host and device under nvcc, an inline function elsewhere.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_HOSTDEVICE_H
#define OCTET_RUNTIME_HOSTDEVICE_H

#if defined(__CUDACC__)
#define OCTET_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define OCTET_HOST_DEVICE inline
#endif

#endif
