// The nn modules of frontend/nn/conv.h, norms.h and llama.h, and the composites they use
// (adaptive pools, repeat_interleave), against PyTorch 1.13: every parameter and input is set
// to a formula (below), and tools' /usr/bin/python3 computed the expected outputs in float64 with
// torch.nn.functional (the Llama block written as Hugging Face's LlamaDecoderLayer computes it:
// RMSNorm, RoPE with rotate_half, repeat_kv, causal softmax attention, SwiGLU). Buffers: named,
// moved, not trained, inputs of traced graphs and of compiled training steps.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cuda_backend.h"
#include "frontend/compile.h"
#include "frontend/nn/conv.h"
#include "frontend/nn/llama.h"
#include "frontend/nn/norms.h"
#include "frontend/ops.h"
#include "frontend/trace.h"
#include "runtime/cpu/jit.h"

namespace kiln {
namespace {

// Parameter j of a module (named_parameters order), element k: 0.3 sin(0.7 k + 1.3 j).
std::vector<double> param_values(int64_t j, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = 0.3 * std::sin(0.7 * static_cast<double>(k) + 1.3 * static_cast<double>(j));
  return v;
}
// Input element k: 0.5 cos(0.37 k).
Tensor input(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = 0.5 * std::cos(0.37 * static_cast<double>(k));
  return tensor(v, shape);
}
void set_parameters(nn::Module& m) {
  int64_t j = 0;
  for (auto& [path, p] : m.named_parameters()) p.impl()->set_storage_from(*tensor(param_values(j++, p.numel()), p.shape()).impl());
}
void expect_close(const Tensor& got, const Shape& shape, const std::vector<double>& want, const char* what, double tol = 2e-5) {
  ASSERT_EQ(got.shape(), shape) << what;
  std::vector<double> g = got.to_doubles();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g[i], want[i], tol * (1 + std::abs(want[i]))) << what << "[" << i << "]";
}

TEST(NnModules, LlamaBlockMatchesPyTorch) {
  nn::LlamaBlock block(8, 4, 2, 12, 6, 1e-6, 0);
  set_parameters(block);
  expect_close(block(input({2, 5, 8})), {2, 5, 8}, std::vector<double>{0.501354042, 0.484949341, 0.395873647, 0.244919606, 0.0548249562, -0.146850696, -0.325670523, -0.452038645, -0.48363223, -0.491573352, -0.435064222, -0.314619759, -0.146315675, 0.0433170883, 0.230487007, 0.385264232, 0.462771353, 0.509047985, 0.477905183, 0.383752836, 0.232103035, 0.0395675928, -0.151635974, -0.319725677, -0.419299965, -0.49278316, -0.501660192, -0.434665169, -0.307376889, -0.137125459, 0.0579908139, 0.240736075, 0.37037326, 0.477761748, 0.506282187, 0.479774948, 0.378530236, 0.211139721, 0.0324640741, -0.154460121, -0.236162352, -0.452919445, -0.600015113, -0.628274272, -0.533294778, -0.329404024, -0.0660403012, 0.181558174, 0.234682729, 0.385098023, 0.46485378, 0.508352983, 0.470009392, 0.351325618, 0.213793695, 0.0352016174, -0.121765828, -0.323803532, -0.473223105, -0.541924789, -0.530281048, -0.428940394, -0.263328183, -0.0789454174, 0.0615689748, 0.243267121, 0.374069364, 0.484113676, 0.510056464, 0.450204922, 0.361338482, 0.207053412, 0.0510220886, -0.159602429, -0.338852095, -0.462226301, -0.522839026, -0.49621509, -0.398706844, -0.261645444}, "llama block");
}

TEST(NnModules, ConvolutionsMatchPyTorch) {
  nn::Conv2d c2(3, 4, {3, 2}, {2}, {1});
  set_parameters(c2);
  expect_close(c2(input({2, 3, 7, 6})), {2, 4, 4, 4}, std::vector<double>{0.420478263, 0.832518402, 0.794238826, 0.397841732, -0.0972393061, -0.459828805, -0.125872503, 0.339035402, 0.57128472, 0.293292957, -0.231318502, -0.0564171184, 0.250508977, 0.570186295, 0.695621104, 0.381103867, 0.396335056, 0.808072183, 0.778197028, 0.386186477, -0.110704708, -0.485864015, -0.156410612, 0.317003471, 0.558904514, 0.289716322, -0.24265552, -0.0789362291, 0.227559851, 0.548825367, 0.687127245, 0.374502251, 0.243755103, 0.654723615, 0.633286664, 0.246105953, -0.252033481, -0.639338355, -0.314760406, 0.166624505, 0.417903724, 0.15782351, -0.381706694, -0.229354635, 0.0763648352, 0.398855253, 0.549867805, 0.239488579, 0.0307434618, 0.440478623, 0.427504118, 0.0455910825, -0.45323329, -0.852245755, -0.532910302, -0.0440989279, 0.216274314, -0.0344038169, -0.580482266, -0.439669722, -0.135072579, 0.188278059, 0.351830515, 0.0440480437, 0.279050435, -0.112475005, -0.275332972, 0.0532954305, 0.537981474, 1.0437705, 0.969277667, 0.4117686, -0.113673104, -0.0894986484, 0.466572899, 0.570066021, 0.446480379, 0.185354627, -0.0532732778, 0.146133723, 0.269138019, -0.117111955, -0.28584439, 0.033963035, 0.516906504, 1.03098496, 0.964933103, 0.404433635, -0.131429019, -0.120078079, 0.439485281, 0.555526849, 0.437783697, 0.181789206, -0.0686124865, 0.123060777, 0.130932695, -0.249605029, -0.424021125, -0.113396325, 0.367258443, 0.889044992, 0.831508807, 0.268652767, -0.277024869, -0.278510279, 0.283912123, 0.412370912, 0.300603397, 0.050029654, -0.211862665, -0.0281398884, -0.0675767335, -0.441971886, -0.621874408, -0.320783496, 0.157039032, 0.685943627, 0.636988174, 0.072412055, -0.482463493, -0.496783575, 0.0678618663, 0.208592612, 0.102927124, -0.141942515, -0.415029305, -0.239464775}, "conv2d");
  nn::Conv1d c1(4, 6, 3, 1, 2, 2, 2);
  set_parameters(c1);
  expect_close(c1(input({1, 4, 9})), {1, 6, 9}, std::vector<double>{0.477023293, 0.416429782, 0.211408305, 0.144250012, 0.0966920803, 0.0751712535, 0.0826002743, 0.312101224, 0.340481456, -0.130111521, -0.0301669328, -0.0224324692, 0.14962857, 0.338358827, 0.518214546, 0.6648531, 0.527587345, 0.597190691, 0.33531103, 0.29790671, 0.495344379, 0.393793099, 0.256296929, 0.10146533, -0.0497459661, -0.144654872, -0.241282691, 0.0585367835, -0.0234581713, -0.21509558, -0.268587805, -0.296103817, -0.293919454, -0.262330358, -0.0383397299, -0.0184493744, -0.546816305, -0.405692617, -0.373066881, -0.182621585, -0.000684305807, 0.148120601, 0.243653089, 0.0877785377, 0.113890828, -0.138584801, -0.194964676, -0.0353175081, -0.168561017, -0.319438445, -0.46752924, -0.592790007, -0.663942264, -0.709436286}, "conv1d grouped dilated");
  // PyTorch's default initialization bound: 1/sqrt(fan_in), fan_in = 3 * 3 * 2
  nn::Conv2d fresh(3, 4, {3, 2}, {1}, {0}, {1}, 1, true, 7);
  for (double w : fresh.weight.to_doubles()) EXPECT_LE(std::abs(w), 1 / std::sqrt(18.0));
  EXPECT_THROW(nn::Conv2d(3, 4, {3, 2, 1}), Error);
  EXPECT_THROW(nn::Conv2d(3, 4, {3}, {1}, {0}, {1}, 2), Error);  // 3 channels in 2 groups
}

TEST(NnModules, PoolsMatchPyTorch) {
  Tensor xa = input({1, 2, 7, 5});
  expect_close(nn::AdaptiveAvgPool2d({3, 2})(xa), {1, 2, 3, 2}, std::vector<double>{-0.0431822587, -0.0702540183, 0.0667692123, 0.0664171728, -0.0700716834, -0.0424027944, -0.0613395097, -0.0699756326, 0.0714135681, 0.0517520875, -0.059792189, -0.0178062616}, "adaptive avg (uneven windows)");
  expect_close(adaptive_max_pool(xa, {3, 2}), {1, 2, 3, 2}, std::vector<double>{0.5, 0.369234279, 0.49998839, 0.49998839, 0.373794908, 0.499953561, 0.463656154, 0.376049237, 0.499895514, 0.462370068, 0.47091848, 0.499814251}, "adaptive max");
  expect_close(adaptive_avg_pool(input({2, 3, 4, 6}), {2, 3}), {2, 3, 2, 3}, std::vector<double>{0.0595105116, -0.0978413767, -0.204016073, 0.186515098, 0.214528972, 0.130330703, -0.159867983, -0.0175894132, 0.133889526, -0.100495539, -0.205064703, -0.202372132, 0.213941236, 0.1279278, -0.0249999203, -0.0146190103, 0.136231077, 0.215823744, -0.206075241, -0.201229139, -0.091127543, 0.125501133, -0.0279564777, -0.166791093, 0.138547322, 0.216271575, 0.180872194, -0.200048765, -0.088411948, 0.0694698779, -0.0309078419, -0.168700093, -0.218251587, 0.216679231, 0.179183767, 0.0479639257}, "adaptive avg (one pool)");
  expect_close(nn::MaxPool2d({3}, {2}, {1})(input({1, 2, 5, 5})), {1, 2, 3, 3}, std::vector<double>{0.5, 0.466163673, 0.222330758, 0.467384988, 0.49998839, 0.464920709, 0.467384988, 0.49998839, 0.464920709, 0.228413831, 0.468584598, 0.499953561, 0.463656154, 0.468584598, 0.499953561, -0.12794082, 0.231439527, 0.376049237}, "max_pool2d");
  expect_close(nn::AvgPool2d({2}, {1}, {1}, false, false)(input({1, 2, 5, 5})), {1, 2, 6, 6}, std::vector<double>{0.5, 0.483081836, 0.417698976, 0.295782519, 0.133833285, 0.0453358122, 0.181102438, 0.131523103, 0.0268190815, -0.0815147774, -0.178815994, -0.222908038, -0.28092257, -0.29091906, -0.290548285, -0.250853164, -0.177206243, -0.13288718, -0.0262633977, 0.0288258074, 0.133325466, 0.219780148, 0.276488618, 0.29615286, 0.295398442, 0.275030837, 0.217061889, 0.129714633, 0.0248111101, -0.0303464992, 0.219273664, 0.130607569, -0.0495629106, -0.223025283, -0.36630223, -0.427621189, -0.492382587, -0.491442449, -0.456368579, -0.359527364, -0.214025806, -0.131231733, -0.220132287, -0.175588263, -0.077632105, 0.0308311946, 0.135121637, 0.184360914, 0.257887084, 0.277198265, 0.295755047, 0.27428277, 0.215687608, 0.177810322, 0.0779899564, 0.0228019865, -0.0853823078, -0.182010507, -0.254004439, -0.282366495, -0.300873627, -0.289766276, -0.248693984, -0.173962129, -0.0756853158, -0.0221754176, -0.294071012, -0.211005916, -0.0362176287, 0.143472544, 0.303744382, 0.376049237}, "avg_pool2d");
  // a leading batch of any rank, and errors
  EXPECT_EQ(adaptive_avg_pool(input({2, 2, 3, 7}), {3}).shape(), (Shape{2, 2, 3, 3}));
  EXPECT_THROW(adaptive_avg_pool(xa, {0, 2}), Error);
  EXPECT_THROW(adaptive_avg_pool(input({5}), {2}), Error);
}

TEST(NnModules, NormsMatchPyTorch) {
  nn::GroupNorm gn(2, 4);
  set_parameters(gn);
  expect_close(gn(input({2, 4, 3})), {2, 4, 3}, std::vector<double>{0.289067456, 0.289067456, 0.289067456, 0.254372375, 0.105397533, -0.0487419087, 0.515371289, 0.0531417716, -0.193491023, -0.356407647, -0.136539051, 0.271386264, 0.289067456, 0.289067456, 0.289067456, 0.378573072, 0.459627435, 0.487194713, 0.51635911, 0.409842997, 0.249345168, -0.139403213, -0.313654489, -0.469726613}, "group_norm");
  nn::RMSNorm rn(8);  // eps: f32's machine epsilon
  set_parameters(rn);
  expect_close(rn(input({3, 8})), {3, 8}, std::vector<double>{0, 0.261879038, 0.317297138, 0.167357569, 0.0132434309, 0.0421504615, 0.22974109, 0.364832341, -0, -0.27374402, -0.361532826, -0.223711774, -0.0389853419, -0.0147881545, -0.169946388, -0.31578664, 0, 0.27580834, 0.392308932, 0.271213969, 0.0628971182, -0.0125978765, 0.105280108, 0.256567982}, "rms_norm");
  EXPECT_THROW(nn::GroupNorm(3, 4), Error);
}

TEST(NnModules, RepeatInterleaveRepeatsEachSliceInARow) {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(repeat_interleave(x, 2, 0).to_doubles(), (std::vector<double>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(repeat_interleave(x, 2, -1).to_doubles(), (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}));
  EXPECT_THROW(repeat_interleave(x, 0, 0), Error);
  EXPECT_THROW(repeat_interleave(x, 2, 2), Error);
}

// A module's buffers: named by path, listed apart from the parameters, no gradient, moved by
// to(); a traced graph reads them as inputs (not constants), and so does a compiled training
// step, which does not train them.
TEST(NnModules, BuffersAreNamedInputsNotTrained) {
  nn::LlamaBlock block(8, 4, 2, 12, 6, 1e-6, 0);
  auto buffers = block.named_buffers();
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[0].first, "attn.rope.cos");
  EXPECT_EQ(buffers[1].first, "attn.rope.sin");
  EXPECT_EQ(buffers[0].second.name(), "attn.rope.cos");
  EXPECT_FALSE(buffers[0].second.requires_grad());
  for (auto& [path, p] : block.named_parameters()) EXPECT_EQ(path.find("rope"), std::string::npos) << path;

  Tensor x = input({2, 5, 8});
  TracedGraph tg = trace([&](const Tensor& t) { return block(t); }, x);
  int buffer_inputs = 0;
  for (const std::string& p : tg.parameter_paths) buffer_inputs += p == "attn.rope.cos" || p == "attn.rope.sin";
  EXPECT_EQ(buffer_inputs, 2);

  // Trained in a compiled step (on the GPU where there is one: the buffers move with the
  // module): the parameters change, the buffers do not, and the step graph takes them as inputs
  // (no [6, 2] constant of their values inside).
  if (backend::cuda_device_present()) {
    block.to(Device::cuda());
    x = x.to(Device::cuda());
    EXPECT_EQ(block.named_buffers()[0].second.device(), Device::cuda());
  } else if (!runtime::cpu::jit_available()) {
    GTEST_SKIP() << "no CPU JIT in this build and no GPU: the compiled step is not checked";
  }
  std::vector<double> cos_before = block.attn->rope->cos.to_doubles();
  std::vector<double> q_before = block.attn->q_proj->weight.to_doubles();
  AdamWConfig adam;
  adam.lr = 1e-2;
  CompiledTrainStep step = compile(block, [&](const std::vector<Tensor>& b) { return mean(square(block(b[0]) - b[1])); }, adam);
  Tensor target = (input({2, 5, 8}) * 0.5).to(x.device());
  double first = step({x, target}), last = first;
  for (int i = 0; i < 20; ++i) last = step({x, target});
  EXPECT_LT(last, first);
  EXPECT_EQ(block.attn->rope->cos.to_doubles(), cos_before);
  EXPECT_NE(block.attn->q_proj->weight.to_doubles(), q_before);
  const Graph& g = step.train_step().graph;
  int named_buffer_inputs = 0;
  for (const Node* in : g.inputs()) named_buffer_inputs += in->name().find("rope") != std::string::npos;
  EXPECT_EQ(named_buffer_inputs, 2) << "the step reads the RoPE tables as inputs";
  for (const Node* n : g.nodes()) EXPECT_FALSE(n->op() == Op::Constant && n->meta().numel() >= 12) << "a table inlined as a constant";
}

}  // namespace
}  // namespace kiln
