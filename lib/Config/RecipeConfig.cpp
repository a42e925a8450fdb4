//===- RecipeConfig.cpp - Accelerate config files through yaml-cpp --------===//
#include "octet/Support/RecipeConfig.h"
#include "octet/runtime/OneLine.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <vector>

namespace octet {

std::string RecipeConfig::toPassOptions() const {
  std::ostringstream os;
  os << "recipe=" << backend << " fp8-format=" << te.fp8Format << " amax-history-len=" << te.amaxHistoryLen
     << " amax-compute-algo=" << te.amaxComputeAlgo << " margin=" << te.margin << " interval=" << te.interval
     << " override-linear-precision=" << (te.overrideLinearPrecision[0] ? "true" : "false") << ","
     << (te.overrideLinearPrecision[1] ? "true" : "false") << "," << (te.overrideLinearPrecision[2] ? "true" : "false")
     << " use-autocast-during-eval=" << (te.useAutocastDuringEval ? "true" : "false") << " opt-level=" << msamp.optLevel
     << " ao-recipe=" << ao.recipe << " keep-first-last=" << (ao.keepFirstLast ? "true" : "false")
     << " round-scales-to-power-of-2=" << (ao.roundScalesToPowerOf2 ? "true" : "false")
     << " pad-inner-dim=" << (ao.padInnerDim ? "true" : "false")
     << " keep-output-layer=" << (keepOutputLayer ? "true" : "false") << " kept-gemm-precision=" << keptGemmPrecision
     << " pad-kept-gemms=" << (padKeptGemms ? "true" : "false") << " eval=" << (evalGraph ? "true" : "false");
  if (!ao.moduleFilter.empty())
    os << " module-filter=\"" << ao.moduleFilter << "\"";
  return os.str();
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

struct Reader {
  const std::string &path;
  std::string &error;
  std::string block = "fp8_config."; // where the keys live ("" for Accelerate's top-level keys)
  bool fail(const std::string &key, const std::string &msg) {
    error = path + ": " + block + key + ": " + msg;
    return false;
  }
  /// A one-value setting: a list or a map where a value belongs names the key.
  bool scalar(const YAML::Node &n, const std::string &key, std::string &out) {
    if (!n.IsScalar())
      return fail(key, std::string("expected one value, got ") + (n.IsSequence() ? "a list" : n.IsMap() ? "a map" : "nothing"));
    out = n.as<std::string>();
    return true;
  }
  bool getBool(const YAML::Node &n, const std::string &key, bool &out) {
    std::string raw;
    if (!scalar(n, key, raw))
      return false;
    std::string v = lower(raw);
    if (v == "true" || v == "yes" || v == "1")
      out = true;
    else if (v == "false" || v == "no" || v == "0")
      out = false;
    else
      return fail(key, "'" + raw + "' is not a boolean (true or false)");
    return true;
  }
  bool getInt(const YAML::Node &n, const std::string &key, int64_t &out, int64_t min,
              int64_t max = std::numeric_limits<int64_t>::max()) {
    std::string v;
    if (!scalar(n, key, v))
      return false;
    char *end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end || errno == ERANGE || x < min || x > max)
      return fail(key, "'" + v + "' is not an integer >= " + std::to_string(min) +
                           (max < std::numeric_limits<int64_t>::max() ? " and <= " + std::to_string(max) : ""));
    out = x;
    return true;
  }
  bool getChoice(const YAML::Node &n, const std::string &key, std::string &out,
                 std::initializer_list<const char *> allowed, bool upper) {
    std::string v;
    if (!scalar(n, key, v))
      return false;
    std::string norm = v;
    if (upper)
      std::transform(norm.begin(), norm.end(), norm.begin(), [](unsigned char c) { return std::toupper(c); });
    else
      norm = lower(norm);
    std::string list;
    for (const char *a : allowed) {
      if (norm == a) {
        out = norm;
        return true;
      }
      list += std::string(list.empty() ? "" : ", ") + a;
    }
    return fail(key, "'" + v + "' is not one of " + list);
  }
};

} // namespace

