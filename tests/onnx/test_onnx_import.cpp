// The importer on small models built here: folding of exporters' shape computations, weights as
// constants or as inputs, symbolic dims, and the errors (every unsupported operator at once, an
// unsupported attribute named, a malformed file, a too-new opset).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "frontend/onnx/onnx.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"

namespace kiln {
namespace {

using ::onnx::ModelProto;
using ::onnx::NodeProto;
using ::onnx::TensorProto;

struct ModelBuilder {
  ModelProto m;
  explicit ModelBuilder(int64_t opset = 17) {
    m.set_ir_version(8);
    m.set_producer_name("kiln-test");
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m.mutable_graph()->set_name("g");
  }
  void input(const std::string& name, int elem, std::vector<std::variant<int64_t, std::string>> dims) {
    auto* vi = m.mutable_graph()->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (auto& d : dims) {
      auto* dim = shape->add_dim();
      if (auto* v = std::get_if<int64_t>(&d)) dim->set_dim_value(*v);
      else dim->set_dim_param(std::get<std::string>(d));
    }
  }
  void output(const std::string& name) { m.mutable_graph()->add_output()->set_name(name); }
  NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs, const std::string& name = "") {
    NodeProto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + outs[0] : name);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  void ints_initializer(const std::string& name, std::vector<int64_t> v) {
    TensorProto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  }
  void float_initializer(const std::string& name, std::vector<int64_t> dims, float fill) {
    TensorProto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    std::string raw(static_cast<size_t>(n) * 4, '\0');
    for (int64_t i = 0; i < n; ++i) std::memcpy(&raw[i * 4], &fill, 4);
    t->set_raw_data(raw);
  }
  onnx::ImportedModel load(const onnx::ImportOptions& o = {}) { return onnx::load_from_bytes(m.SerializeAsString(), "test.onnx", o); }
};

void set_int_attr(NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

int count_ops(const Graph& g, Op op) {
  int k = 0;
  for (Node* n : g.nodes()) k += n->op() == op;
  return k;
}

TEST(OnnxImport, AnExportersShapeComputationFoldsToOneReshape) {
  // x [2,3,4] -> Shape -> Gather(0) -> Unsqueeze -> Concat with [-1] -> Reshape: x as [2, 12].
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {int64_t{2}, int64_t{3}, int64_t{4}});
  b.ints_initializer("zero", {0});
  b.ints_initializer("minus_one", {-1});
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "zero"}, {"n"});
  b.node("Concat", {"n", "minus_one"}, {"shape"});
  set_int_attr(b.m.mutable_graph()->mutable_node(2), "axis", 0);
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("y");
  onnx::ImportedModel m = b.load();
  EXPECT_EQ(m.graph.num_nodes(), 1u) << print_graph(m.graph);
  EXPECT_EQ(count_ops(m.graph, Op::Reshape), 1);
  EXPECT_EQ(m.graph.outputs()[0].meta().shape, (Shape{2, 12}));
  EXPECT_EQ(m.input_names, std::vector<std::string>{"x"});
  EXPECT_EQ(m.output_names, std::vector<std::string>{"y"});
}

TEST(OnnxImport, AConstantOfAHugeShapeIsComputedAtRunTimeNotAtImport) {
  // ConstantOfShape [64, 1024, 1024] (64M values) from a known shape: a full node, not a folded
  // 256 MB weight.
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {int64_t{64}, int64_t{1024}, int64_t{1024}});
  b.ints_initializer("shape", {64, 1024, 1024});
  b.node("ConstantOfShape", {"shape"}, {"ones"});
  b.node("Add", {"x", "ones"}, {"y"});
  b.output("y");
  onnx::ImportedModel m = b.load();
  EXPECT_TRUE(m.weights.empty());
  EXPECT_EQ(count_ops(m.graph, Op::Full), 1) << print_graph(m.graph);
}

