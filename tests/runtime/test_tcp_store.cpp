#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ir/error.h"
#include "runtime/dist/tcp_store.h"

namespace kiln::runtime::dist {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<char>& v) { return {v.begin(), v.end()}; }
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

TcpStore::Options server_options(int world_size) {
  TcpStore::Options o;
  o.is_server = true;
  o.world_size = world_size;
  o.timeout = 5s;
  return o;
}

TcpStore::Options client_options(int port, int rank, int world_size) {
  TcpStore::Options o;
  o.port = port;
  o.rank = rank;
  o.world_size = world_size;
  o.timeout = 5s;
  return o;
}

// A socket listening on a port the kernel picked; closing it leaves a port free for a moment.
struct Listener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  Listener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(fd, 16), 0);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

int free_port() { return Listener().port; }

// The message of the kiln::Error that fn throws ("" if it throws none).
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TcpStore, SetGetRoundTripsAnyBytesAndKeys) {
  TcpStore server(server_options(2));
  TcpStore client(client_options(server.port(), 1, 2));
  EXPECT_GT(server.port(), 0);
  EXPECT_EQ(client.port(), server.port());
  EXPECT_EQ(client.rank(), 1);
  EXPECT_EQ(client.world_size(), 2);

  std::vector<char> binary{'\0', 'a', '\xff', '\0', '\n'};
  std::vector<char> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7919 % 251);
  std::string long_key(100000, 'k');
  long_key += std::string("\0\xff", 2);

  server.set("binary", binary);
  client.set("empty", {});
  client.set(long_key, big);
  EXPECT_EQ(client.get("binary"), binary);
  EXPECT_EQ(server.get("empty"), std::vector<char>{});
  EXPECT_EQ(server.get(long_key), big);
  server.set("binary", bytes("overwritten"));
  EXPECT_EQ(text(client.get("binary")), "overwritten");
}

