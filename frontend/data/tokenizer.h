#pragma once
// A byte-level BPE tokenizer (GPT-2's scheme) and the helpers that turn lines of text into
// the demo's training batches.
//
//   Tokenizer tok = Tokenizer::train(corpus.train, 600);
//   std::vector<int64_t> stream = encode_lines(tok, corpus.train);   // each line + '\n'
//   Batch b = sample_batch(stream, /*batch=*/16, /*seq_len=*/32, /*seed=*/step);
//   // b.tokens, b.targets: [16, 32] row-major; tensor_of_ints(b.tokens, {16, 32})
//
// Ids 0-255 are the single bytes, so any byte string encodes (decode(encode(s)) == s, also
// for bytes the training text never had); ids 256.. are the learned merges, in the order
// they were learned. '\n' (id 10) separates lines and is never merged with anything.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::data {

// The line separator's token: the byte '\n'.
inline constexpr int64_t kNewlineToken = '\n';

// The pre-split that BPE runs within (merges never cross a piece's boundary), a simplified
// GPT-2 split without a regex engine: a run of letters (ASCII letters and every byte >= 0x80,
// so that UTF-8 letters such as "é" stay inside their word), a run of digits, or a run of
// other non-space characters, each with at most one leading ' '; spaces not followed by such
// a run form their own piece; every other whitespace byte ('\n', '\t', '\r', ...) is a piece
// by itself. Why split at all: without it the frequent spans across words ("s\nes pre")
// would take merges, while with it the 344 merges go to words, stems and endings (" habl",
// "amos"), which is what the model should see as units; and "\n" staying one token makes
// encode(a + "\n" + b) == encode(a) + [10] + encode(b). The pieces concatenate back to `text`.
std::vector<std::string_view> split_pieces(std::string_view text);

class Tokenizer {
 public:
  // Learns merges on `lines` until the vocabulary has exactly `vocab_size` entries (256 bytes
  // + vocab_size - 256 merges). Deterministic: each step merges the most frequent adjacent
  // pair, ties going to the smallest (left id, right id), so the result does not depend on the
  // order of the lines either. kiln::Error if vocab_size < 256, or if the text runs out of
  // pairs to merge first.
  static Tokenizer train(const std::vector<std::string>& lines, int vocab_size);

  // Bytes -> ids: each piece of split_pieces on its own, merging its adjacent pair of lowest
  // rank (earliest learned) until none is left, as GPT-2 does.
  std::vector<int64_t> encode(std::string_view text) const;
  // Ids -> bytes, concatenated; kiln::Error for an id outside [0, vocab_size).
  std::string decode(std::span<const int64_t> ids) const;

  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  // The bytes of one token (kiln::Error for an id outside [0, vocab_size)).
  std::string token_text(int64_t id) const;
  // Merge i made token 256 + i from these two ids.
  const std::vector<std::pair<int64_t, int64_t>>& merges() const { return merges_; }

 private:
  void add_merge(int64_t left, int64_t right);
  void encode_piece(std::string_view piece, std::vector<int64_t>& out) const;

  std::vector<std::string> tokens_;                    // id -> bytes
  std::vector<std::pair<int64_t, int64_t>> merges_;    // rank -> (left, right)
  std::unordered_map<uint64_t, int64_t> rank_of_pair_;  // pair_key(left, right) -> rank
};

// The lines as one token stream, each line followed by kNewlineToken: the training stream.
std::vector<int64_t> encode_lines(const Tokenizer& tokenizer, const std::vector<std::string>& lines);

// A batch of next-token examples: `batch` windows of seq_len tokens, each at a start drawn
// uniformly from the stream; targets are the same windows shifted by one token
// (targets[b][t] == the token after tokens[b][t]). Both row-major [batch, seq_len].
struct Batch {
  int64_t batch = 0, seq_len = 0;
  std::vector<int64_t> tokens, targets;
};

// Deterministic per seed (its own generator, the same on every platform). kiln::Error if the
// stream has fewer than seq_len + 1 tokens or batch/seq_len are not positive.
Batch sample_batch(std::span<const int64_t> stream, int64_t batch, int64_t seq_len, uint64_t seed);

}  // namespace kiln::data
