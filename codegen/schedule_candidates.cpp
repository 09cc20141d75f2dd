// Candidate schedules of one kernel (see schedule_candidates.h).
#include "codegen/schedule_candidates.h"

#include <fmt/format.h>

#include <charconv>
#include <functional>
#include <map>
#include <set>

#include "codegen/schedule.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

// Each knob the candidates vary, by the name they print, and the Target field it sets.
const std::map<std::string, std::function<void(Target&, int64_t)>>& knob_setters() {
  static const std::map<std::string, std::function<void(Target&, int64_t)>> setters = {
      {"pointwise_block", [](Target& t, int64_t v) { t.pointwise_block = static_cast<int>(v); }},
      {"blocks_per_sm", [](Target& t, int64_t v) { t.blocks_per_sm = static_cast<int>(v); }},
      {"pointwise_unroll", [](Target& t, int64_t v) { t.pointwise_unroll = static_cast<int>(v); }},
      {"min_blocks_per_sm", [](Target& t, int64_t v) { t.min_blocks_per_sm = static_cast<int>(v); }},
      {"tile_blocks_per_sm", [](Target& t, int64_t v) { t.tile_blocks_per_sm = static_cast<int>(v); }},
      {"warp_rows_per_block", [](Target& t, int64_t v) { t.warp_rows_per_block = static_cast<int>(v); }},
      {"warp_row_max", [](Target& t, int64_t v) { t.warp_row_max = v; }},
      {"reduction_block", [](Target& t, int64_t v) { t.reduction_block = static_cast<int>(v); }},
      {"held_bytes_per_thread", [](Target& t, int64_t v) { t.held_bytes_per_thread = v; }},
      {"chunk_held_bytes_per_thread", [](Target& t, int64_t v) { t.chunk_held_bytes_per_thread = v; }},
      {"row_prefetch_bytes_per_thread", [](Target& t, int64_t v) { t.row_prefetch_bytes_per_thread = v; }},
      {"held_min_bytes_per_thread", [](Target& t, int64_t v) { t.held_min_bytes_per_thread = v; }},
      {"attention_rows_per_warp", [](Target& t, int64_t v) { t.attention_rows_per_warp = static_cast<int>(v); }},
      {"attention_key_tile", [](Target& t, int64_t v) { t.attention_key_tile = static_cast<int>(v); }},
      {"attention_ffma_rows", [](Target& t, int64_t v) { t.attention_ffma_rows = static_cast<int>(v); }},
      {"attention_ffma_keys", [](Target& t, int64_t v) { t.attention_ffma_keys = static_cast<int>(v); }},
      {"column_thread_min_points", [](Target& t, int64_t v) { t.column_thread_min_points = v; }},
  };
  return setters;
}

using Knobs = std::vector<std::pair<std::string, int64_t>>;

std::string knobs_name(const Knobs& knobs) {
  std::string out;
  for (auto& [name, value] : knobs) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, value);
  return out.empty() ? "default" : out;
}

// Which attention tiles a kernel has, for its variants: the tensor-core forward's, FFMA tiles
// (every pass), or none that vary (the tensor-core backward, or not attention).
enum class AttentionTiles { None, TensorCoreForward, Ffma };

// The variants worth timing for a kernel the default mapped as `mapping`. Each list is short:
// a tuned compile times every candidate of every kernel (bench/NOTES.md says which won).
std::vector<Knobs> variants_of(const std::string& m, bool tiled, AttentionTiles attention, const Target& t) {
  if (attention == AttentionTiles::TensorCoreForward) return {{{"attention_rows_per_warp", 16}}, {{"attention_key_tile", 32}}};
  if (attention == AttentionTiles::Ffma)
    return {{{"attention_ffma_rows", 32}}, {{"attention_ffma_keys", 32}}, {{"attention_ffma_rows", 32}, {"attention_ffma_keys", 32}}};
  // Grids are full by default; blocks_per_sm 8 is the persistent grid (the default until stop
  // 42), which the launch caps at what the SMs hold at once (LaunchConfig::persistent).
  // min_blocks_per_sm is no candidate: registers capped for a full SM ran 4-38% slower on every
  // row kernel and the pointwise row, stop 40.
  if (m == "grid-stride")
    return {{{"pointwise_block", 128}},
            {{"pointwise_block", 512}},
            {{"pointwise_unroll", 2}},
            {{"pointwise_unroll", 4}},
            {{"blocks_per_sm", 8}},
            {{"blocks_per_sm", 8}, {"pointwise_unroll", 2}},
            {{"pointwise_block", 128}, {"blocks_per_sm", 16}}};
  if (m == "thread per row")
    return {{{"pointwise_block", 64}}, {{"pointwise_block", 128}}, {{"pointwise_block", 512}}, {{"blocks_per_sm", 8}}};
  if (m == "block per tile" && tiled)
    return {{{"tile_blocks_per_sm", 4}}, {{"tile_blocks_per_sm", 16}}, {{"pointwise_block", 512}}};
  if (m == "warp per row")
    return {{{"warp_rows_per_block", 2}},
            {{"warp_rows_per_block", 4}},
            {{"warp_rows_per_block", 16}},
            {{"warp_row_max", t.thread_row_max}, {"reduction_block", 128}},
            {{"warp_row_max", t.thread_row_max}, {"reduction_block", 256}},
            {{"row_prefetch_bytes_per_thread", 32}},
            {{"row_prefetch_bytes_per_thread", 256}},
            {{"warp_rows_per_block", 1}},
            {{"blocks_per_sm", 8}}};
  if (m == "block per row")
    return {{{"reduction_block", 128}},
            {{"reduction_block", 512}},
            {{"reduction_block", 1024}},
            {{"held_bytes_per_thread", 64}},
            {{"held_bytes_per_thread", 256}},
            {{"held_min_bytes_per_thread", 16}},
            {{"row_prefetch_bytes_per_thread", 32}},
            {{"blocks_per_sm", 8}}};
  // A chunk's block starts at reduction_block threads and grows until what each holds fits.
  if (m == "block per chunk of rows")
    return {{{"chunk_held_bytes_per_thread", 64}},
            {{"reduction_block", 512}, {"chunk_held_bytes_per_thread", 512}},
            {{"reduction_block", 1024}}};
  return {};  // the tensor-core backward, cluster rows, one thread: one schedule
}

