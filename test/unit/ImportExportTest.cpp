//===- ImportExportTest.cpp - The importer/exporter as a library ----------===//
#include "octet/Conversion/ONNXExport.h"
#include "octet/Conversion/ONNXImport.h"
#include "octet/Dialect/ONNX/IR/ONNX.h"
#include "octet/InitAll.h"
#include "octet/Support/ProtoIO.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <map>
#include <sstream>

using namespace mlir;

namespace {

std::string modelsDir() {
  const char *d = std::getenv("OCTET_TEST_MODELS");
  return d ? d : "models";
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::map<std::string, int> opCounts(ModuleOp m) {
  std::map<std::string, int> counts;
  m.walk([&](Operation *op) { ++counts[op->getName().getStringRef().str()]; });
  return counts;
}

class ImportExportTest : public ::testing::Test {
protected:
  ImportExportTest() {
    octet::registerAllDialects(registry);
    ctx = std::make_unique<MLIRContext>(registry);
  }
  DialectRegistry registry;
  std::unique_ptr<MLIRContext> ctx;
};

TEST_F(ImportExportTest, ImportFromMemoryExportAndReimportKeepsEveryOp) {
  std::string bytes = readFile(modelsDir() + "/tensors.onnx");
  ASSERT_FALSE(bytes.empty());
  octet::ImportOptions opts;
  opts.fileName = "tensors.onnx";
  auto module = octet::importOnnxBuffer(bytes, ctx.get(), opts);
  ASSERT_TRUE(module);
  std::string exported;
  ASSERT_TRUE(succeeded(octet::exportToOnnxBytes(*module, exported)));
  auto again = octet::importOnnxBuffer(exported, ctx.get(), opts);
  ASSERT_TRUE(again);
  EXPECT_EQ(opCounts(*module), opCounts(*again));
  EXPECT_EQ(opCounts(*module)["onnx.initializer"], 9);
}

TEST_F(ImportExportTest, ExportKeepsNamesAndOpsetOfTheModel) {
  std::string bytes = readFile(modelsDir() + "/symbolic.onnx");
  auto module = octet::importOnnxBuffer(bytes, ctx.get(), {});
  ASSERT_TRUE(module);
  onnx::ModelProto model;
  ASSERT_TRUE(succeeded(octet::exportToOnnx(*module, model)));
  EXPECT_EQ(model.graph().input(0).name(), "x");
  EXPECT_EQ(model.graph().input(0).type().tensor_type().shape().dim(0).dim_param(), "batch");
  EXPECT_EQ(model.graph().output(0).name(), "p");
  bool sawMs = false;
  for (const auto &o : model.opset_import())
    sawMs |= o.domain() == "com.microsoft" && o.version() == 1;
  EXPECT_TRUE(sawMs);
}

TEST_F(ImportExportTest, GarbageBytesFailWithADiagnosticNotACrash) {
  std::string seen;
  ScopedDiagnosticHandler handler(ctx.get(), [&](Diagnostic &d) {
    seen = d.str();
    return success();
  });
  auto module = octet::importOnnxBuffer("\x08\x07garbage\xff\xff", ctx.get(), {});
  EXPECT_FALSE(module);
  EXPECT_NE(seen.find("not a valid ONNX model"), std::string::npos) << seen;
}

TEST(ProtoIOTest, AtomicWriteReplacesTheFileAndLeavesNoTemporaries) {
  char dirTemplate[] = "/tmp/octet-unit-XXXXXX";
  std::string dir = mkdtemp(dirTemplate);
  std::string path = dir + "/out.bin";
  std::string error;
  ASSERT_TRUE(octet::proto::writeFileAtomically(path, "first", error)) << error;
  ASSERT_TRUE(octet::proto::writeFileAtomically(path, "second", error)) << error;
  EXPECT_EQ(readFile(path), "second");
  int entries = 0;
  DIR *d = opendir(dir.c_str());
  while (dirent *e = readdir(d))
    entries += e->d_name[0] != '.';
  closedir(d);
  EXPECT_EQ(entries, 1);
  EXPECT_FALSE(octet::proto::writeFileAtomically(dir + "/no/such/dir/x", "x", error));
  EXPECT_NE(error.find("temporary"), std::string::npos) << error;
}

TEST(ProtoIOTest, TruncatedModelIsRejected) {
  std::string bytes = readFile(modelsDir() + "/tensors.onnx");
  onnx::ModelProto model;
  std::string error;
  EXPECT_TRUE(octet::proto::parseModel(bytes.data(), bytes.size(), model, error)) << error;
  EXPECT_FALSE(octet::proto::parseModel(bytes.data(), bytes.size() / 2, model, error));
  EXPECT_FALSE(octet::proto::parseModel(bytes.data(), 0, model, error));
}

} // namespace
