//===- Train.cpp - fp8-run's training loop (data: TrainData.cpp; checkpoints: Checkpoint.cpp;
// the memory report and loss PNG: TrainReport.cpp) ---===//
#include "octet/runtime/Train.h"

#include "TrainData.h"

#include "octet/runtime/Collective.h"
#include "octet/runtime/NumericsCheck.h"
#include "octet/runtime/Weights.h"

#include "Json.h"
#include "LogWriter.h"
#include "ScalingMonitor.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <unistd.h>

namespace octet::rt {

namespace {

double scalarOf(const Runner &ex, const std::string &name) {
  TensorPtr t = ex.value(name);
  return t && t->numel() == 1 ? t->getDouble(0) : NAN;
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  std::ostringstream os;
  os << std::setprecision(9) << v;
  return os.str();
}

std::string hms(double s) {
  if (!std::isfinite(s) || s < 0)
    return "--:--";
  int64_t t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(t / 3600), (long long)(t / 60 % 60),
                  (long long)(t % 60));
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", (long long)(t / 60), (long long)(t % 60));
  return buf;
}

} // namespace

void setFirstMicroBatch(const Plan &p, std::map<std::string, TensorPtr> &inputs, bool first) {
  if (p.findValue(kFirstMicroBatchInput) < 0)
    return;
  auto t = std::make_shared<Tensor>(DType::Bool, Shape{});
  t->bytes[0] = first ? 1 : 0;
  inputs[kFirstMicroBatchInput] = t;
}

void runOptimizerStep(Runner &ex, std::map<std::string, TensorPtr> &inputs) {
  int64_t n = ex.plan().gradAccumSteps;
  for (int64_t m = 0; m < n; ++m) {
    setFirstMicroBatch(ex.plan(), inputs, m == 0);
    ex.run(inputs, true, m + 1 == n);
  }
}

//===----------------------------------------------------------------------===//
// The loop
//===----------------------------------------------------------------------===//

