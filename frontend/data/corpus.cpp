#include "frontend/data/corpus.h"

#include <array>
#include <random>
#include <string_view>
#include <utility>

namespace kiln::data {
namespace {

// A uniform index below n from a generator whose sequence the standard fixes
// (std::mt19937_64), with our own reduction and shuffle: std::uniform_int_distribution and
// std::shuffle are implementation-defined, and the corpus must be the same everywhere.
size_t below(std::mt19937_64& rng, size_t n) { return static_cast<size_t>(rng() % n); }

template <typename T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(rng, i)]);
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// One (language, tense, verb) combination: its key and one finished line per person.
struct Combo {
  std::string key;
  std::vector<std::string> lines;
};

// ---------------------------------------------------------------------------------------
// English
// ---------------------------------------------------------------------------------------

constexpr std::array<const char*, 6> kEnPersons = {"I", "you", "he", "she", "we", "they"};
constexpr std::array<const char*, 3> kEnTenses = {"present", "past", "future"};

// A verb's base form, and its third-person present and past where the spelling rules below
// do not give them (nullptr: by rule).
struct EnVerb {
  const char* base;
  const char* third = nullptr;
  const char* past = nullptr;
};

// "be" is conjugated from its own table; the other irregulars only need their forms here.
// Regular verbs cover each spelling rule several times (-es after s/x/ch/sh, -ies/-ied after a
// consonant + y, -d after e, plain -s after a vowel + y) so that the rules are learnable.
const std::vector<EnVerb>& english_verbs() {
  static const std::vector<EnVerb> verbs = {
      {"be"},          {"have", "has", "had"}, {"go", "goes", "went"}, {"do", "does", "did"},
      {"walk"},        {"talk"},   {"play"},   {"work"},    {"cook"},   {"clean"},  {"jump"},
      {"open"},        {"call"},   {"help"},   {"learn"},   {"listen"}, {"look"},   {"paint"},
      {"start"},       {"want"},   {"visit"},  {"climb"},   {"laugh"},  {"finish"}, {"watch"},
      {"wash"},        {"push"},   {"fix"},    {"kiss"},    {"miss"},   {"pass"},   {"try"},
      {"cry"},         {"study"},  {"carry"},  {"worry"},   {"enjoy"},  {"stay"},   {"live"},
      {"love"},        {"like"},   {"dance"},  {"smile"},   {"move"},   {"close"},  {"hope"},
      {"use"},         {"change"}, {"stop", nullptr, "stopped"},        {"plan", nullptr, "planned"},
      {"drop", nullptr, "dropped"},           {"hug", nullptr, "hugged"},
  };
  return verbs;
}

bool is_vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

std::string en_third(const EnVerb& v) {
  if (v.third) return v.third;
  std::string b = v.base;
  if (ends_with(b, "s") || ends_with(b, "x") || ends_with(b, "z") || ends_with(b, "ch") ||
      ends_with(b, "sh") || ends_with(b, "o"))
    return b + "es";
  if (ends_with(b, "y") && b.size() >= 2 && !is_vowel(b[b.size() - 2]))
    return b.substr(0, b.size() - 1) + "ies";
  return b + "s";
}

std::string en_past(const EnVerb& v) {
  if (v.past) return v.past;
  std::string b = v.base;
  if (ends_with(b, "e")) return b + "d";
  if (ends_with(b, "y") && b.size() >= 2 && !is_vowel(b[b.size() - 2]))
    return b.substr(0, b.size() - 1) + "ied";
  return b + "ed";
}

// The form of `v` for person p (index into kEnPersons) in tense t (index into kEnTenses).
std::string en_form(const EnVerb& v, size_t t, size_t p) {
  const bool third = p == 2 || p == 3;  // he, she
  if (std::string_view(v.base) == "be") {
    static constexpr std::array<const char*, 6> present = {"am", "are", "is", "is", "are", "are"};
    static constexpr std::array<const char*, 6> past = {"was", "were", "was", "was", "were", "were"};
    if (t == 0) return present[p];
    if (t == 1) return past[p];
    return "will be";
  }
  if (t == 0) return third ? en_third(v) : std::string(v.base);
  if (t == 1) return en_past(v);
  return std::string("will ") + v.base;
}