TEST(TcpStore, GetWaitsUntilAnotherRankSets) {
  TcpStore server(server_options(2));
  TcpStore client(client_options(server.port(), 1, 2));
  auto start = Clock::now();
  std::string got, error;
  std::thread waiter([&] { error = error_of([&] { got = text(client.get("id", 5s)); }); });
  std::this_thread::sleep_for(200ms);
  server.set("id", bytes("nccl-unique-id"));
  waiter.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, "nccl-unique-id");
  EXPECT_GE(seconds_since(start), 0.19);
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(TcpStore, AddIsAtomicAcrossRanksAndThreads) {
  constexpr int kWorld = 4, kThreadsPerRank = 2, kAdds = 50;
  TcpStore server(server_options(kWorld));
  std::vector<std::unique_ptr<TcpStore>> stores;
  for (int r = 1; r < kWorld; ++r) stores.push_back(std::make_unique<TcpStore>(client_options(server.port(), r, kWorld)));
  std::vector<TcpStore*> all{&server};
  for (auto& s : stores) all.push_back(s.get());

  EXPECT_EQ(server.add("fresh", 5), 5) << "a missing key counts as 0";
  std::vector<std::thread> threads;
  std::atomic<int64_t> largest{0};
  for (TcpStore* s : all) {
    for (int t = 0; t < kThreadsPerRank; ++t) {
      // Two threads of one process share its store object.
      threads.emplace_back([s, &largest] {
        EXPECT_EQ(error_of([&] {
                    for (int i = 0; i < kAdds; ++i) {
                      int64_t v = s->add("counter", 1);
                      int64_t seen = largest.load();
                      while (v > seen && !largest.compare_exchange_weak(seen, v)) {
                      }
                    }
                  }),
                  "");
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(largest.load(), kWorld * kThreadsPerRank * kAdds);
  EXPECT_EQ(text(stores[0]->get("counter")), std::to_string(kWorld * kThreadsPerRank * kAdds));
  EXPECT_EQ(stores[1]->add("counter", -400), 0);

  server.set("words", bytes("not a number"));
  std::string error = error_of([&] { stores[2]->add("words", 1); });
  EXPECT_NE(error.find("'words'"), std::string::npos) << error;
  EXPECT_NE(error.find("not a counter"), std::string::npos) << error;
}

TEST(TcpStore, CheckAndWaitSeeEveryKey) {
  TcpStore server(server_options(2));
  TcpStore client(client_options(server.port(), 1, 2));
  EXPECT_TRUE(client.check({}));
  EXPECT_FALSE(client.check({"a"}));
  std::atomic<bool> done{false};
  std::string error;
  std::thread waiter([&] {
    error = error_of([&] { client.wait({"a", "b"}, 5s); });
    done = true;
  });
  server.set("a", bytes("1"));
  EXPECT_TRUE(server.check({"a"}));
  EXPECT_FALSE(server.check({"a", "b"}));
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(done.load()) << "wait() returned before 'b' was set";
  server.add("b", 1);  // a counter's key counts as set too
  waiter.join();
  EXPECT_EQ(error, "");
  EXPECT_TRUE(client.check({"a", "b"}));
}

TEST(TcpStore, TimedOutWaitNamesKeyTimeAndRanksThatNeverCame) {
  TcpStore server(server_options(3));
  TcpStore client(client_options(server.port(), 1, 3));
  auto start = Clock::now();
  std::string error = error_of([&] { client.get("missing", 300ms); });
  double waited = seconds_since(start);
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 1.5);
  EXPECT_NE(error.find("rank 1: waited 0.3 s for key 'missing'"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 2 never connected"), std::string::npos) << error;

  server.set("here", bytes("1"));
  error = error_of([&] { server.wait({"here", "absent"}, 200ms); });
  EXPECT_NE(error.find("waited 0.2 s for keys 'absent' (1 of the 2 waited on)"), std::string::npos) << error;

  // The timed-out waits left both connections usable.
  client.set("after", bytes("ok"));
  EXPECT_EQ(text(server.get("after")), "ok");
}

TEST(TcpStore, ManyConcurrentGetsAreAnsweredWhenSet) {
  constexpr int kWorld = 9, kKeys = 5;
  TcpStore server(server_options(kWorld));
  std::vector<std::unique_ptr<TcpStore>> clients;
  for (int r = 1; r < kWorld; ++r) clients.push_back(std::make_unique<TcpStore>(client_options(server.port(), r, kWorld)));
  std::vector<std::vector<std::string>> got(clients.size());
  std::vector<std::thread> threads;
  for (size_t c = 0; c < clients.size(); ++c) {
    threads.emplace_back([&, c] {
      EXPECT_EQ(error_of([&] {
                  for (int k = 0; k < kKeys; ++k) got[c].push_back(text(clients[c]->get("key" + std::to_string(k), 5s)));
                }),
                "");
    });
  }
  std::this_thread::sleep_for(100ms);  // let every client park its first get
  for (int k = kKeys - 1; k >= 0; --k) server.set("key" + std::to_string(k), bytes("value" + std::to_string(k)));
  for (auto& t : threads) t.join();
  for (size_t c = 0; c < clients.size(); ++c) {
    ASSERT_EQ(got[c].size(), size_t{kKeys});
    for (int k = 0; k < kKeys; ++k) EXPECT_EQ(got[c][k], "value" + std::to_string(k)) << "client " << c + 1;
  }
}

TEST(TcpStore, SecondClaimOfARankIsRefused) {
  TcpStore server(server_options(2));
  auto first = std::make_unique<TcpStore>(client_options(server.port(), 1, 2));
  std::string error = error_of([&] { TcpStore second(client_options(server.port(), 1, 2)); });
  EXPECT_NE(error.find("rank 1: another process already joined the store as rank 1: two processes claim rank 1"), std::string::npos) << error;
  first->set("still", bytes("fine"));
  EXPECT_EQ(text(server.get("still")), "fine");
  EXPECT_TRUE(server.dead_ranks().empty()) << "a refused claim is not a death";

  error = error_of([&] { TcpStore wrong(client_options(server.port(), 1, 3)); });
  EXPECT_NE(error.find("world of 3 ranks, the store's is 2"), std::string::npos) << error;
}

TEST(TcpStore, ConnectRetriesUntilTheServerStarts) {
  int port = free_port();
  std::unique_ptr<TcpStore> client;
  std::string error;
  std::thread connecting([&] {
    error = error_of([&] { client = std::make_unique<TcpStore>(client_options(port, 1, 2)); });
  });
  std::this_thread::sleep_for(300ms);
  auto options = server_options(2);
  options.port = port;
  TcpStore server(options);
  connecting.join();
  ASSERT_EQ(error, "");
  ASSERT_TRUE(client);
  client->set("k", bytes("v"));
  EXPECT_EQ(text(server.get("k")), "v");
}

TEST(TcpStore, ConnectGivesUpAfterItsTimeoutNamingTheAddress) {
  int port = free_port();
  auto options = client_options(port, 1, 2);
  options.timeout = 300ms;
  auto start = Clock::now();
  std::string error = error_of([&] { TcpStore client(options); });
  EXPECT_GE(seconds_since(start), 0.29);
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_NE(error.find("could not connect to the store at 127.0.0.1:" + std::to_string(port)), std::string::npos) << error;
  EXPECT_NE(error.find("MASTER_ADDR"), std::string::npos) << error;
  EXPECT_NE(error.find("MASTER_PORT"), std::string::npos) << error;
}

TEST(TcpStore, ServerOnAPortInUseSaysSo) {
  TcpStore first(server_options(1));
  auto options = server_options(1);
  options.port = first.port();
  std::string error = error_of([&] { TcpStore second(options); });
  EXPECT_NE(error.find("rank 0 could not serve the store on port " + std::to_string(first.port())), std::string::npos) << error;
  EXPECT_NE(error.find("MASTER_PORT"), std::string::npos) << error;
}

TEST(TcpStore, ServerThatNeverAnswersTimesOut) {
  Listener silent;  // the kernel accepts the connection; nobody reads it
  auto options = client_options(silent.port, 1, 2);
  options.timeout = 300ms;
  auto start = Clock::now();
  std::string error = error_of([&] { TcpStore client(options); });
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_NE(error.find("did not answer HELLO in time"), std::string::npos) << error;
}

TEST(TcpStore, RankWhoseProcessExitsWithoutByeIsDead) {
  // Fork before any thread starts (the server's included): the child is a copy of a
  // single-threaded process. It learns the port through a pipe, joins as rank 1 and exits
  // without saying BYE, as a crashed rank would.
  int port_pipe[2];
  ASSERT_EQ(::pipe(port_pipe), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(port_pipe[1]);
    int port = 0;
    if (::read(port_pipe[0], &port, sizeof port) != sizeof port) ::_exit(2);
    try {
      auto* store = new TcpStore(client_options(port, 1, 2));
      store->set("child/joined", {'1'});
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  ::close(port_pipe[0]);
  TcpStore server(server_options(2));
  int port = server.port();
  ASSERT_EQ(::write(port_pipe[1], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  ::close(port_pipe[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed to join: status " << status;
  EXPECT_EQ(text(server.get("child/joined", 1s)), "1");

  auto deadline = Clock::now() + 3s;
  while (server.dead_ranks().empty() && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.dead_ranks(), std::vector<int>{1});
  std::string error = error_of([&] { server.get("from/rank1", 100ms); });
  EXPECT_NE(error.find("rank 1 died (its connection to the store closed)"), std::string::npos) << error;
}

TEST(TcpStore, CleanExitIsNotADeath) {
  TcpStore server(server_options(2));
  std::make_unique<TcpStore>(client_options(server.port(), 1, 2)).reset();  // joins, says BYE, leaves
  std::string error;
  auto deadline = Clock::now() + 3s;
  while (error.find("left") == std::string::npos && Clock::now() < deadline)
    error = error_of([&] { server.get("never", 20ms); });
  EXPECT_NE(error.find("rank 1 already left (closed the store cleanly)"), std::string::npos) << error;
  EXPECT_TRUE(server.dead_ranks().empty());
  // The rank may come back.
  TcpStore again(client_options(server.port(), 1, 2));
  again.set("back", bytes("1"));
}

TEST(TcpStore, ServerGoneFailsEveryCallFastWithoutSigpipe) {
  auto server = std::make_unique<TcpStore>(server_options(3));
  int port = server->port();
  TcpStore blocked(client_options(port, 1, 3));
  TcpStore idle(client_options(port, 2, 3));
  std::string blocked_error;
  double blocked_for = 0;
  std::thread waiter([&] {
    auto start = Clock::now();
    blocked_error = error_of([&] { blocked.get("never", 5s); });
    blocked_for = seconds_since(start);
  });
  std::this_thread::sleep_for(200ms);
  server.reset();  // rank 0's process is gone
  waiter.join();
  EXPECT_LT(blocked_for, 1.5) << "a blocked get must notice the store is gone";
  std::string where = "the store at 127.0.0.1:" + std::to_string(port) + " served by rank 0 is unreachable";
  EXPECT_NE(blocked_error.find(where), std::string::npos) << blocked_error;
  EXPECT_NE(blocked_error.find("rank 0 may have died"), std::string::npos) << blocked_error;

  // Sending a large value to a closed peer raises EPIPE, which must be an error, not SIGPIPE.
  std::vector<char> large(8 << 20, 'x');
  std::string error = error_of([&] { idle.set("large", large); });
  EXPECT_NE(error.find(where), std::string::npos) << error;
  for (auto call : std::vector<std::function<void()>>{[&] { idle.get("k", 100ms); }, [&] { idle.check({"k"}); },
                                                      [&] { idle.add("n", 1); }, [&] { idle.dead_ranks(); }}) {
    error = error_of(call);
    EXPECT_NE(error.find(where), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace kiln::runtime::dist
