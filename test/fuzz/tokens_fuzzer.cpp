//===- tokens_fuzzer.cpp - libFuzzer target over fp8-run's token files ----===//
//
// --data: a 1-D .npy of token ids, or a nanoGPT .bin of uint16 / uint32. The first byte picks
// the form; the rest is the file.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Train.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  static const char *const kinds[][2] = {{"t.npy", "uint16"}, {"t.bin", "uint16"}, {"t.bin", "uint32"}};
  const char *const *k = kinds[data[0] % 3];
  try {
    (void)octet::rt::parseTokens(std::string(reinterpret_cast<const char *>(data) + 1, size - 1), k[0], k[1]);
  } catch (const octet::rt::Error &) {
  }
  return 0;
}