// ---------------------------------------------------------------------------------------
// Spanish
// ---------------------------------------------------------------------------------------

constexpr std::array<const char*, 7> kEsPersons = {"yo",       "tú",       "él",   "ella",
                                                   "nosotros", "vosotros", "ellos"};
constexpr std::array<const char*, 3> kEsTenses = {"presente", "pretérito", "futuro"};
// The six verb forms of a tense: él and ella share one.
constexpr std::array<size_t, 7> kEsFormOfPerson = {0, 1, 2, 2, 3, 4, 5};
using EsForms = std::array<const char*, 6>;

// The irregular verbs, with every form written out (presente, pretérito, futuro).
struct EsIrregular {
  const char* infinitive;
  std::array<EsForms, 3> tenses;
};

const std::vector<EsIrregular>& spanish_irregulars() {
  static const std::vector<EsIrregular> verbs = {
      {"ser",
       {{{"soy", "eres", "es", "somos", "sois", "son"},
         {"fui", "fuiste", "fue", "fuimos", "fuisteis", "fueron"},
         {"seré", "serás", "será", "seremos", "seréis", "serán"}}}},
      {"estar",
       {{{"estoy", "estás", "está", "estamos", "estáis", "están"},
         {"estuve", "estuviste", "estuvo", "estuvimos", "estuvisteis", "estuvieron"},
         {"estaré", "estarás", "estará", "estaremos", "estaréis", "estarán"}}}},
      {"tener",
       {{{"tengo", "tienes", "tiene", "tenemos", "tenéis", "tienen"},
         {"tuve", "tuviste", "tuvo", "tuvimos", "tuvisteis", "tuvieron"},
         {"tendré", "tendrás", "tendrá", "tendremos", "tendréis", "tendrán"}}}},
      {"ir",
       {{{"voy", "vas", "va", "vamos", "vais", "van"},
         {"fui", "fuiste", "fue", "fuimos", "fuisteis", "fueron"},
         {"iré", "irás", "irá", "iremos", "iréis", "irán"}}}},
      {"hacer",
       {{{"hago", "haces", "hace", "hacemos", "hacéis", "hacen"},
         {"hice", "hiciste", "hizo", "hicimos", "hicisteis", "hicieron"},
         {"haré", "harás", "hará", "haremos", "haréis", "harán"}}}},
  };
  return verbs;
}

// Regular verbs: no stem changes in these three tenses. buscar, llegar, pagar and tocar keep
// their sound in the pretérito's yo form by a spelling rule (busqué, llegué), which
// es_regular_form applies; verbs with other quirks (leer: leyó; pensar: pienso) are left out.
const std::vector<const char*>& spanish_regulars() {
  static const std::vector<const char*> verbs = {
      // -ar
      "hablar", "trabajar", "estudiar", "caminar", "cantar", "bailar", "comprar", "cocinar",
      "escuchar", "mirar", "llamar", "llevar", "necesitar", "viajar", "tomar", "ayudar",
      "enseñar", "terminar", "preparar", "nadar", "lavar", "esperar", "buscar", "llegar",
      "pagar", "tocar",
      // -er
      "comer", "beber", "aprender", "comprender", "correr", "vender", "deber", "temer", "romper",
      "responder", "prometer",
      // -ir
      "vivir", "escribir", "abrir", "recibir", "decidir", "subir", "partir", "compartir",
      "describir", "permitir", "discutir",
  };
  return verbs;
}

// The endings of the regular classes, per tense, in kEsFormOfPerson's order.
constexpr EsForms kArPresente = {"o", "as", "a", "amos", "áis", "an"};
constexpr EsForms kErPresente = {"o", "es", "e", "emos", "éis", "en"};
constexpr EsForms kIrPresente = {"o", "es", "e", "imos", "ís", "en"};
constexpr EsForms kArPreterito = {"é", "aste", "ó", "amos", "asteis", "aron"};
constexpr EsForms kErIrPreterito = {"í", "iste", "ió", "imos", "isteis", "ieron"};
constexpr EsForms kFuturo = {"é", "ás", "á", "emos", "éis", "án"};  // added to the infinitive

