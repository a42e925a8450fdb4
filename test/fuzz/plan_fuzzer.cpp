//===- plan_fuzzer.cpp - libFuzzer target over the plan reader -----------===//
//
// Any bytes as a plan file: readPlan must load it or throw one Error, never crash, hang or make
// an allocation the file's own size does not justify (libFuzzer's -malloc_limit_mb catches those).
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Plan.h"

#include <cstdint>
#include <sstream>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char *>(data), size));
  try {
    octet::rt::Plan p = octet::rt::readPlan(in, "fuzz.plan");
    (void)p;
  } catch (const octet::rt::Error &) {
  }
  return 0;
}
