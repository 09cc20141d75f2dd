// The kiln program on ONNX models, run as a user would: `kiln import`, `kiln run MODEL.onnx`
// and `kiln onnx-test` on cases of ONNX's own test data (libonnx-testdata), copied into the
// test's folder and, for the failure cases, broken on purpose.
#include <gtest/gtest.h>

#include <filesystem>

#include "frontend/onnx/conformance.h"
#include "ir/npy.h"
#include "runtime/cpu/jit.h"
#include "tests/support/cli_fixture.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

class OnnxCli : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (!fs::exists(node_case("test_relu"))) GTEST_SKIP() << "ONNX's test data is not installed (libonnx-testdata)";
  }
  static fs::path node_case(const std::string& name) { return fs::path(onnx::test_data_dir()) / "node" / name; }
  // Copies ONNX's case `name` into DIR/cases/name.
  void copy_case(const std::string& name, const std::string& as = "") const {
    fs::create_directories(path("cases"));
    fs::copy(node_case(name), path("cases/" + (as.empty() ? name : as)), fs::copy_options::recursive);
  }
};

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST_F(OnnxCli, OnnxTestCountsPassedFailedAndUnsupportedWithTheirCauses) {
  copy_case("test_relu");
  copy_case("test_gridsample");             // an operator kiln does not import
  copy_case("test_reshape_extended_dims");  // its shape is a model input: specialized on its value
  // A case whose expected output is another case's: kiln's result cannot match it.
  copy_case("test_relu", "test_relu_wrong");
  fs::copy_file(node_case("test_sigmoid") / "test_data_set_0" / "output_0.pb",
                path("cases/test_relu_wrong/test_data_set_0/output_0.pb"), fs::copy_options::overwrite_existing);
  std::vector<std::string> devices{"reference"};
  if (runtime::cpu::jit_available()) devices.push_back("cpu");  // (the GPU machine's build has no LLVM)
  for (const std::string& device : devices) {
    CliResult r = kiln(fmt::format("onnx-test cases --device {} --jobs 2", device));
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_TRUE(has(r.out, "2 passed, 1 failed, 1 unsupported")) << r.out;
    EXPECT_TRUE(has(r.out, "failed      test_relu_wrong: data set 0: y[")) << r.out;
    EXPECT_TRUE(has(r.out, "operator GridSample")) << r.out;
    EXPECT_TRUE(has(r.out, "(1 of the passed cases give a shape")) << r.out;
  }
  CliResult only = kiln("onnx-test cases --device reference --filter '^test_relu$' --verbose");
  EXPECT_EQ(only.rc, 0) << only.out << only.err;
  EXPECT_TRUE(has(only.out, "passed      test_relu\n")) << only.out;
  EXPECT_TRUE(has(only.out, "1 passed, 0 failed, 0 unsupported")) << only.out;
  CliResult none = kiln("onnx-test cases --filter nothing_matches");
  EXPECT_EQ(none.rc, 1);
  EXPECT_TRUE(has(none.err, "matches none of the cases")) << none.err;
  CliResult bad_re = kiln("onnx-test cases --filter '('");
  EXPECT_EQ(bad_re.rc, 1);
  EXPECT_TRUE(has(bad_re.err, "is not a regular expression")) << bad_re.err;
  CliResult not_dir = kiln("onnx-test no_such_folder");
  EXPECT_EQ(not_dir.rc, 1);
  EXPECT_TRUE(has(not_dir.err, "is not a folder of ONNX test cases")) << not_dir.err;
}

TEST_F(OnnxCli, ImportWritesTheGraphAndRunReadsTheModelsInputsByName) {
  copy_case("test_gemm_default_matrix_bias");
  CliResult imp = kiln("import cases/test_gemm_default_matrix_bias/model.onnx -o gemm.kir");
  EXPECT_EQ(imp.rc, 0) << imp.err;
  EXPECT_TRUE(has(imp.out, "wrote gemm.kir")) << imp.out;
  EXPECT_EQ(kiln("check gemm.kir").rc, 0);
  // The same model run from .onnx with random inputs, compiled and checked against the
  // interpreter (where there is a CPU JIT), its output saved under the model's output name.
  std::string compiled = runtime::cpu::jit_available() ? "--device cpu --check" : "";
  CliResult run = kiln("run cases/test_gemm_default_matrix_bias/model.onnx " + compiled + " --save-outputs out");
  EXPECT_EQ(run.rc, 0) << run.out << run.err;
  EXPECT_TRUE(fs::exists(path("out/y.npy"))) << run.out;
  CliResult refused = kiln("import " + (node_case("test_gridsample") / "model.onnx").string() + " -o gridsample.kir");
  EXPECT_EQ(refused.rc, 1);
  EXPECT_TRUE(has(refused.err, "GridSample (1 node")) << refused.err;
}

}  // namespace
}  // namespace kiln::testing
