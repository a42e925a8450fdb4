//===- Json.h - JSON the runtime writes (plans' readers are in Plan.cpp) -*- C++ -*-===//
//
// Every JSON text fp8-run writes (checkpoint metadata, JSONL logs, the --benchmark line) goes
// through nlohmann::json: strings escaped, non-finite numbers written as null, keys in the order
// they were added. Invalid UTF-8 in a user's path is replaced, not thrown.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_SRC_JSON_H
#define OCTET_RUNTIME_SRC_JSON_H

#include <nlohmann/json.hpp>

#include <string>

namespace octet::rt {

using JsonOut = nlohmann::ordered_json;

inline std::string dumpJson(const JsonOut &j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

} // namespace octet::rt

#endif
