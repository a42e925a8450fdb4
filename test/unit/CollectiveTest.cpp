//===- CollectiveTest.cpp - The Gloo engine against a reference -----------===//
//
// Ranks are threads of this process, each with its own communicator, meeting
// through the rendezvous store as fp8-run's processes do. Every reduction is
// compared with the same arithmetic done here: float32 sums, NaN-propagating
// max, and FP16/BF16/FP8 sums decoded, added in float and rounded to nearest
// even with saturation.
//
//===----------------------------------------------------------------------===//
#include "octet/runtime/Distributed.h"
#include "octet/runtime/Fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

using namespace octet::rt;

namespace {

/// Runs body(rank, communicator) on `n` ranks (threads); rethrows nothing, records failures.
void onRanks(int n, std::chrono::milliseconds timeout, const std::function<void(int, Communicator &)> &body) {
  int port = freeLocalPort();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        DistEnv env;
        env.rank = r, env.size = n, env.present = true, env.masterPort = env.storePort = port;
        auto comm = connectRanks(env, "gloo", timeout);
        body(r, *comm);
      } catch (const std::exception &e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto &t : threads)
    t.join();
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
}

/// A value of rank r at index i, spread over several binades (and signs) so that roundings differ.
float valueOf(int r, size_t i) { return float((int(i % 17) - 8) * (r + 1)) * std::ldexp(1.0f, int(i % 11) - 6) / 3.0f; }

} // namespace

TEST(Collective, Float32SumAndMaxOverThreeRanks) {
  const int n = 3;
  const size_t count = 100003; // more than one of Gloo's segments, not a multiple of the ranks
  onRanks(n, std::chrono::seconds(20), [&](int r, Communicator &c) {
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.size(), n);
    std::vector<float> x(count), m(count);
    for (size_t i = 0; i < count; ++i)
      x[i] = m[i] = valueOf(r, i);
    if (r == 1)
      m[7] = NAN; // max propagates NaN to every rank
    c.allReduce(x.data(), count, DType::F32, ReduceOp::Sum);
    c.allReduce(m.data(), count, DType::F32, ReduceOp::Max);
    for (size_t i = 0; i < count; ++i) {
      float sum = 0, mx = -INFINITY;
      for (int k = 0; k < n; ++k)
        sum += valueOf(k, i), mx = std::max(mx, valueOf(k, i));
      ASSERT_NEAR(x[i], sum, 1e-6f * std::fabs(sum) + 1e-30f) << i;
      if (i == 7)
        ASSERT_TRUE(std::isnan(m[i]));
      else
        ASSERT_EQ(m[i], mx) << i;
    }
    std::vector<float> a(count);
    for (size_t i = 0; i < count; ++i)
      a[i] = valueOf(r, i);
    c.allReduce(a.data(), count, DType::F32, ReduceOp::Avg);
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(a[i], x[i] / float(n)) << i; // the sum, divided
  });
}