int trainMain(Runner &ex, const TrainOptions &o) {
  const Plan &p = ex.plan();
  if (p.findValue("octet.lr") < 0 || p.findValue("octet.grad_norm") < 0)
    throw Error("--data/--steps train a training plan; compile one with fp8-opt --train (this plan has no "
                "optimizer step)");
  // The plan's token inputs: [B, T] integers; the first gets x, the second the labels.
  std::vector<int> tokenInputs;
  for (int id : p.inputs) {
    const PlanValue &v = p.values[size_t(id)];
    if (v.name == kFirstMicroBatchInput)
      continue; // set per micro-batch below
    if (v.dtype == DType::I64 || v.dtype == DType::I32)
      tokenInputs.push_back(id);
    else
      throw Error("the plan's input '" + v.name + "' is not token ids; --data feeds integer [batch, seq] inputs only");
  }
  if (tokenInputs.empty() || tokenInputs.size() > 2)
    throw Error("--data needs a plan with one or two integer inputs (tokens, labels), this one has " +
                std::to_string(tokenInputs.size()));
  const PlanValue &in0 = p.values[size_t(tokenInputs[0])];
  if (!in0.hasShape || in0.shape.size() != 2)
    throw Error("input '" + in0.name + "' must be [batch, seq]");
  int64_t B = in0.shape[0], T = in0.shape[1];
  if ((o.batch && o.batch != B) || (o.seq && o.seq != T))
    throw Error("the plan was compiled for --batch " + std::to_string(B) + " --seq " + std::to_string(T) +
                "; re-export the model with that batch and sequence or pass those values");
  // How the labels relate to the tokens (a plan with one token input has none).
  std::string labelsWhy, labels = tokenInputs.size() < 2 && o.labels == "auto" ? std::string("shifted")
                                                                              : resolveLabels(p, o.labels, &labelsWhy);

  TokenData data = readTokens(o.data, o.dataDtype);
  checkVocabulary(p, tokenInputs[0], data, o.dataDtype);
  TokenData evalData;
  // Data parallelism: this rank's rows of the combined batch; rank 0 alone logs, evaluates and writes.
  Communicator *comm = communicator();
  int rank = comm ? comm->rank() : 0, ranks = worldSize();
  bool lead = rank == 0;
  Batcher train{&data, 0, data.size(), B, T, labels, int64_t(rank) * B}, eval = train;
  eval.firstRow = 0;
  if (!o.evalData.empty()) {
    evalData = readTokens(o.evalData, o.dataDtype);
    checkVocabulary(p, tokenInputs[0], evalData, o.dataDtype);
    eval = Batcher{&evalData, 0, evalData.size(), B, T, labels, 0};
  } else { // hold out the last 10% of the data (always, so batches do not depend on --eval-every)
    size_t cut = data.size() - data.size() / 10;
    train.end = cut;
    eval.begin = cut;
  }
  auto need = size_t(T) + 2;
  if (train.end - train.begin < need || (o.evalEvery && eval.end - eval.begin < need))
    throw Error(o.data + ": " + std::to_string(data.size()) + " tokens are too few for sequences of " +
                std::to_string(T));
  std::unique_ptr<Runner> evalEx;
  std::vector<std::string> evalShared; // the training state the eval plan reads (its parameters)
  if (o.evalEvery && lead) {
    if (o.evalPlan.empty())
      throw Error("--eval-every needs --eval-plan (the forward graph: fp8-opt model.onnx [--recipe R --eval] -o "
                  "eval.plan)");
    evalEx = makeRunner(loadPlan(o.evalPlan), ex.device()); // the training plan's device
    if (!evalEx->plan().gradients.empty() || !evalEx->plan().training.empty())
      throw Error("--eval-plan " + o.evalPlan + " is a training plan (evaluating would train the model); compile "
                  "the forward graph without --train: fp8-opt model.onnx -o eval.plan");
    // The eval plan shares the parameters by name: each must have the training plan's shape, and
    // at least one must be shared (else it is another model's plan).
    const Plan &ep = evalEx->plan();
    for (auto &[tid, kind] : p.constantKinds) {
      const PlanValue &tv = p.values[size_t(tid)];
      int id = ep.findValue(tv.name);
      if (kind != ConstantKind::State || id < 0 || !ep.constantKinds.count(id))
        continue;
      if (auto r = p.roles.find(tid); r != p.roles.end() && (r->second == "weight_shard" || r->second == "master_shard"))
        throw Error("--eval-every: the training plan shards its weights across ranks (" +
                    std::string(r->second == "weight_shard" ? "--shard-parameters" : "MS-AMP O3 with --shard-optimizer") +
                    "), and rank 0, which evaluates, holds 1/" + std::to_string(ranks) + " of '" + tv.name +
                    "'; evaluating sharded weights is not built yet: evaluate a checkpoint (its weights joined by "
                    "python -m octet.weights), or train without sharding the weights");
      if (ep.values[size_t(id)].shape != tv.shape)
        throw Error("--eval-plan " + o.evalPlan + ": '" + tv.name + "' is " + shapeString(ep.values[size_t(id)].shape) +
                    ", in the training plan " + shapeString(tv.shape) + "; compile both plans from one model");
      evalShared.push_back(tv.name);
    }
    if (evalShared.empty())
      throw Error("--eval-plan " + o.evalPlan + ": shares no parameter with the training plan (another model's "
                  "plan?); compile both plans from one model");
  }

  CheckpointMeta meta{0, o.seed, o.data, p.recipe, ranks, int64_t(ranks) * B * p.gradAccumSteps, T};
  bool shardedRun = !shardedStates(p).empty();
  if (!o.resume.empty()) {
    CheckpointMeta m = loadCheckpoint(o.resume, ex);
    // A run continues only where a step reads the same rows (rank r reads rows r*B.. of each step's
    // combined batch): ranks x batch x micro-batches equal, on any number of ranks.
    if ((m.worldSize != ranks || m.rows) && (m.rows != meta.rows || m.seq != meta.seq))
      throw Error(o.resume + ": written by " + std::to_string(m.worldSize) + " rank(s)" +
                  (m.rows ? " reading " + std::to_string(m.rows) + " rows of " + std::to_string(m.seq) +
                                " tokens a step"
                          : std::string(" (a checkpoint that does not record its rows a step)")) +
                  ", this run has " + std::to_string(ranks) + " reading " + std::to_string(meta.rows) + " of " +
                  std::to_string(meta.seq) + "; resume with --nproc-per-node " + std::to_string(m.worldSize) +
                  (m.rows ? " or a plan of " + std::to_string(m.rows) + " rows a step over the ranks" : std::string()));
    if (shardedRun && m.worldSize == ranks) { // this rank's part, written at the same step
      std::string own = shardCheckpointPath(o.resume, rank);
      if (loadCheckpoint(own, ex, rank).step != m.step)
        throw Error(own + ": written at another step than " + o.resume + " (an interrupted write); resume from "
                          "an earlier checkpoint");
    } else if (shardedRun) { // this rank's part of the whole, joined from the old ranks' files
      loadReshardedCheckpoint(o.resume, ex, rank, m);
    }
    if (m.seed != o.seed)
      throw Error(o.resume + ": written with --seed " + std::to_string(m.seed) + ", not " + std::to_string(o.seed) +
                  "; pass --seed " + std::to_string(m.seed) + " to continue that run");
    meta.step = m.step;
    if (!o.quiet && lead)
      std::cerr << "resumed from " << o.resume << " at step " << m.step << "\n";
  }

  std::ofstream log;
  bool csv = endsWith(o.log, ".csv");
  if (o.numericsEvery && (o.log.empty() || csv || ex.device() != "cpu"))
    throw Error("--numerics-every writes per-layer FP8 figures into a JSONL --log on the CPU reference (it reads "
                "every value of a step); add --log run.jsonl and --device cpu");
  if (!o.log.empty() && lead) {
    log.open(o.log, meta.step ? std::ios::app : std::ios::trunc);
    if (!log)
      throw Error(o.log + ": cannot write (" + std::strerror(errno) + ")");
    if (csv && !meta.step)
      log << "step,loss,lr,grad_norm,tokens_per_s,eval_loss,comm_bytes\n";
  }
  std::vector<std::string> fp8Scales;
  for (auto &[id, kind] : p.constantKinds) { // the names alone (state() would copy every tensor off the device)
    const std::string &name = p.values[size_t(id)].name;
    if (kind == ConstantKind::State && (endsWith(name, ".fp8.input.scale") || endsWith(name, ".fp8.weight.scale") ||
                                        endsWith(name, ".fp8.grad_output.scale")))
      fp8Scales.push_back(name);
  }
  std::vector<std::string> fp8Sampled; // each scale's amax history, then the scale
  for (const std::string &s : fp8Scales) {
    fp8Sampled.push_back(s.substr(0, s.size() - 5) + "amax_history");
    fp8Sampled.push_back(s);
  }
  ScalingMonitor clips(p); // what delayed scaling clipped between samples (the writer's thread alone)
  // The log's lines are made and written on the writer's thread while the next step runs (declared
  // after what its records read by reference: fp8Scales, clips; destroyed first, every record written).
  std::optional<LogWriter> writer;
  if (log.is_open()) // the lead rank's, when --log is given
    writer.emplace(log, 64, o.log);

  auto evaluate = [&]() {
    for (const std::string &name : evalShared) { // by name; only these leave the device
      TensorPtr t = ex.stateTensor(name);
      int id = evalEx->plan().findValue(name);
      DType want = evalEx->plan().values[size_t(id)].dtype; // FP16-stored weights (MS-AMP) upcast
      evalEx->setState(name, t->dtype == want ? t : std::make_shared<Tensor>(t->castTo(want)));
    }
    double sum = 0;
    for (int64_t i = 0; i < o.evalBatches; ++i) {
      auto [x, y] = eval.get(o.seed ^ 0xE7A1ull, i);
      std::map<std::string, TensorPtr> in{{in0.name, x}};
      if (tokenInputs.size() > 1)
        in[p.values[size_t(tokenInputs[1])].name] = y;
      evalEx->run(in, false);
      TensorPtr l = evalEx->value("loss");
      if (!l)
        l = evalEx->value(evalEx->plan().outputs[0]);
      sum += l->getDouble(0);
    }
    return sum / double(o.evalBatches);
  };

  bool quiet = o.quiet || !lead;
  bool tty = !quiet && ::isatty(2);
  if (!quiet && tokenInputs.size() == 2) // once every check has passed: the run's first line
    std::cerr << "labels: " << labels << " (" << labelsWhy << ")\n";
  auto t0 = std::chrono::steady_clock::now();
  int64_t first = meta.step;
  const int64_t micro = p.gradAccumSteps; // micro-batches per optimizer step
  for (int64_t step = meta.step; step < o.steps; ++step) {
    if (comm)
      comm->resetCounters();
    // Gradient accumulation: the step's micro-batches in turn, the optimizer after the last; the
    // step's loss is their mean (what the mean over all their rows is, for equal-sized batches).
    double loss = 0;
    for (int64_t m = 0; m < micro; ++m) {
      auto [x, y] = train.get(o.seed, step, m * ranks * B);
      std::map<std::string, TensorPtr> in{{in0.name, x}};
      if (tokenInputs.size() > 1)
        in[p.values[size_t(tokenInputs[1])].name] = y;
      setFirstMicroBatch(p, in, m == 0);
      ex.run(in, true, m + 1 == micro);
      double l = scalarOf(ex, "loss");
      if (std::isnan(l))
        l = ex.value(p.outputs[0])->getDouble(0);
      loss += l / double(micro);
    }
    uint64_t commBytes = 0; // payload this rank all-reduced in the step, counted by the communicator
    JsonOut commByType = JsonOut::object();
    if (comm)
      for (auto &[type, n] : comm->bytesReduced()) {
        commBytes += n;
        commByType[type] = n;
      }
    double lr = scalarOf(ex, "octet.lr"), gnorm = scalarOf(ex, "octet.grad_norm");
    if (!std::isfinite(loss))
      throw Error("step " + std::to_string(step + 1) + ": the loss is " + jsonNumber(loss) +
                  "; lower --lr or clip gradients (fp8-opt --clip-grad-norm)");
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double tps = double((step + 1 - first) * micro * B * T * ranks) / std::max(elapsed, 1e-9);
    double eta = elapsed / double(step + 1 - first) * double(o.steps - step - 1);
    double evalLoss = NAN;
    bool evalDue = o.evalEvery && ((step + 1) % o.evalEvery == 0 || step + 1 == o.steps);
    if (evalEx && evalDue)
      evalLoss = evaluate();
    if (writer) {
      if (csv) {
        std::ostringstream line;
        line << step + 1 << "," << jsonNumber(loss) << "," << jsonNumber(lr) << "," << jsonNumber(gnorm) << ","
             << jsonNumber(tps) << "," << (std::isnan(evalLoss) ? "" : jsonNumber(evalLoss)) << ","
             << (comm ? std::to_string(commBytes) : "");
        writer->push([text = line.str()] { return text; });
      } else {
        // One object per line (Json.h: strings escaped, non-finite numbers null).
        JsonOut j = {{"step", step + 1}, {"loss", loss}, {"lr", lr}, {"grad_norm", gnorm}, {"tokens_per_s", tps}};
        if (!std::isnan(evalLoss))
          j["eval_loss"] = evalLoss;
        if (comm) {
          j["world_size"] = ranks;
          j["comm_bytes"] = commByType;
        }
        std::vector<TensorPtr> sampled; // copies this loop owns; reduced and formatted by the writer
        if (!fp8Scales.empty() && ((step + 1) % o.logEvery == 0 || step + 1 == o.steps)) {
          j["fp8"] = JsonOut::object(); // its place among the keys; filled in on the writer's thread
          sampled = ex.stateTensors(fp8Sampled); // only these leave the device
        }
        if (o.numericsEvery && (step + 1) % o.numericsEvery == 0) {
          JsonOut &num = j["numerics"] = JsonOut::array();
          for (const GemmNumerics &g : gemmNumerics(ex)) {
            auto cast = [](const GemmNumerics::Cast &c) {
              return JsonOut{{"role", c.role}, {"underflow", c.underflow}, {"saturated", c.saturated}};
            };
            num.push_back({{"layer", g.layer}, {"gemm", g.gemm}, {"sqnr_db", g.sqnrDb}, {"a", cast(g.a)}, {"b", cast(g.b)}});
          }
        }
        writer->push([j = std::move(j), sampled = std::move(sampled), &fp8Scales, &clips, at = step + 1]() mutable {
          for (size_t i = 0; i < fp8Scales.size() && !sampled.empty(); ++i) {
            const std::string &s = fp8Scales[i];
            std::string base = s.substr(0, s.size() - 5); // "...fp8.input."
            double amax = 0, last = NAN;
            TensorPtr h = sampled[2 * i], scale = sampled[2 * i + 1];
            if (h) {
              for (int64_t k = 0; k < h->numel(); ++k)
                amax = std::max(amax, h->getDouble(k));
              last = h->numel() ? h->getDouble(0) : NAN;
            }
            JsonOut &e = j["fp8"][base.substr(0, base.size() - 1)] = {
                {"amax", amax}, {"amax_last", last}, {"scale", scale ? scale->getDouble(0) : NAN}};
            if (h && scale && scale->numel() == 1)
              if (auto r = clips.sample(s, at, *h, float(scale->getDouble(0)))) {
                e["clipped"] = r->clipped;
                e["range_used"] = r->rangeUsed;
              }
          }
          return dumpJson(j);
        });
      }
    }
    if (!quiet && (tty || (step + 1) % o.logEvery == 0 || step + 1 == o.steps)) {
      int width = 24, filled = int(double(step + 1) / double(o.steps) * width);
      char buf[256];
      std::snprintf(buf, sizeof buf, "step %lld/%lld [%s%s] loss %.4f%s | %.0f tok/s | ETA %s", (long long)(step + 1),
                    (long long)o.steps, std::string(size_t(filled), '=').c_str(),
                    std::string(size_t(width - filled), ' ').c_str(), loss,
                    std::isnan(evalLoss) ? "" : (" | eval " + std::to_string(evalLoss).substr(0, 6)).c_str(), tps,
                    hms(eta).c_str());
      std::cerr << (tty ? "\r" : "") << buf << (tty && step + 1 < o.steps ? "" : "\n") << std::flush;
    }
    bool checkpointDue =
        !o.checkpoint.empty() && ((o.checkpointEvery && (step + 1) % o.checkpointEvery == 0) || step + 1 == o.steps);
    if (checkpointDue) {
      meta.step = step + 1;
      if (writer) // every line up to the checkpoint's step on disk first: a run killed later resumes here
        writer->drain();
      if (shardedRun) { // every rank its part; rank 0 the rest last, once every part is written
        writeCheckpoint(shardCheckpointPath(o.checkpoint, rank), ex, meta, rank);
        comm->barrierWithin(std::chrono::seconds(o.rank0Timeout));
      }
      if (lead)
        writeCheckpoint(o.checkpoint, ex, meta);
    }
    bool weightsDue =
        !o.saveWeights.empty() &&
        (step + 1 == o.steps || (!o.checkpoint.empty() && o.checkpointEvery && (step + 1) % o.checkpointEvery == 0));
    if (weightsDue && lead)
      writeSafetensors(o.saveWeights, trainedWeights(ex),
                       {{"format", "pt"}, {"producer", "fp8-run"}, {"step", std::to_string(step + 1)}});
    // Rank 0 evaluated or wrote files alone this step (every rank knows when: the same flags): the
    // others wait for it here, under --rank0-timeout, rather than in the next step's first
    // collective under --comm-timeout, which a long evaluation or checkpoint would outlast.
    if (comm && comm->size() > 1 && step + 1 < o.steps && (evalDue || checkpointDue || weightsDue)) {
      try {
        comm->barrierWithin(std::chrono::seconds(o.rank0Timeout));
      } catch (const Error &e) {
        if (lead)
          throw;
        throw Error(std::string(e.what()) + "; rank 0 was evaluating or writing files at step " +
                    std::to_string(step + 1) + ": give it longer with --rank0-timeout");
      }
    }
  }
  if (writer) // the last lines on disk, or the run fails naming the log
    writer->drain();
  return 0;
}

} // namespace octet::rt
