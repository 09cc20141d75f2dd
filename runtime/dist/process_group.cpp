// The process group's bookkeeping, common to its engines: the options from the environment,
// the default group, the same-program check and the progress record that names a rank at
// fault. The engines are gloo_engine.cpp (host memory) and runtime/cuda/nccl.cpp (GPUs).
#include "runtime/dist/process_group.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "ir/error.h"
#include "runtime/dist/tcp_store.h"

namespace kiln::runtime::dist {

namespace {

const char* kLaunchHint = "start the program with `kiln launch -n N PROGRAM` or torchrun, which set it";

int env_int(const char* name, bool required, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    if (required) fail("the process group needs the environment variable {}: {}", name, kLaunchHint);
    return fallback;
  }
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1 << 30) fail("the environment variable {}={} is not a non-negative integer", name, v);
  return static_cast<int>(x);
}

std::string bytes_to_string(const std::vector<char>& v) { return std::string(v.begin(), v.end()); }
std::vector<char> string_to_bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

std::mutex g_mu;
std::unique_ptr<ProcessGroup> g_group;

}  // namespace

GroupOptions GroupOptions::from_environment() {
  GroupOptions o;
  o.rank = env_int("RANK", true, 0);
  o.world_size = env_int("WORLD_SIZE", true, 1);
  o.local_rank = env_int("LOCAL_RANK", false, o.rank);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) o.master_addr = a;
  else if (o.world_size > 1) fail("the process group needs the environment variable MASTER_ADDR: {}", kLaunchHint);
  o.master_port = env_int("MASTER_PORT", o.world_size > 1, o.master_port);
  if (const char* t = std::getenv("KILN_DIST_TIMEOUT"); t && *t) {
    char* end = nullptr;
    double s = std::strtod(t, &end);
    if (*end != '\0' || !(s > 0)) fail("KILN_DIST_TIMEOUT={} is not a positive number of seconds", t);
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  }
  if (o.world_size < 1) fail("WORLD_SIZE={} must be at least 1", o.world_size);
  if (o.rank >= o.world_size) fail("RANK={} is not a rank of a group of WORLD_SIZE={}", o.rank, o.world_size);
  return o;
}