TEST(Collective, LowPrecisionSumsRoundOnceAtTwoRanks) {
  // With two ranks each element is one addition and one rounding: exactly encode(decode(a) + decode(b)).
  const size_t count = 4096;
  auto codes = [](int r, size_t i) { return uint8_t((i * 37 + size_t(r) * 91) & 0x7f) | uint8_t((i & 1) << 7); };
  onRanks(2, std::chrono::seconds(20), [&](int r, Communicator &c) {
    std::vector<uint8_t> e4(count), e5(count);
    std::vector<uint16_t> h(count), bf(count);
    for (size_t i = 0; i < count; ++i) {
      e4[i] = codes(r, i) == 0x7f ? 0x7e : codes(r, i); // E4M3FN's 0x7f is NaN
      e5[i] = codes(r, i) >= 0x7c ? 0x7b : codes(r, i); // E5M2's 0x7c.. are Inf and NaN
      h[i] = floatToHalf(valueOf(r, i));
      bf[i] = floatToBf16(valueOf(r, i));
    }
    c.allReduce(e4.data(), count, DType::F8E4M3FN, ReduceOp::Sum);
    c.allReduce(e5.data(), count, DType::F8E5M2, ReduceOp::Sum);
    c.allReduce(h.data(), count, DType::F16, ReduceOp::Sum);
    c.allReduce(bf.data(), count, DType::BF16, ReduceOp::Sum);
    for (size_t i = 0; i < count; ++i) {
      auto in4 = [&](int k) { return codes(k, i) == 0x7f ? uint8_t(0x7e) : codes(k, i); };
      auto in5 = [&](int k) { return codes(k, i) >= 0x7c ? uint8_t(0x7b) : codes(k, i); };
      float s4 = fp8Decode(in4(0), Fp8Format::E4M3FN) + fp8Decode(in4(1), Fp8Format::E4M3FN);
      float s5 = fp8Decode(in5(0), Fp8Format::E5M2) + fp8Decode(in5(1), Fp8Format::E5M2);
      ASSERT_EQ(e4[i], fp8Encode(s4, Fp8Format::E4M3FN, true)) << i;
      ASSERT_EQ(e5[i], fp8Encode(s5, Fp8Format::E5M2, true)) << i;
      float sh = halfToFloat(floatToHalf(valueOf(0, i))) + halfToFloat(floatToHalf(valueOf(1, i)));
      float sb = bf16ToFloat(floatToBf16(valueOf(0, i))) + bf16ToFloat(floatToBf16(valueOf(1, i)));
      ASSERT_EQ(h[i], floatToHalf(sh)) << i;
      ASSERT_EQ(bf[i], floatToBf16(sb)) << i;
    }
    // FP8 sums saturate: 448 + 448 stays 448 in E4M3FN.
    uint8_t big = fp8Encode(448.0f, Fp8Format::E4M3FN);
    c.allReduce(&big, 1, DType::F8E4M3FN, ReduceOp::Sum);
    EXPECT_EQ(fp8Decode(big, Fp8Format::E4M3FN), 448.0f);
    uint8_t q = 0x38;
    EXPECT_THROW(c.allReduce(&q, 1, DType::F8E4M3FN, ReduceOp::Avg), Error);
  });
}

// A sharded optimizer's collectives: reduce-scatter gives rank r the slice r of the reduction of
// every rank's buffer (the all-reduce's bits: the same reduction and rounding), in place or into
// another buffer; all-gather puts rank r's bytes at r * bytes of every rank's buffer.
TEST(Collective, ReduceScatterKeepsEachRanksSliceOfTheAllReduce) {
  const int n = 3;
  const size_t count = 33337; // a slice; the buffers hold n of them
  onRanks(n, std::chrono::seconds(20), [&](int r, Communicator &c) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      std::vector<float> send(n * count), whole(n * count), slice(count);
      for (size_t i = 0; i < send.size(); ++i)
        send[i] = whole[i] = valueOf(r, i);
      c.allReduce(whole.data(), whole.size(), DType::F32, op);
      c.reduceScatter(send.data(), slice.data(), count, DType::F32, op);
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(slice[i], whole[size_t(r) * count + i]) << int(op) << " " << i;
      // In place: recv is this rank's slice of send.
      float *mine = send.data() + size_t(r) * count;
      c.reduceScatter(send.data(), mine, count, DType::F32, op);
      ASSERT_EQ(std::memcmp(mine, slice.data(), count * sizeof(float)), 0);
    }
    // E4M3 codes at two ranks' worth of sums: each code the encoded sum of the decoded inputs.
    std::vector<uint8_t> codes(n * 64), out(64);
    for (size_t i = 0; i < codes.size(); ++i)
      codes[i] = uint8_t((i * 29 + size_t(r) * 7) % 0x60);
    c.reduceScatter(codes.data(), out.data(), 64, DType::F8E4M3FN, ReduceOp::Sum);
    for (size_t i = 0; i < 64; ++i) {
      size_t at = size_t(r) * 64 + i;
      float sum = 0;
      for (int k = 0; k < n; ++k) // Gloo's ring adds in rank order from some start: compare within a rounding
        sum += fp8Decode(uint8_t((at * 29 + size_t(k) * 7) % 0x60), Fp8Format::E4M3FN);
      float got = fp8Decode(out[i], Fp8Format::E4M3FN);
      ASSERT_LE(std::fabs(got - sum), std::fabs(sum) * 0.13f + 1e-3f) << i;
    }
    EXPECT_THROW(c.reduceScatter(codes.data(), out.data(), 64, DType::F8E4M3FN, ReduceOp::Avg), Error);
  });
}