bool applyRecipeName(const std::string &name, RecipeConfig &config, std::string &storageLevel, std::string &error) {
  auto fail = [&](const std::string &why) {
    error = "--recipe '" + name + "': " + why;
    return false;
  };
  std::string r = name;
  size_t plus = r.find('+');
  if (plus != std::string::npos) {
    std::string rest = r.substr(plus + 1);
    r = r.substr(0, plus);
    if (rest.rfind("msamp", 0) != 0)
      return fail("only '+msamp[:O1|O2|O3]' can be combined with a recipe");
    storageLevel = rest.size() > 6 ? rest.substr(6) : "O2";
    if (rest.size() > 5 && rest[5] != ':')
      return fail("write the level as msamp:O2");
  }
  size_t colon = r.find(':');
  if (colon != std::string::npos) {
    std::string level = r.substr(colon + 1);
    r = r.substr(0, colon);
    if (r == "msamp")
      config.msamp.optLevel = level;
    else if (r == "ao")
      config.ao.recipe = level;
    else
      return fail("only msamp:LEVEL and ao:RECIPE take a suffix");
  }
  config.backend = r;
  if (!storageLevel.empty() && storageLevel != "O1" && storageLevel != "O2" && storageLevel != "O3")
    return fail("the MS-AMP level must be O1, O2 or O3");
  return true;
}

bool loadAccelerateConfig(const std::string &path, RecipeConfig &config, std::string &error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    error = path + ": cannot read the config file (does it exist?)";
    return false;
  }
  std::ostringstream text;
  text << f.rdbuf();
  return parseAccelerateConfig(text.str(), path, config, error);
}

/// Levenshtein distance (short keys only).
static size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

/// The top-level keys of Accelerate's config files (its ClusterConfig; `dynamo_backend` the older
/// spelling it still reads). Accelerate refuses any other key, and so does Octet, but for the FP8
/// knobs it also reads at the top level (launch-flag style).
static const std::set<std::string> &accelerateKeys() {
  static const std::set<std::string> keys = {
      "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug", "num_processes",
      "machine_rank", "num_machines", "main_process_ip", "main_process_port", "rdzv_backend", "same_network",
      "main_training_function", "enable_cpu_affinity", "fp8_config", "deepspeed_config", "fsdp_config", "tp_config",
      "megatron_lm_config", "ipex_config", "mpirun_config", "dynamo_config", "parallelism_config", "downcast_bf16",
      "gpu_ids", "tpu_name", "tpu_zone", "tpu_use_cluster", "tpu_use_sudo", "tpu_vm", "tpu_env", "command_file",
      "commands", "dynamo_backend"};
  return keys;
}

/// A top-level key that is none of Accelerate's own but a near miss of one Octet reads (a typo, or
/// damage): the name it was probably meant as, else "".
static std::string nearMiss(const std::string &key, const std::set<std::string> &knobs) {
  if (key.size() > 64 || accelerateKeys().count(key))
    return "";
  std::set<std::string> targets = {"fp8_config", "mixed_precision", "distributed_type", "num_processes"};
  targets.insert(knobs.begin(), knobs.end());
  for (const std::string &t : targets)
    if (size_t d = editDistance(key, t); d > 0 && d <= (t.size() >= 8 ? 3u : 2u))
      return t;
  return "";
}

static bool parseConfig(const std::string &text, const std::string &path, RecipeConfig &config, std::string &error);

