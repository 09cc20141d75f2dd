#pragma once
// The demo's training text: English and Spanish verb conjugations, generated from tables in
// corpus.cpp, so the repository needs no data files and every run sees the same text.
//
// One line per (language, tense, verb, person):
//   en past walk: she walked
//   en future go: we will go
//   es presente hablar: nosotros hablamos
//   es pretérito vivir: ellos vivieron
// The part before ':' (the "key") names what to conjugate, the part after it is the answer,
// so a prompt such as "es futuro comer: yo" has a single right continuation (" comeré").
// One line per person rather than one line per paradigm keeps a line at about 6-10 tokens:
// a 32-token context holds a few whole lines, and the model has to find the verb's stem in
// the line's own infinitive instead of copying the previous person's form.
//
// 52 English verbs (be, have, go, do and 48 regular ones, with the -s/-es/-ies and -d/-ed/-ied
// spelling rules and a few doubled consonants) x {present, past, future} x {I, you, he, she,
// we, they}: 936 lines; 53 Spanish verbs (48 regular -ar/-er/-ir, plus ser, estar, tener, ir,
// hacer) x {presente, pretérito, futuro} x {yo, tú, él, ella, nosotros, vosotros, ellos}:
// 1113 lines. About 64 KB of UTF-8 text (hablé, habló).
//
// Sized for MiniGPT's default config (2 layers, d_model 64, context 32) and ~600 steps: with
// AdamW (lr 3e-3) on batches of 32x32 tokens, loss went from 6.5 to 0.93, near the floor of
// ~0.9 nats/token that the line's random key (language, tense, verb, person) leaves, with 31
// of 32 sampled train lines completed exactly and 20 of 32 held-out ones.
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::data {

struct Corpus {
  // Lines without '\n', each split in its own seeded order (see conjugation_corpus).
  std::vector<std::string> train, heldout;
  // The keys ("es pretérito comer") of the held-out (language, tense, verb) combinations,
  // in a fixed order: prompts for checking that the model generalises.
  std::vector<std::string> heldout_keys;
};

// The conjugation corpus, deterministic per seed. The held-out split is whole
// (language, tense, verb) combinations, not random lines: for a third of each language's
// regular verbs, one tense (round-robin over the three) goes to `heldout` with all its
// persons, about 10% of the lines. Every such verb keeps its other two tenses in `train`,
// and every ending appears in `train` on other verbs, so held-out loss measures whether the
// model learned the endings rather than memorised the lines. Irregular verbs are never held
// out: their forms (fui, tuve, went) cannot be inferred, only remembered.
// The seed picks the held-out combinations and the order of the lines in both splits.
Corpus conjugation_corpus(uint64_t seed = 0);

}  // namespace kiln::data
