#include "frontend/data/tokenizer.h"

#include <algorithm>
#include <limits>
#include <map>
#include <random>

#include "ir/error.h"

namespace kiln::data {
namespace {

// Ids fit in 32 bits (a vocabulary is far smaller), so a pair packs into one map key, and
// the key's order is the pair's lexicographic order: the tie-break of training.
uint64_t pair_key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
}

enum class CharClass { Letter, Digit, Other, Space, OtherWhitespace };

CharClass char_class(unsigned char c) {
  if (c == ' ') return CharClass::Space;
  if (c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f') return CharClass::OtherWhitespace;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::Letter;
  if (c >= '0' && c <= '9') return CharClass::Digit;
  return CharClass::Other;
}

}  // namespace

std::vector<std::string_view> split_pieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  const size_t n = text.size();
  auto cls = [&](size_t i) { return char_class(static_cast<unsigned char>(text[i])); };
  auto run_end = [&](size_t i) {  // the end of the run of text[i]'s class starting at i
    const CharClass c = cls(i);
    while (i < n && cls(i) == c) ++i;
    return i;
  };
  size_t i = 0;
  while (i < n) {
    const CharClass c = cls(i);
    if (c == CharClass::OtherWhitespace) {
      pieces.push_back(text.substr(i, 1));
      ++i;
    } else if (c == CharClass::Space) {
      const size_t spaces_end = run_end(i);
      if (spaces_end < n && cls(spaces_end) != CharClass::OtherWhitespace) {
        // The last space goes with the word after it (" walked"), the others stand alone.
        if (spaces_end - 1 > i) pieces.push_back(text.substr(i, spaces_end - 1 - i));
        const size_t start = spaces_end - 1, end = run_end(spaces_end);
        pieces.push_back(text.substr(start, end - start));
        i = end;
      } else {
        pieces.push_back(text.substr(i, spaces_end - i));
        i = spaces_end;
      }
    } else {
      const size_t end = run_end(i);
      pieces.push_back(text.substr(i, end - i));
      i = end;
    }
  }
  return pieces;
}

void Tokenizer::add_merge(int64_t left, int64_t right) {
  rank_of_pair_.emplace(pair_key(left, right), static_cast<int64_t>(merges_.size()));
  merges_.emplace_back(left, right);
  tokens_.push_back(tokens_[left] + tokens_[right]);
}

Tokenizer Tokenizer::train(const std::vector<std::string>& lines, int vocab_size) {
  KILN_CHECK(vocab_size >= 256, "Tokenizer::train: vocab_size {} is below the 256 byte tokens",
             vocab_size);
  Tokenizer tok;
  for (int b = 0; b < 256; ++b) tok.tokens_.emplace_back(1, static_cast<char>(b));

  // The distinct pieces with their counts; a std::map so that the words' numbering (and with
  // it everything below) does not depend on hashing or on the order of the lines.
  std::map<std::string_view, int64_t> piece_counts;
  for (const std::string& line : lines)
    for (std::string_view piece : split_pieces(line)) ++piece_counts[piece];
  std::vector<std::vector<int64_t>> words;
  std::vector<int64_t> freq;
  for (const auto& [piece, count] : piece_counts) {
    if (piece.size() < 2) continue;  // nothing to merge in it, ever
    words.emplace_back(piece.begin(), piece.end());
    for (int64_t& id : words.back()) id = static_cast<unsigned char>(id);
    freq.push_back(count);
  }

  // Pair counts over all words (weighted by their frequency), and for each pair the words it
  // may occur in. A merge only revisits the words of the merged pair, so training costs about
  // the number of symbols that change instead of a full recount per merge.
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> pair_words;
  for (size_t w = 0; w < words.size(); ++w)
    for (size_t j = 0; j + 1 < words[w].size(); ++j) {
      const uint64_t k = pair_key(words[w][j], words[w][j + 1]);
      pair_count[k] += freq[w];
      pair_words[k].push_back(static_cast<int32_t>(w));
    }

  while (tok.vocab_size() < vocab_size) {
    KILN_CHECK(!pair_count.empty(),
               "Tokenizer::train: the text has only enough pairs for {} tokens, not {}",
               tok.vocab_size(), vocab_size);
    // The most frequent pair; among equals the smallest key. A scan is cheap here (a few
    // thousand distinct pairs) and, unlike a heap, needs no invalidation.
    uint64_t best = 0;
    int64_t best_count = -1;
    for (const auto& [k, c] : pair_count)
      if (c > best_count || (c == best_count && k < best)) best = k, best_count = c;
    const int64_t left = static_cast<int64_t>(best >> 32);
    const int64_t right = static_cast<int64_t>(best & 0xffffffffu);
    const int64_t merged = tok.vocab_size();
    tok.add_merge(left, right);

    std::vector<int32_t> affected = std::move(pair_words[best]);
    pair_words.erase(best);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    for (int32_t w : affected) {
      std::vector<int64_t>& word = words[w];
      auto for_each_pair = [&](auto&& fn) {
        for (size_t j = 0; j + 1 < word.size(); ++j) fn(word[j], word[j + 1]);
      };
      // The list may name words the pair has left since (merged away by an earlier merge).
      bool has_pair = false;
      for_each_pair([&](int64_t a, int64_t b) { has_pair |= a == left && b == right; });
      if (!has_pair) continue;
      for_each_pair([&](int64_t a, int64_t b) {
        const uint64_t k = pair_key(a, b);
        if ((pair_count[k] -= freq[w]) == 0) pair_count.erase(k);
      });
      // Left to right, as encode does: "a a a" with (a, a) becomes "aa a".
      std::vector<int64_t> out;
      out.reserve(word.size());
      for (size_t j = 0; j < word.size(); ++j) {
        if (j + 1 < word.size() && word[j] == left && word[j + 1] == right) {
          out.push_back(merged);
          ++j;
        } else {
          out.push_back(word[j]);
        }
      }
      word = std::move(out);
      for_each_pair([&](int64_t a, int64_t b) {
        const uint64_t k = pair_key(a, b);
        pair_count[k] += freq[w];
        // A pair without the new token was already in this word, so already listed.
        if (a == merged || b == merged) pair_words[k].push_back(w);
      });
    }
  }
  return tok;
}

