//===- npz_fuzzer.cpp - libFuzzer target over .npz and .npy readers -------===//
//
// Checkpoints, --inputs and --load-state are .npz archives of .npy arrays. Any bytes: the archive
// reader, and the bare .npy decoder, load them or throw one Error.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Npz.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  try {
    (void)octet::rt::readNpzBytes(bytes, "fuzz.npz");
  } catch (const octet::rt::Error &) {
  }
  try {
    (void)octet::rt::decodeNpy(bytes, "fuzz.npy");
  } catch (const octet::rt::Error &) {
  }
  return 0;
}