/// `deepspeed_config:` of a `distributed_type: DEEPSPEED` config: ZeRO stage 0 (data parallelism)
/// and its gradient_accumulation_steps; every other setting Octet does not train as DeepSpeed
/// would is refused by name.
static bool readDeepSpeed(const YAML::Node &ds, const std::string &path, RecipeConfig &config, std::string &error) {
  Reader r{path, error, "deepspeed_config."};
  if (!ds || ds.IsNull() || !ds.IsMap()) {
    r.block = "";
    return r.fail("deepspeed_config", "distributed_type DEEPSPEED needs a deepspeed_config: map (zero_stage: 0)");
  }
  int64_t stage = -1;
  for (const auto &kv : ds) {
    std::string key = kv.first.as<std::string>();
    const YAML::Node &v = kv.second;
    if (key == "gradient_accumulation_steps") {
      if (!r.getInt(v, key, config.gradAccumSteps, 1, int64_t(1) << 20))
        return false;
    } else if (key == "zero_stage") {
      if (!r.getInt(v, key, stage, 0, 3))
        return false;
    } else if (key == "offload_optimizer_device" || key == "offload_param_device") {
      std::string d;
      if (!r.getChoice(v, key, d, {"none", "cpu", "nvme"}, false))
        return false;
      if (d != "none")
        return r.fail(key, "'" + d + "': Octet keeps every tensor on the device; use none");
    } else if (key == "zero3_init_flag" || key == "zero3_save_16bit_model") {
      bool b = false;
      if (!r.getBool(v, key, b))
        return false;
    } else if (key == "deepspeed_multinode_launcher") {
      std::string l;
      if (!r.scalar(v, key, l))
        return false;
    } else if (key == "gradient_clipping") { // DeepSpeed clips the global norm, as --clip-grad-norm does
      std::string v;
      if (!r.scalar(kv.second, key, v))
        return false;
      char *end = nullptr;
      double c = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !std::isfinite(c) || c < 0)
        return r.fail(key, "'" + v + "' is not a number >= 0 (the global gradient norm to clip to)");
      config.gradClip = c;
    } else if (key == "deepspeed_config_file") {
      return r.fail(key, "a DeepSpeed JSON file is not read; put zero_stage and gradient_accumulation_steps in "
                         "deepspeed_config:");
    } else {
      return r.fail(key, "not supported; Octet reads gradient_accumulation_steps, gradient_clipping, zero_stage, "
                         "offload_optimizer_device, offload_param_device, zero3_init_flag, zero3_save_16bit_model, "
                         "deepspeed_multinode_launcher");
    }
  }
  if (stage < 0)
    return r.fail("zero_stage", "missing; give 0 (data parallelism), 2 (optimizer and gradients sharded) or 3 "
                                "(parameters too)");
  if (stage == 1)
    return r.fail("zero_stage", "1 shards only the optimizer state; use 2, which trains the same values with the "
                                "gradients sharded too (fp8-opt --shard-optimizer)");
  config.zeroStage = stage;
  return true;
}