TEST(Collective, AllGatherPutsEachRanksBytesAtItsOffset) {
  const int n = 4;
  const size_t bytes = 100001;
  onRanks(n, std::chrono::seconds(20), [&](int r, Communicator &c) {
    std::vector<uint8_t> mine(bytes), all(n * bytes, 0xee);
    for (size_t i = 0; i < bytes; ++i)
      mine[i] = uint8_t(i * 13 + size_t(r) * 101);
    c.allGather(mine.data(), all.data(), bytes);
    for (int k = 0; k < n; ++k)
      for (size_t i = 0; i < bytes; i += 97)
        ASSERT_EQ(all[size_t(k) * bytes + i], uint8_t(i * 13 + size_t(k) * 101)) << k << " " << i;
    // In place: send is this rank's slice of recv.
    std::vector<uint8_t> again(n * bytes, 0);
    std::memcpy(again.data() + size_t(r) * bytes, mine.data(), bytes);
    c.allGather(again.data() + size_t(r) * bytes, again.data(), bytes);
    EXPECT_EQ(again, all);
  });
}

TEST(Collective, BroadcastAndBarrier) {
  onRanks(4, std::chrono::seconds(20), [&](int r, Communicator &c) {
    std::vector<char> buf(1000, char(r));
    c.broadcast(buf.data(), buf.size(), 2);
    for (char v : buf)
      ASSERT_EQ(v, 2);
    c.barrier();
  });
}

TEST(Collective, APeerThatNeverComesIsATimeoutNamingIt) {
  std::string message;
  int port = freeLocalPort();
  std::thread late([&] {
    // Rank 1 connects, then never joins the all-reduce; rank 0's fails after the timeout.
    DistEnv env;
    env.rank = 1, env.size = 2, env.present = true, env.masterPort = env.storePort = port;
    auto comm = connectRanks(env, "gloo", std::chrono::seconds(2));
    std::this_thread::sleep_for(std::chrono::seconds(4));
  });
  DistEnv env;
  env.rank = 0, env.size = 2, env.present = true, env.masterPort = env.storePort = port;
  auto comm = connectRanks(env, "gloo", std::chrono::seconds(2));
  float x = 1;
  auto t0 = std::chrono::steady_clock::now();
  try {
    comm->allReduce(&x, 1, DType::F32, ReduceOp::Sum);
  } catch (const Error &e) {
    message = e.what();
  }
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  late.join();
  EXPECT_NE(message.find("rank 0: all-reduce failed: rank 1 is gone or did not answer within 2 s"), std::string::npos)
      << message;
  EXPECT_LT(waited, 10.0);
}

TEST(Collective, NoStoreIsAOneLineError) {
  DistEnv env;
  env.rank = 1, env.size = 2, env.present = true, env.masterPort = env.storePort = freeLocalPort();
  try {
    connectRanks(env, "gloo", std::chrono::milliseconds(500));
    FAIL() << "connected to nothing";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("rendezvous: no store at 127.0.0.1:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is rank 0 running"), std::string::npos) << e.what();
  }
}