TEST(OnnxImport, LargeWeightsAreInputsThatComeWithTheModelSmallOnesConstants) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {int64_t{4}, int64_t{300}});
  b.float_initializer("w", {300, 2}, 0.5f);
  b.float_initializer("bias", {2}, 1.0f);
  b.node("MatMul", {"x", "w"}, {"xw"});
  b.node("Add", {"xw", "bias"}, {"y"});
  b.output("y");
  onnx::ImportedModel m = b.load();
  ASSERT_EQ(m.weights.size(), 1u);
  EXPECT_EQ(m.weights.begin()->first, "w");
  EXPECT_EQ(m.graph.inputs().size(), 2u);
  EXPECT_EQ(count_ops(m.graph, Op::Constant), 1);  // the bias: 2 values, inline

  onnx::ImportOptions o;
  o.params_as_inputs = true;
  onnx::ImportedModel p = b.load(o);
  EXPECT_EQ(p.weights.size(), 2u);
  EXPECT_EQ(count_ops(p.graph, Op::Constant), 0);
  EXPECT_EQ(p.graph.inputs().size(), 3u);

  // Both compute x @ w + bias.
  HostTensor x = random_tensor(TensorMeta(DType::F32, {4, 300}), 7);
  for (const onnx::ImportedModel* mm : {&m, &p}) {
    std::vector<HostTensor> args;
    for (const Node* in : mm->graph.inputs()) args.push_back(mm->weights.count(in->name()) ? mm->weights.at(in->name()) : x);
    HostTensor y = interpret(mm->graph, args)[0];
    double row0 = 0;
    for (int64_t j = 0; j < 300; ++j) row0 += x.get(j) * 0.5;
    EXPECT_NEAR(y.get(0), row0 + 1.0, 1e-4);
  }
}

// Before opset 7, a binary operator broadcasts its second operand only with broadcast=1: matched
// to the first's dims from `axis` (or to its last dims); without it the shapes must be equal.
// ScatterElements' reductions: mul (opset 16) and max/min (opset 18's, taken too) fold into the
// data's elements (scatter_fold), in index order; any other is refused by name.
TEST(OnnxImport, ScatterElementsReductions) {
  auto model = [](const std::string& reduction) {
    ModelBuilder b;
    b.input("data", TensorProto::FLOAT, {int64_t{5}});
    b.input("updates", TensorProto::FLOAT, {int64_t{3}});
    b.ints_initializer("indices", {0, 0, -2});
    NodeProto* n = b.node("ScatterElements", {"data", "indices", "updates"}, {"y"});
    auto* a = n->add_attribute();
    a->set_name("reduction");
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(reduction);
    b.output("y");
    return b;
  };
  HostTensor data = HostTensor::empty(TensorMeta(DType::F32, {5})), updates = HostTensor::empty(TensorMeta(DType::F32, {3}));
  for (int64_t i = 0; i < 5; ++i) data.set(i, static_cast<double>(i + 1));
  for (int64_t i = 0; i < 3; ++i) updates.set(i, static_cast<double>(i + 2));
  for (auto [reduction, want] : {std::pair{"mul", std::vector<double>{6, 2, 3, 16, 5}}, std::pair{"max", std::vector<double>{3, 2, 3, 4, 5}},
                                 std::pair{"min", std::vector<double>{1, 2, 3, 4, 5}}}) {
    onnx::ImportedModel m = model(reduction).load();
    EXPECT_EQ(count_ops(m.graph, Op::ScatterFold), 1) << reduction;
    HostTensor y = interpret(m.graph, std::vector<HostTensor>{data, updates})[0];
    std::vector<double> got;
    for (int64_t i = 0; i < 5; ++i) got.push_back(y.get(i));
    EXPECT_EQ(got, want) << reduction;
  }
  try {
    model("mean").load();
    FAIL() << "imported reduction 'mean'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reduction 'mean'"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, LegacyBroadcastOfBinaryOperators) {
  auto model = [](bool broadcast, bool with_axis, std::vector<int64_t> b_dims) {
    ModelBuilder b(6);
    b.input("a", TensorProto::FLOAT, {int64_t{2}, int64_t{3}, int64_t{4}});
    b.float_initializer("b", b_dims, 2.0f);
    NodeProto* n = b.node("Mul", {"a", "b"}, {"y"});
    if (broadcast) set_int_attr(n, "broadcast", 1);
    if (with_axis) set_int_attr(n, "axis", 1);
    b.output("y");
    return b;
  };
  HostTensor a = HostTensor::empty(TensorMeta(DType::F32, {2, 3, 4}));
  for (int64_t i = 0; i < a.numel(); ++i) a.set(i, static_cast<double>(i));
  for (auto [with_axis, dims] : {std::pair{true, std::vector<int64_t>{3}}, std::pair{false, std::vector<int64_t>{4}}}) {
    onnx::ImportedModel m = model(true, with_axis, dims).load();
    HostTensor y = interpret(m.graph, std::vector<HostTensor>{a})[0];
    EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
    EXPECT_EQ(y.get(23), 46.0);
  }
  try {
    model(false, false, {3}).load();
    FAIL() << "imported a Mul of [2,3,4] and [3] without broadcast=1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("differ without broadcast=1 (opset 6)"), std::string::npos) << e.what();
  }
  try {
    model(true, true, {3, 4, 5}).load();
    FAIL() << "imported B [3,4,5] from axis 1 of A [2,3,4]";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit A [2,3,4] from axis 1"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, EveryUnsupportedOperatorIsListedAtOnce) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{8}});
  b.node("GridSample", {"x", "roi"}, {"c"}, "up1");
  b.node("NonMaxSuppression", {"c", "axis"}, {"p"}, "sum1");
  b.node("GridSample", {"p", "roi"}, {"c2"}, "up2");
  b.node("Relu", {"c2"}, {"y"});
  b.output("y");
  try {
    b.load();
    FAIL() << "imported a model with GridSample and NonMaxSuppression";
  } catch (const onnx::Unsupported& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("2 operators kiln does not import"), std::string::npos) << msg;
    EXPECT_NE(msg.find("GridSample (2 nodes: 'up1', 'up2')"), std::string::npos) << msg;
    EXPECT_NE(msg.find("NonMaxSuppression (1 node: 'sum1')"), std::string::npos) << msg;
  }
}

TEST(OnnxImport, AnUnsupportedAttributeNamesItAndItsNode) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {int64_t{3}, int64_t{4}});
  b.input("scale", TensorProto::FLOAT, {int64_t{4}});
  NodeProto* n = b.node("LayerNormalization", {"x", "scale"}, {"y"}, "norm");
  set_int_attr(n, "stash_type", 0);
  b.node("LeakyRelu", {"x"}, {"z"}, "act");
  set_int_attr(b.m.mutable_graph()->mutable_node(1), "not_an_attribute", 3);
  b.output("y");
  b.output("z");
  try {
    b.load();
    FAIL() << "imported stash_type=0";
  } catch (const onnx::Unsupported& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("2 nodes kiln cannot import"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node 'norm' (LayerNormalization): attribute stash_type=0 is not supported"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node 'act' (LeakyRelu): attribute 'not_an_attribute' is not supported"), std::string::npos) << msg;
    EXPECT_EQ(e.causes(), (std::vector<std::string>{"LayerNormalization: attribute stash_type=0 is not supported",
                                                    "LeakyRelu: attribute 'not_an_attribute' is not supported"}));
    EXPECT_TRUE(e.run_time_values().empty());
  }
}