/// `fsdp_config:` of a `distributed_type: FSDP` config: the sharding strategy (FULL_SHARD is
/// fp8-opt --shard-parameters, SHARD_GRAD_OP --shard-optimizer, NO_SHARD data parallelism) and the
/// backward prefetch (--gather-prefetch). Which modules FSDP wraps, how it loads and saves state
/// dicts, and whether it syncs module states are PyTorch's bookkeeping: Octet gathers each parameter
/// by itself and writes per-rank checkpoints, so those keys are read and have no effect. What
/// Octet would train differently (CPU offload, hybrid sharding, FSDP's activation checkpointing) is
/// refused by name.
static bool readFsdp(const YAML::Node &fs, const std::string &path, RecipeConfig &config, std::string &error) {
  Reader r{path, error, "fsdp_config."};
  if (!fs || fs.IsNull() || !fs.IsMap()) {
    r.block = "";
    return r.fail("fsdp_config", "distributed_type FSDP needs an fsdp_config: map (fsdp_sharding_strategy: FULL_SHARD)");
  }
  config.zeroStage = 3; // FSDP's default strategy
  for (const auto &kv : fs) {
    std::string key = kv.first.as<std::string>();
    const YAML::Node &v = kv.second;
    std::string s;
    if (key == "fsdp_sharding_strategy") {
      if (!r.getChoice(v, key, s, {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2",
                                   "1", "2", "3", "4", "5"},
                       true))
        return false;
      if (s == "HYBRID_SHARD" || s == "_HYBRID_SHARD_ZERO2" || s == "4" || s == "5")
        return r.fail(key, s + ": hybrid sharding (within a node, replicated across nodes) is not built; use "
                               "FULL_SHARD or SHARD_GRAD_OP");
      config.zeroStage = s == "FULL_SHARD" || s == "1" ? 3 : s == "SHARD_GRAD_OP" || s == "2" ? 2 : 0;
    } else if (key == "fsdp_reshard_after_forward") { // FSDP2's spelling: true is FULL_SHARD
      bool b = true;
      if (!r.getBool(v, key, b))
        return false;
      config.zeroStage = b ? 3 : 2;
    } else if (key == "fsdp_version") {
      int64_t ver = 0;
      if (!r.getInt(v, key, ver, 1, 2))
        return false;
    } else if (key == "fsdp_backward_prefetch") {
      if (!r.getChoice(v, key, s, {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"}, true))
        return false;
      config.gatherPrefetch = s == "NO_PREFETCH" ? 0 : 1;
    } else if (key == "fsdp_offload_params" || key == "fsdp_activation_checkpointing") {
      bool b = false;
      if (!r.getBool(v, key, b))
        return false;
      if (b)
        return r.fail(key, key == "fsdp_offload_params"
                               ? std::string("true: Octet keeps every tensor on the device; set it to false")
                               : std::string("true: recompute blocks with fp8-opt --checkpoint-blocks N (or "
                                             "--memory-budget) instead; set it to false"));
    } else if (key == "fsdp_forward_prefetch" || key == "fsdp_sync_module_states" || key == "fsdp_use_orig_params" ||
               key == "fsdp_cpu_ram_efficient_loading") {
      bool b = false;
      if (!r.getBool(v, key, b))
        return false;
    } else if (key == "fsdp_auto_wrap_policy" || key == "fsdp_transformer_layer_cls_to_wrap" ||
               key == "fsdp_min_num_params" || key == "fsdp_state_dict_type") {
      if (!r.scalar(v, key, s))
        return false;
    } else {
      return r.fail(key, "not supported; Octet reads fsdp_sharding_strategy, fsdp_reshard_after_forward, "
                         "fsdp_version, fsdp_backward_prefetch, fsdp_forward_prefetch, fsdp_offload_params, "
                         "fsdp_activation_checkpointing, fsdp_auto_wrap_policy, fsdp_transformer_layer_cls_to_wrap, "
                         "fsdp_min_num_params, fsdp_state_dict_type, fsdp_sync_module_states, fsdp_use_orig_params, "
                         "fsdp_cpu_ram_efficient_loading");
    }
  }
  return true;
}

bool parseAccelerateConfig(const std::string &text, const std::string &path, RecipeConfig &config,
                           std::string &error) {
  if (parseConfig(text, path, config, error))
    return true;
  error = oneLine(error); // keys and values quoted from the file may hold newlines or control bytes
  return false;
}

static bool parseConfig(const std::string &text, const std::string &path, RecipeConfig &config, std::string &error) {
  YAML::Node root;
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(text);
    if (docs.size() > 1) {
      error = path + ": holds " + std::to_string(docs.size()) + " YAML documents (---); an Accelerate config is one";
      return false;
    }
    if (!docs.empty())
      root = docs[0];
  } catch (const YAML::Exception &e) {
    error = path + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg;
    return false;
  }
  // A key twice in one mapping: YAML forbids it, and readers disagree on which one counts
  // (PyYAML, which Accelerate reads configs with, keeps the last; yaml-cpp finds the first).
  // Aliases make a node reachable many times over (nine levels of nine aliases: 9^9 paths), so
  // the walk has a budget far above any real config's size.
  int64_t budget = 100000;
  std::function<bool(const YAML::Node &)> unique = [&](const YAML::Node &n) {
    if (--budget < 0) {
      error = path + ": more than 100000 YAML nodes once its aliases (*name) are expanded; an Accelerate config is "
                     "a few dozen keys";
      return false;
    }
    if (n.IsMap()) {
      std::set<std::string> seen;
      for (const auto &kv : n) {
        std::string key = kv.first.IsScalar() ? kv.first.Scalar() : YAML::Dump(kv.first);
        if (!seen.insert(key).second) {
          error = path + ":" + std::to_string(kv.first.Mark().line + 1) + ": key '" + key +
                  "' appears twice in one mapping; keep one";
          return false;
        }
        if (!unique(kv.second))
          return false;
      }
    } else if (n.IsSequence()) {
      for (const auto &e : n)
        if (!unique(e))
          return false;
    }
    return true;
  };
  try {
    if (!unique(root))
      return false;
  } catch (const YAML::Exception &e) { // nothing may escape: fp8-opt is built without exceptions
    error = path + ": " + e.msg;
    return false;
  }
  if (!root.IsMap()) {
    error = path + ": an Accelerate config is a YAML mapping";
    return false;
  }
  Reader r{path, error};
  try {
    // How Accelerate launches: one process, or data parallelism over several (the plan runs on any
    // number of ranks; fp8-run --nproc-per-node or torchrun picks it). Sharded or model-parallel
    // schemes are refused here rather than trained on one device.
    Reader top{path, error, ""};
    if (root["distributed_type"] && !root["distributed_type"].IsNull() &&
        !top.getChoice(root["distributed_type"], "distributed_type", config.distributedType,
                       {"NO", "MULTI_GPU", "MULTI_CPU", "DEEPSPEED", "FSDP"}, true)) {
      error += " (Octet trains data parallelism, DeepSpeed ZeRO and FSDP; Megatron-LM and XLA are not supported)";
      return false;
    }
    if (root["num_processes"] && !root["num_processes"].IsNull() &&
        !top.getInt(root["num_processes"], "num_processes", config.numProcesses, 1))
      return false;
    if (config.distributedType == "DEEPSPEED" && !readDeepSpeed(root["deepspeed_config"], path, config, error))
      return false;
    if (config.distributedType == "FSDP" && !readFsdp(root["fsdp_config"], path, config, error))
      return false;
    if (config.zeroStage >= 2 && config.numProcesses < 2)
      return top.fail("num_processes", std::to_string(config.numProcesses) + ": " +
                                           (config.distributedType == "FSDP" ? "FSDP's sharding"
                                                                             : "ZeRO stage " + std::to_string(config.zeroStage)) +
                                           " shards across num_processes ranks; give their number (2 or more)");
    // Several machines: fp8-run's --nnodes, --master-addr and --master-port, each machine giving its
    // own --node-rank (machine_rank is that machine's, not the plan's: it is not kept).
    if (root["num_machines"] && !root["num_machines"].IsNull() &&
        !top.getInt(root["num_machines"], "num_machines", config.numMachines, 1, 1 << 16))
      return false;
    if (config.numMachines > 1 && config.numProcesses % config.numMachines)
      return top.fail("num_machines", std::to_string(config.numMachines) + " machines cannot share num_processes " +
                                          std::to_string(config.numProcesses) + " equally (num_processes counts " +
                                          "every machine's processes)");
    if (root["main_process_ip"] && !root["main_process_ip"].IsNull()) {
      if (!top.scalar(root["main_process_ip"], "main_process_ip", config.mainProcessIp))
        return false;
      if (config.mainProcessIp.empty() || config.mainProcessIp.size() > 253 ||
          config.mainProcessIp.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:_") !=
              std::string::npos)
        return top.fail("main_process_ip", "'" + config.mainProcessIp + "' is not a host name or address");
    }
    if (root["main_process_port"] && !root["main_process_port"].IsNull() &&
        !top.getInt(root["main_process_port"], "main_process_port", config.mainProcessPort, 1, 65535))
      return false;
    config.dataParallel = config.distributedType != "NO" || config.numProcesses > 1 || config.numMachines > 1;
    if (root["mixed_precision"]) {
      std::string mp = lower(root["mixed_precision"].as<std::string>());
      if (mp != "no" && mp != "bf16" && mp != "fp8") {
        return top.fail("mixed_precision", "'" + mp + "' is not supported; use no, bf16 or fp8 (fp16's loss "
                                          "scaling has no plan)");
      }
      config.mixedPrecision = mp;
      if (mp != "fp8") {
        config.backend = "";
        return true; // not an FP8 config: no recipe
      }
    }
    // Keys live under fp8_config:, or flat at the top level (launch-flag style).
    if (root["fp8_config"] && !root["fp8_config"].IsMap() && !root["fp8_config"].IsNull()) {
      r.block = "";
      return r.fail("fp8_config", "expected a map of FP8 settings (backend:, fp8_format:, ...), got '" +
                                      YAML::Dump(root["fp8_config"]) + "'");
    }
    bool flat = !(root["fp8_config"] && root["fp8_config"].IsMap());
    YAML::Node block = flat ? root : root["fp8_config"];
    if (!flat) // the top level holds Accelerate's own keys only
      for (const auto &kv : root) {
        std::string key = kv.first.as<std::string>();
        if (accelerateKeys().count(key))
          continue;
        r.block = "";
        std::string meant = nearMiss(key, {});
        return r.fail(key, meant.empty() ? "not a key of Accelerate's config files (Accelerate refuses it too); "
                                           "remove it (FP8 settings go under fp8_config:)"
                                         : "unknown key (did you mean '" + meant + "'?)");
      }
    // Accelerate spells one setting several ways: its docs and its TERecipeKwargs/MSAMPRecipeKwargs
    // dataclasses (amax_history_len, amax_compute_algo, opt_level), the `accelerate config` wizard
    // (amax_history_length, amax_compute_algorithm, optimization_level, override_linear_precision: false),
    // `accelerate launch --fp8_*` flags flat at the top level, and the ACCELERATE_FP8_OVERRIDE_{FPROP,DGRAD,
    // WGRAD} variables launch splits override_linear_precision into. All name the same setting here.
    static const std::map<std::string, std::string> alias = {{"amax_history_length", "amax_history_len"},
                                                             {"amax_compute_algorithm", "amax_compute_algo"},
                                                             {"optimization_level", "opt_level"}};
    static const std::set<std::string> known = {
        "backend", "fp8_format", "amax_history_len", "amax_compute_algo", "margin", "interval",
        "override_linear_precision", "override_fprop", "override_dgrad", "override_wgrad", "use_autocast_during_eval",
        "opt_level", "pad_inner_dim", "enable_fsdp_float8_all_gather", "recipe_name", "ao_recipe", "module_filter",
        "keep_first_last", "round_scales_to_power_of_2", "amax_history_length", "amax_compute_algorithm",
        "optimization_level"};
    std::map<std::string, std::string> seen; // setting -> the spelling that gave it
    for (const auto &kv : block) {
      std::string key = kv.first.as<std::string>();
      if (key.rfind("fp8_", 0) == 0 && key != "fp8_format" && key != "fp8_config")
        key = key.substr(4); // --fp8_backend=te style
      if (known.count(key)) {
        auto a = alias.find(key);
        std::string setting = a == alias.end() ? key : a->second;
        auto [it, fresh] = seen.emplace(setting, kv.first.as<std::string>());
        if (!fresh) {
          r.block = flat ? "" : "fp8_config.";
          return r.fail(kv.first.as<std::string>(), "sets the same thing as '" + it->second + "'; keep one");
        }
        key = setting;
      }
      const YAML::Node &v = kv.second;
      if (!known.count(key)) {
        if (flat) {
          std::string meant = nearMiss(kv.first.as<std::string>(), known);
          if (!meant.empty()) {
            r.block = "";
            return r.fail(kv.first.as<std::string>(), "unknown key (did you mean '" + meant + "'?)");
          }
          if (accelerateKeys().count(kv.first.as<std::string>()))
            continue; // other Accelerate settings (distributed_type, num_processes, ...)
          r.block = "";
          return r.fail(kv.first.as<std::string>(), "not a key of Accelerate's config files (Accelerate refuses it "
                                                    "too); remove it, or move an FP8 setting under fp8_config:");
        }
        std::string meant = nearMiss(key, known);
        return r.fail(kv.first.as<std::string>(), meant.empty() ? "not an FP8 setting Octet implements; known: backend, fp8_format, "
                                           "amax_history_len, amax_compute_algo, margin, interval, "
                                           "override_linear_precision, use_autocast_during_eval, opt_level, "
                                           "pad_inner_dim, enable_fsdp_float8_all_gather"
                                         : "unknown key (did you mean '" + meant + "'?)");
      }
      if (v.IsNull())
        continue;
      if (key == "backend") {
        std::string b;
        if (!r.getChoice(v, key, b, {"TE", "MSAMP", "AO"}, true))
          return false;
        config.backend = lower(b);
      } else if (key == "fp8_format") {
        if (!r.getChoice(v, key, config.te.fp8Format, {"E4M3", "HYBRID"}, true))
          return false;
      } else if (key == "amax_history_len") {
        if (!r.getInt(v, key, config.te.amaxHistoryLen, 1, kMaxAmaxHistoryLen))
          return false;
      } else if (key == "amax_compute_algo") {
        if (!r.getChoice(v, key, config.te.amaxComputeAlgo, {"max", "most_recent"}, false))
          return false;
      } else if (key == "margin") {
        if (!r.getInt(v, key, config.te.margin, 0, kMaxMargin))
          return false;
      } else if (key == "interval") {
        if (!r.getInt(v, key, config.te.interval, 1))
          return false;
      } else if (key == "override_linear_precision") {
        // The wizard's boolean (false when nothing runs in higher precision; true applies to all three
        // GEMMs), a YAML list (what the wizard's tuple dumps as), or the docs' tuple text "(false, false, true)".
        std::vector<std::string> items;
        if (v.IsScalar() && (lower(v.Scalar()) == "true" || lower(v.Scalar()) == "false")) {
          bool all = lower(v.Scalar()) == "true";
          for (bool &b : config.te.overrideLinearPrecision)
            b = all;
          continue;
        }
        if (v.IsSequence()) {
          for (const auto &e : v) {
            std::string item;
            if (!r.scalar(e, key, item))
              return false;
            items.push_back(item);
          }
        } else {
          std::string s;
          if (!r.scalar(v, key, s))
            return false;
          s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == '(' || c == ')' || c == '[' || c == ']' || std::isspace((unsigned char)c); }), s.end());
          std::stringstream ss(s);
          for (std::string item; std::getline(ss, item, ',');)
            items.push_back(item);
        }
        if (items.size() != 3)
          return r.fail(key, "needs a boolean, or three booleans (fprop, dgrad, wgrad)");
        for (int i = 0; i < 3; ++i)
          if (!r.getBool(YAML::Node(items[size_t(i)]), key, config.te.overrideLinearPrecision[i]))
            return false;
      } else if (key == "override_fprop" || key == "override_dgrad" || key == "override_wgrad") {
        int i = key == "override_fprop" ? 0 : key == "override_dgrad" ? 1 : 2;
        if (!r.getBool(v, key, config.te.overrideLinearPrecision[i]))
          return false;
      } else if (key == "use_autocast_during_eval") {
        if (!r.getBool(v, key, config.te.useAutocastDuringEval))
          return false;
      } else if (key == "opt_level") {
        if (!r.getChoice(v, key, config.msamp.optLevel, {"O1", "O2", "O3"}, true))
          return false;
      } else if (key == "pad_inner_dim") {
        if (!r.getBool(v, key, config.ao.padInnerDim))
          return false;
      } else if (key == "enable_fsdp_float8_all_gather") { // fp8-opt --fp8-all-gather
        bool b = false;
        if (!r.getBool(v, key, b))
          return false;
        config.ao.enableFsdpFloat8AllGather = b ? 1 : 0;
      } else if (key == "recipe_name" || key == "ao_recipe") {
        if (!r.getChoice(v, key, config.ao.recipe, {"tensorwise", "rowwise", "rowwise_with_gw_hp"}, false))
          return false;
      } else if (key == "module_filter") {
        if (!r.scalar(v, key, config.ao.moduleFilter))
          return false;
      } else if (key == "keep_first_last") {
        if (!r.getBool(v, key, config.ao.keepFirstLast))
          return false;
      } else if (key == "round_scales_to_power_of_2") {
        if (!r.getBool(v, key, config.ao.roundScalesToPowerOf2))
          return false;
        config.ao.roundScalesGiven = true;
      }
    }
    if (config.backend.empty() && root["mixed_precision"])
      config.backend = "msamp"; // Accelerate prefers MS-AMP when no backend is named
  } catch (const YAML::Exception &e) {
    error = path + ": " + e.msg;
    return false;
  }
  return true;
}

} // namespace octet