Kernel scheduled_under(const Kernel& unscheduled, const Target& t) {
  Kernel k = unscheduled;
  schedule(k, t);
  return k;
}

// What tells two scheduled kernels apart: the kernel IR as printed (loop maps, vectors, held
// rows, the schedule record) and the launch.
std::string fingerprint(const Kernel& k) {
  return fmt::format("{}|{}x{} {} {} {}", print_kernel(k), k.launch.grid, k.launch.block, k.launch.shared_bytes,
                     k.launch.dynamic_shared_bytes, k.launch.cluster);
}

}  // namespace

std::vector<std::string> every_candidate_knobs(const Target& target) {
  std::vector<std::string> out;
  for (const char* m : {"grid-stride", "thread per row", "block per tile", "warp per row", "block per row", "block per chunk of rows"})
    for (const Knobs& knobs : variants_of(m, /*tiled=*/true, AttentionTiles::None, target)) out.push_back(knobs_name(knobs));
  for (AttentionTiles a : {AttentionTiles::TensorCoreForward, AttentionTiles::Ffma})
    for (const Knobs& knobs : variants_of("block per tile", /*tiled=*/false, a, target)) out.push_back(knobs_name(knobs));
  return out;
}

Target with_knobs(Target target, const std::string& knobs) {
  if (knobs == "default") return target;
  size_t at = 0;
  while (at < knobs.size()) {
    size_t end = knobs.find(", ", at);
    std::string one = knobs.substr(at, end == std::string::npos ? std::string::npos : end - at);
    size_t space = one.rfind(' ');
    auto it = space == std::string::npos ? knob_setters().end() : knob_setters().find(one.substr(0, space));
    if (it == knob_setters().end()) {
      std::string known;
      for (auto& [name, set] : knob_setters()) known += (known.empty() ? "" : ", ") + name;
      fail("schedule knobs '{}': '{}' is not a knob the schedule reads (knobs: {}; each 'NAME VALUE', separated by ', ')", knobs, one, known);
    }
    int64_t value = 0;
    std::string digits = one.substr(space + 1);
    auto [end_of, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    // A byte budget of 0 turns its feature off; every other knob counts something there is.
    // blocks_per_sm 0: no cap, a full grid (each block one step of its loop, not persistent);
    // column_thread_min_points 0: column sums always in tiles.
    const int64_t least =
        it->first == "row_prefetch_bytes_per_thread" || it->first == "blocks_per_sm" || it->first == "column_thread_min_points" ? 0 : 1;
    if (ec != std::errc() || end_of != digits.data() + digits.size() || value < least)
      fail("schedule knobs '{}': the value of '{}' is not a {} integer", knobs, one, least == 0 ? "non-negative" : "positive");
    // Blocks of threads (pointwise_block, reduction_block): what a launch and the block combines take.
    const bool threads = it->first == "pointwise_block" || it->first == "reduction_block";
    if (threads && (value < 32 || value > 1024 || (value & (value - 1)) != 0))
      fail("schedule knobs '{}': {} is a block of threads, a power of two from 32 to 1024, not {}", knobs, it->first, value);
    if (it->first == "attention_rows_per_warp" && value != 16 && value != 32)
      fail("schedule knobs '{}': attention_rows_per_warp is 16 or 32 (one or two 16-row blocks of mma.sync), not {}", knobs, value);
    if (it->first == "attention_key_tile" && value != 32 && value != 64)
      fail("schedule knobs '{}': attention_key_tile is 32 or 64, not {}", knobs, value);
    if (it->first == "pointwise_unroll" && value > 8)
      fail("schedule knobs '{}': pointwise_unroll is 1 to 8 iterations at once, not {}", knobs, value);
    if ((it->first == "attention_ffma_rows" || it->first == "attention_ffma_keys") && value != 16 && value != 32 && value != 64)
      fail("schedule knobs '{}': {} is 16, 32 or 64, not {}", knobs, it->first, value);
    it->second(target, value);
    at = end == std::string::npos ? knobs.size() : end + 2;
  }
  return target;
}

std::vector<ScheduleCandidate> schedule_candidates(const Kernel& unscheduled, const Target& target) {
  std::vector<ScheduleCandidate> out{{"default", scheduled_under(unscheduled, target)}};
  if (!target.is_gpu()) return out;
  std::set<std::string> seen{fingerprint(out[0].kernel)};
  const Kernel& k0 = out[0].kernel;
  const AttentionTiles attention = !k0.attention                  ? AttentionTiles::None
                                   : !k0.attention->tensor_cores ? AttentionTiles::Ffma
                                   : k0.attention->pass == AttentionKernel::Pass::Forward ? AttentionTiles::TensorCoreForward
                                                                                            : AttentionTiles::None;
  for (const Knobs& knobs : variants_of(k0.schedule.mapping, !k0.attention && !k0.schedule.tiles.empty(), attention, target)) {
    std::string name = knobs_name(knobs);
    Kernel k = scheduled_under(unscheduled, with_knobs(target, name));
    if (seen.insert(fingerprint(k)).second) out.push_back({name, std::move(k)});
  }
  return out;
}

}  // namespace kiln::codegen