TEST(OnnxImport, ASymbolicDimNeedsItsSize) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {std::string("batch"), int64_t{4}});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  try {
    b.load();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'batch' of its shape is symbolic; give its size (--sizes batch=N"), std::string::npos) << e.what();
  }
  onnx::ImportOptions o;
  o.sizes["batch"] = 5;
  EXPECT_EQ(b.load(o).graph.inputs()[0]->meta().shape, (Shape{5, 4}));
}

TEST(OnnxImport, ARunTimeShapeIsRefusedWithTheReason) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {int64_t{2}, int64_t{6}});
  b.input("shape", TensorProto::INT64, {int64_t{2}});
  b.node("Reshape", {"x", "shape"}, {"y"}, "r");
  b.output("y");
  try {
    b.load();
    FAIL();
  } catch (const onnx::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("node 'r' (Reshape): its shape (input 1) is computed at run time"), std::string::npos) << e.what();
    EXPECT_EQ(e.causes(), std::vector<std::string>{"Reshape: its shape is computed at run time"});
    EXPECT_EQ(e.run_time_values(), std::vector<std::string>{"shape"});
  }
  // Given its value, the model input is specialized on it: known at import, not a graph input.
  onnx::ImportOptions o;
  o.known_inputs["shape"] = HostTensor::from_ints(DType::I64, {2}, std::vector<int64_t>{3, 4});
  onnx::ImportedModel m = b.load(o);
  EXPECT_EQ(m.input_names, std::vector<std::string>{"x"});
  EXPECT_EQ(m.specialized_inputs, std::vector<std::string>{"shape"});
  ASSERT_EQ(m.graph.inputs().size(), 1u);
  EXPECT_EQ(m.graph.outputs()[0].meta().shape, (Shape{3, 4}));
  // A value of another shape or dtype than the model declares is an error naming the input.
  o.known_inputs["shape"] = HostTensor::from_ints(DType::I64, {1}, std::vector<int64_t>{12});
  EXPECT_THROW(b.load(o), Error);
}

