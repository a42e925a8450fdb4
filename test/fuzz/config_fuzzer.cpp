//===- config_fuzzer.cpp - libFuzzer target over Accelerate config YAML ---===//
//
// Any text as an Accelerate config: parsed into a recipe or refused with one error string, never
// an escaping exception or a crash.
//
//===----------------------------------------------------------------------===//
#include "octet/Support/RecipeConfig.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  octet::RecipeConfig config;
  std::string error;
  (void)octet::parseAccelerateConfig(std::string(reinterpret_cast<const char *>(data), size), "fuzz.yaml", config,
                                     error);
  return 0;
}