std::string es_regular_form(std::string_view infinitive, size_t t, size_t form) {
  if (t == 2) return std::string(infinitive) + kFuturo[form];
  const std::string stem(infinitive.substr(0, infinitive.size() - 2));
  const std::string_view cls = infinitive.substr(infinitive.size() - 2);
  if (t == 0) {
    const EsForms& e = cls == "ar" ? kArPresente : cls == "er" ? kErPresente : kIrPresente;
    return stem + e[form];
  }
  if (cls == "ar") {
    // c -> qu, g -> gu before the é of "yo" keeps the stem's hard sound.
    if (form == 0 && ends_with(stem, "c")) return stem.substr(0, stem.size() - 1) + "qué";
    if (form == 0 && ends_with(stem, "g")) return stem + "ué";
    return stem + kArPreterito[form];
  }
  return stem + kErIrPreterito[form];
}

// ---------------------------------------------------------------------------------------

// All combinations of one language, irregular verbs first; `regular` gets the indices (into
// the result) of the regular verbs' combinations grouped by verb: regular[v][t].
std::vector<Combo> english_combos(std::vector<std::array<size_t, 3>>& regular) {
  std::vector<Combo> combos;
  for (const EnVerb& v : english_verbs()) {
    const bool irregular = v.past != nullptr && v.third != nullptr;  // have, go, do
    const bool is_regular = !irregular && std::string_view(v.base) != "be";
    std::array<size_t, 3> idx{};
    for (size_t t = 0; t < kEnTenses.size(); ++t) {
      Combo c;
      c.key = std::string("en ") + kEnTenses[t] + " " + v.base;
      for (size_t p = 0; p < kEnPersons.size(); ++p)
        c.lines.push_back(c.key + ": " + kEnPersons[p] + " " + en_form(v, t, p));
      idx[t] = combos.size();
      combos.push_back(std::move(c));
    }
    if (is_regular) regular.push_back(idx);
  }
  return combos;
}

std::vector<Combo> spanish_combos(std::vector<std::array<size_t, 3>>& regular) {
  std::vector<Combo> combos;
  auto add = [&](std::string_view infinitive, auto&& form_of) {
    std::array<size_t, 3> idx{};
    for (size_t t = 0; t < kEsTenses.size(); ++t) {
      Combo c;
      c.key = std::string("es ") + kEsTenses[t] + " " + std::string(infinitive);
      for (size_t p = 0; p < kEsPersons.size(); ++p)
        c.lines.push_back(c.key + ": " + kEsPersons[p] + " " + form_of(t, kEsFormOfPerson[p]));
      idx[t] = combos.size();
      combos.push_back(std::move(c));
    }
    return idx;
  };
  for (const EsIrregular& v : spanish_irregulars())
    add(v.infinitive, [&](size_t t, size_t f) { return std::string(v.tenses[t][f]); });
  for (const char* inf : spanish_regulars())
    regular.push_back(
        add(inf, [&](size_t t, size_t f) { return es_regular_form(inf, t, f); }));
  return combos;
}

}  // namespace

Corpus conjugation_corpus(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Corpus corpus;
  for (int lang = 0; lang < 2; ++lang) {
    std::vector<std::array<size_t, 3>> regular;
    std::vector<Combo> combos = lang == 0 ? english_combos(regular) : spanish_combos(regular);
    // A third of the regular verbs, chosen by the seed, each lose one tense to held-out;
    // round-robin over the tenses so that each tense is held out for some verbs.
    std::vector<size_t> order(regular.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    shuffle(order, rng);
    std::vector<bool> held(combos.size(), false);
    const size_t n_held = (regular.size() + 2) / 3;
    for (size_t i = 0; i < n_held; ++i) held[regular[order[i]][i % 3]] = true;
    for (size_t c = 0; c < combos.size(); ++c) {
      auto& dst = held[c] ? corpus.heldout : corpus.train;
      for (std::string& line : combos[c].lines) dst.push_back(std::move(line));
      if (held[c]) corpus.heldout_keys.push_back(combos[c].key);
    }
  }
  // Shuffled so that a window of the token stream holds unrelated lines: the model cannot
  // predict a line from its neighbours (the same verb in the next person), only from the
  // line's own key.
  shuffle(corpus.train, rng);
  shuffle(corpus.heldout, rng);
  return corpus;
}

}  // namespace kiln::data