void Tokenizer::encode_piece(std::string_view piece, std::vector<int64_t>& out) const {
  std::vector<int64_t> ids(piece.begin(), piece.end());
  for (int64_t& id : ids) id = static_cast<unsigned char>(id);
  while (ids.size() >= 2) {
    int64_t best_rank = std::numeric_limits<int64_t>::max();
    for (size_t j = 0; j + 1 < ids.size(); ++j) {
      auto it = rank_of_pair_.find(pair_key(ids[j], ids[j + 1]));
      if (it != rank_of_pair_.end()) best_rank = std::min(best_rank, it->second);
    }
    if (best_rank == std::numeric_limits<int64_t>::max()) break;
    const auto [left, right] = merges_[best_rank];
    const int64_t merged = 256 + best_rank;
    size_t k = 0;
    for (size_t j = 0; j < ids.size(); ++j) {
      if (j + 1 < ids.size() && ids[j] == left && ids[j + 1] == right) {
        ids[k++] = merged;
        ++j;
      } else {
        ids[k++] = ids[j];
      }
    }
    ids.resize(k);
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

std::vector<int64_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int64_t> out;
  for (std::string_view piece : split_pieces(text)) encode_piece(piece, out);
  return out;
}

std::string Tokenizer::token_text(int64_t id) const {
  KILN_CHECK(id >= 0 && id < vocab_size(), "Tokenizer: token id {} is outside [0, {})", id,
             vocab_size());
  return tokens_[id];
}

std::string Tokenizer::decode(std::span<const int64_t> ids) const {
  std::string text;
  for (int64_t id : ids) {
    KILN_CHECK(id >= 0 && id < vocab_size(), "Tokenizer: token id {} is outside [0, {})", id,
               vocab_size());
    text += tokens_[id];
  }
  return text;
}

std::vector<int64_t> encode_lines(const Tokenizer& tokenizer, const std::vector<std::string>& lines) {
  std::vector<int64_t> stream;
  for (const std::string& line : lines) {
    std::vector<int64_t> ids = tokenizer.encode(line);
    stream.insert(stream.end(), ids.begin(), ids.end());
    stream.push_back(kNewlineToken);
  }
  return stream;
}

Batch sample_batch(std::span<const int64_t> stream, int64_t batch, int64_t seq_len, uint64_t seed) {
  KILN_CHECK(batch > 0 && seq_len > 0, "sample_batch: batch ({}) and seq_len ({}) must be positive",
             batch, seq_len);
  const int64_t size = static_cast<int64_t>(stream.size());
  KILN_CHECK(size >= seq_len + 1, "sample_batch: a stream of {} tokens has no window of {} + 1",
             size, seq_len);
  // std::mt19937_64's sequence is fixed by the standard; the reduction is ours (a distribution's
  // is implementation-defined). The modulo's bias is below 1e-14 for streams this size.
  std::mt19937_64 rng(seed);
  const uint64_t starts = static_cast<uint64_t>(size - seq_len);  // start + seq_len < size
  Batch b;
  b.batch = batch;
  b.seq_len = seq_len;
  b.tokens.reserve(batch * seq_len);
  b.targets.reserve(batch * seq_len);
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t start = static_cast<int64_t>(rng() % starts);
    b.tokens.insert(b.tokens.end(), stream.begin() + start, stream.begin() + start + seq_len);
    b.targets.insert(b.targets.end(), stream.begin() + start + 1,
                     stream.begin() + start + seq_len + 1);
  }
  return b;
}

}  // namespace kiln::data