TEST(Collective, EnvironmentIsReadAsTorchrunWritesIt) {
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("RANK", "3", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  ::setenv("MASTER_ADDR", "node7", 1);
  ::setenv("MASTER_PORT", "29400", 1);
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  DistEnv e = distEnvFromEnvironment();
  EXPECT_TRUE(e.present);
  EXPECT_EQ(e.size, 4);
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.masterAddr, "node7");
  EXPECT_EQ(e.masterPort, 29400);
  EXPECT_EQ(e.storePort, 29401); // torchrun's agent serves its own store on MASTER_PORT
  ::setenv("RANK", "4", 1);
  try {
    distEnvFromEnvironment();
    FAIL() << "RANK 4 of 4 accepted";
  } catch (const Error &err) {
    EXPECT_EQ(std::string(err.what()), "environment: RANK='4' is not an integer in [0, 3]");
  }
  for (const char *v : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"})
    ::unsetenv(v);
  EXPECT_FALSE(distEnvFromEnvironment().present);
}

/// srun's tasks: SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, the master the step's first
/// host; a batch script's own process (one task, or no step) is no rank.
TEST(Collective, EnvironmentIsReadAsSrunWritesIt) {
  ::setenv("SLURM_PROCID", "5", 1);
  ::setenv("SLURM_STEP_NUM_TASKS", "8", 1);
  ::setenv("SLURM_LOCALID", "1", 1);
  ::setenv("SLURM_STEP_NODELIST", "gpu[017-020],login2", 1);
  ::setenv("SLURM_JOB_NODELIST", "gpu[001-020],login2", 1);
  DistEnv e = distEnvFromEnvironment();
  EXPECT_TRUE(e.present);
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.size, 8);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.localRank, 1);
  EXPECT_EQ(e.masterAddr, "gpu017");
  EXPECT_EQ(e.masterPort, 29500);
  ::setenv("MASTER_ADDR", "10.0.0.9", 1); // the user's word stands
  EXPECT_EQ(distEnvFromEnvironment().masterAddr, "10.0.0.9");
  ::unsetenv("MASTER_ADDR");
  ::setenv("SLURM_PROCID", "8", 1);
  try {
    distEnvFromEnvironment();
    FAIL() << "task 8 of 8 accepted";
  } catch (const Error &err) {
    EXPECT_EQ(std::string(err.what()), "environment: SLURM_PROCID='8' is not an integer in [0, 7]");
  }
  ::setenv("SLURM_STEP_NUM_TASKS", "1", 1); // one task: a process of its own
  EXPECT_FALSE(distEnvFromEnvironment().present);
  for (const char *v : {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"})
    ::unsetenv(v);
}

/// mpirun's ranks: Open MPI's OMPI_COMM_WORLD_*, MPICH's PMI_*; the master MASTER_ADDR, or the
/// loopback where every rank is on this host, else a one-line error.
TEST(Collective, EnvironmentIsReadAsMpirunWritesIt) {
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  ::setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
  DistEnv e = distEnvFromEnvironment();
  EXPECT_EQ(e.launcher, "mpi");
  EXPECT_EQ(e.size, 4);
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.localRank, 2);
  EXPECT_EQ(e.masterAddr, "127.0.0.1");
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1); // two hosts
  try {
    distEnvFromEnvironment();
    FAIL() << "ranks on two hosts without MASTER_ADDR accepted";
  } catch (const Error &err) {
    EXPECT_EQ(std::string(err.what()), "environment: mpirun started 4 ranks on more than one host and MASTER_ADDR is "
                                       "not set; pass rank 0's host (mpirun -x MASTER_ADDR=HOST -x MASTER_PORT=PORT)");
  }
  ::setenv("MASTER_ADDR", "node3", 1);
  EXPECT_EQ(distEnvFromEnvironment().masterAddr, "node3");
  for (const char *v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                        "OMPI_COMM_WORLD_LOCAL_SIZE"})
    ::unsetenv(v);
  ::setenv("PMI_SIZE", "3", 1); // MPICH's Hydra
  ::setenv("PMI_RANK", "1", 1);
  e = distEnvFromEnvironment();
  EXPECT_EQ(e.launcher, "mpi");
  EXPECT_EQ(e.size, 3);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.masterAddr, "node3");
  for (const char *v : {"PMI_SIZE", "PMI_RANK", "MASTER_ADDR"})
    ::unsetenv(v);
  EXPECT_FALSE(distEnvFromEnvironment().present);
}

TEST(Collective, FirstHostOfASlurmHostList) {
  EXPECT_EQ(firstSlurmHost("gpu[007-010,012],cpu1"), "gpu007");
  EXPECT_EQ(firstSlurmHost("node-a,node-b"), "node-a");
  EXPECT_EQ(firstSlurmHost("rack[2-3]-n[08,11]"), "rack2-n08");
  EXPECT_EQ(firstSlurmHost("n[9-10]"), "n9");
  EXPECT_EQ(firstSlurmHost("localhost"), "localhost");
  EXPECT_EQ(firstSlurmHost(""), "");
  EXPECT_THROW(firstSlurmHost("gpu[007-010"), Error);
}

TEST(Launcher, RanksShareTheHostsCoresForBlas) {
  EXPECT_EQ(rankBlasThreads(2, 16, false), "8");
  EXPECT_EQ(rankBlasThreads(3, 16, false), "5");
  EXPECT_EQ(rankBlasThreads(4, 2, false), "1"); // more ranks than cores: one each
  EXPECT_EQ(rankBlasThreads(2, 16, true), "");  // the user's OPENBLAS/OMP_NUM_THREADS stand
  EXPECT_EQ(rankBlasThreads(1, 16, false), ""); // one rank: OpenBLAS's own default
}