ProcessGroup::ProcessGroup(const GroupOptions& o) : o_(o) {
  // Gloo writes to its peers' sockets without MSG_NOSIGNAL: a peer that died would kill this
  // process with SIGPIPE (seen in CI) instead of failing the collective with an error naming
  // it. A handler the program set is left alone; the default (death) becomes "ignore".
  struct sigaction old_action {};
  if (::sigaction(SIGPIPE, nullptr, &old_action) == 0 && old_action.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  TcpStore::Options so;
  so.host = o.master_addr;
  so.port = o.master_port;
  so.rank = o.rank;
  so.world_size = o.world_size;
  so.is_server = o.rank == 0;
  so.timeout = o.timeout;
  store_ = std::make_unique<TcpStore>(so);
  // Every rank has joined before the group is used: a barrier on a counter.
  store_->add("kiln/joined", 1);
  std::vector<std::string> keys;
  store_->set(fmt::format("kiln/joined/{}", o.rank), {'1'});
  for (int r = 0; r < o.world_size; ++r) keys.push_back(fmt::format("kiln/joined/{}", r));
  try {
    store_->wait(keys, o.timeout);
  } catch (const Error& e) {
    std::string missing;
    for (int r = 0; r < o.world_size; ++r)
      if (!store_->check({keys[static_cast<size_t>(r)]})) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
    fail("rank {}: the process group of {} ranks did not form within {:.1f} s: rank(s) {} never joined at {}:{} ({})", o.rank,
         o.world_size, std::chrono::duration<double>(o.timeout).count(), missing, o.master_addr, store_->port(), e.what());
  }
}

ProcessGroup::~ProcessGroup() {
  // Rank 0 serves the store: it stays until every rank has said it is leaving, so that no rank
  // finds the store gone while it still talks to it (its last progress record, its goodbye).
  // After a failure the others are gone or failing too: nobody to wait for.
  if (failed_) return;
  try {
    store_->set(fmt::format("kiln/leaving/{}", o_.rank), {'1'});
    if (o_.rank == 0) {
      std::vector<std::string> keys;
      for (int r = 1; r < o_.world_size; ++r) keys.push_back(fmt::format("kiln/leaving/{}", r));
      if (!keys.empty()) store_->wait(keys, o_.timeout);
    }
  } catch (const std::exception&) {
    // A rank that died cannot say goodbye; leaving must not fail for it.
  }
}

std::shared_ptr<ProcessGroup::Engine>& ProcessGroup::engine_slot(const std::string& name) {
  for (auto& [n, e] : engines_)
    if (n == name) return e;
  engines_.emplace_back(name, nullptr);
  return engines_.back().second;
}

int64_t ProcessGroup::begin_collective(const std::string& label) {
  ++seq_;
  store_->set(fmt::format("kiln/progress/{}", o_.rank), string_to_bytes(fmt::format("{} {}", seq_, label)));
  return seq_;
}

std::string ProcessGroup::diagnose(int64_t seq) {
  failed_ = true;  // diagnose is asked only after a failure
  // A peer's death reaches this rank's engine socket and the store's server at about the same
  // time: give the store a second to see a death before calling a rank that is behind hung.
  for (int attempt = 0;; ++attempt) {
    Diagnosis d = diagnose_now(seq);
    if (attempt == 5 || d.found_death) return d.text;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

ProcessGroup::Diagnosis ProcessGroup::diagnose_now(int64_t seq) {
  std::vector<int> dead;
  try {
    dead = store_->dead_ranks();
  } catch (const Error& e) {
    return {fmt::format("the store that rank 0 serves is gone, so rank 0 died ({})", e.what()), true};
  }
  std::vector<std::string> why;
  for (int r : dead) why.push_back(fmt::format("rank {} died (its connection to the store closed)", r));
  for (int r = 0; r < o_.world_size; ++r) {
    if (r == o_.rank || std::find(dead.begin(), dead.end(), r) != dead.end()) continue;
    const std::string key = fmt::format("kiln/progress/{}", r);
    if (!store_->check({key})) {
      why.push_back(fmt::format("rank {} has not reached collective #{} (it has run none)", r, seq));
      continue;
    }
    const std::string p = bytes_to_string(store_->get(key));
    const int64_t theirs = std::strtoll(p.c_str(), nullptr, 10);
    if (theirs < seq)
      why.push_back(fmt::format("rank {} has not reached collective #{} (its last: #{}, {})", r, seq, theirs, p.substr(p.find(' ') + 1)));
  }
  if (why.empty()) return {fmt::format("every rank reached collective #{}", seq), false};
  return {fmt::format("{}", fmt::join(why, "; ")), !dead.empty()};
}

void ProcessGroup::check_same_program(const std::string& graph, const std::string& description) {
  const int64_t n = ++programs_checked_;
  const std::string mine = fmt::format("graph {}:\n{}", graph, description);
  store_->set(fmt::format("kiln/program/{}/{}", n, o_.rank), string_to_bytes(mine));
  for (int r = 0; r < o_.world_size; ++r) {
    if (r == o_.rank) continue;
    const std::string key = fmt::format("kiln/program/{}/{}", n, r);
    std::string theirs;
    try {
      theirs = bytes_to_string(store_->get(key, o_.timeout));
    } catch (const Error& e) {
      fail("rank {}: graph {}: before its first collective, rank {} never described its program {} ({}; {})", o_.rank, graph, r, n,
           diagnose(seq_ + 1), e.what());
    }
    if (theirs == mine) continue;
    fail("rank {}: the ranks run different graphs (found before the first collective of program {}):\nrank {} runs {}\nrank {} runs {}",
         o_.rank, n, std::min(r, o_.rank), r < o_.rank ? theirs : mine, std::max(r, o_.rank), r < o_.rank ? mine : theirs);
  }
}

ProcessGroup* default_group() {
  std::lock_guard lock(g_mu);
  return g_group.get();
}

ProcessGroup& init_process_group(const GroupOptions& o) {
  std::lock_guard lock(g_mu);
  if (g_group)
    fail("init_process_group: this process is rank {} of a group of {} already (destroy_process_group first)", g_group->rank(),
         g_group->world_size());
  g_group = std::make_unique<ProcessGroup>(o);
  return *g_group;
}

void destroy_process_group() {
  std::lock_guard lock(g_mu);
  g_group.reset();
}

ProcessGroup& group_for(int64_t world_size, const std::string& label) {
  ProcessGroup* g = default_group();
  if (!g)
    fail("{} is a collective over {} ranks, and this process has joined no process group: call kiln::dist::init_process_group() "
         "first ({})",
         label, world_size, kLaunchHint);
  if (g->world_size() != world_size)
    fail("{} is a collective over {} ranks, but this process group has {} (WORLD_SIZE={})", label, world_size, g->world_size(),
         g->world_size());
  return *g;
}

}  // namespace kiln::runtime::dist