TEST(OnnxImport, MalformedFilesAndNewOpsetsAreErrors) {
  EXPECT_THROW(onnx::load_from_bytes("not a model at all \x01\x02", "bad.onnx"), Error);
  EXPECT_THROW(onnx::load("/nonexistent/model.onnx"), Error);
  ModelBuilder b(19);
  b.input("x", TensorProto::FLOAT, {int64_t{2}});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  try {
    b.load();
    FAIL();
  } catch (const onnx::Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("opset 19 is not supported (kiln imports opsets 1 to 17)"), std::string::npos) << e.what();
  }
  ModelBuilder c;
  c.input("x", TensorProto::UINT8, {int64_t{2}});
  c.node("Relu", {"x"}, {"y"});
  c.output("y");
  EXPECT_THROW(c.load(), onnx::Unsupported);
}

TEST(OnnxImport, WeightsStoredOutsideTheModelAreReadFromItsFolder) {
  // PyTorch 2's exporter writes model.onnx.data beside model.onnx.
  std::filesystem::path dir = std::filesystem::temp_directory_path() / fmt::format("kiln_onnx_ext_{}", ::getpid());
  std::filesystem::create_directories(dir);
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {int64_t{3}});
  TensorProto* w = b.m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(TensorProto::FLOAT);
  w->add_dims(3);
  w->set_data_location(TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair<const char*, const char*>{"location", "model.onnx.data"}, {"offset", "4"}, {"length", "12"}}) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  b.node("Mul", {"x", "w"}, {"y"});
  b.output("y");
  float data[4] = {9.f, 1.5f, -2.f, 4.f};  // the first 4 bytes are another tensor's
  std::ofstream(dir / "model.onnx.data", std::ios::binary).write(reinterpret_cast<const char*>(data), sizeof data);
  std::ofstream(dir / "model.onnx", std::ios::binary) << b.m.SerializeAsString();
  onnx::ImportedModel m = onnx::load((dir / "model.onnx").string());
  HostTensor x = HostTensor::from_doubles(DType::F32, {3}, std::vector<double>{1, 2, 3});
  std::vector<HostTensor> args;
  for (const Node* in : m.graph.inputs()) args.push_back(m.weights.count(in->name()) ? m.weights.at(in->name()) : x);
  EXPECT_EQ(interpret(m.graph, args)[0].to_doubles(), (std::vector<double>{1.5, -4, 12}));
  // From bytes there is no folder to read it from.
  EXPECT_THROW(b.load(), Error);
  std::filesystem::remove_all(dir);
}

TEST(OnnxImport, AMalformedNodeIsNamedOnce) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {int64_t{2}, int64_t{3}});
  b.node("Softmax", {"x"}, {"y"}, "sm");
  set_int_attr(b.m.mutable_graph()->mutable_node(0), "axis", 5);
  b.output("y");
  try {
    b.load();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "test.onnx: node 'sm' (Softmax): axis 5 is out of range for rank 2");
  }
}

TEST(OnnxImport, NodesOutOfOrderAreAnError) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {int64_t{2}});
  b.node("Relu", {"t"}, {"y"});
  b.node("Neg", {"x"}, {"t"});
  b.output("y");
  try {
    b.load();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reads 't', which no earlier node"), std::string::npos) << e.what();
  }
}

// Split's num_outputs attribute (opset 18's form, which PyTorch 2's dynamo exporter writes at
// lower opsets too): parts of ceil(size / n), the last what remains.
TEST(OnnxImportSplit, NumOutputsMakesCeilSizedParts) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {int64_t{2}, int64_t{7}});
  NodeProto* n = b.node("Split", {"x"}, {"a", "b", "c"}, "split");
  set_int_attr(n, "axis", 1);
  set_int_attr(n, "num_outputs", 3);
  b.output("a");
  b.output("b");
  b.output("c");
  onnx::ImportedModel m = b.load();
  ASSERT_EQ(m.graph.outputs().size(), 3u);
  EXPECT_EQ(m.graph.outputs()[0].meta().shape, (Shape{2, 3}));
  EXPECT_EQ(m.graph.outputs()[1].meta().shape, (Shape{2, 3}));
  EXPECT_EQ(m.graph.outputs()[2].meta().shape, (Shape{2, 1}));
}

}  // namespace
}  // namespace kiln
