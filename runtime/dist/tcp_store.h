#pragma once
// A key-value store over TCP where the ranks of a process group meet, as PyTorch's c10d
// TCPStore is for torchrun: rank 0's process serves it on MASTER_ADDR:MASTER_PORT from a
// background thread, and every rank (rank 0 too) is a client of it. Gloo's rendezvous, the
// exchange of NCCL's unique id and the check that every rank compiled the same graph go through
// it; and because the server sees every rank's connection, it can name the rank at fault when a
// wait times out: one whose connection closed without saying goodbye died, one that is still
// connected but never set its key hangs.
//
// Every failure is a kiln::Error: a wait that times out (naming the key, the time waited and
// the dead ranks), a server that is gone (rank 0 may have died), a rank claimed twice, a
// connect that never reaches a server. No call blocks past its timeout, and a peer that
// vanishes never raises SIGPIPE.
//
// Thread safety: one object may be used from several threads; they take turns on its one
// connection, so a blocking get() holds back the other threads' calls until it returns.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::runtime::dist {

class TcpStore {
 public:
  struct Options {
    std::string host = "127.0.0.1";  // where clients connect (MASTER_ADDR)
    int port = 0;                    // MASTER_PORT; 0 on the server picks a free one (tests)
    int rank = 0, world_size = 1;
    bool is_server = false;          // rank 0's process serves (on every interface)
    std::chrono::milliseconds timeout{300000};  // default for connecting and blocking waits
  };

  // The server binds, listens and starts its thread, then connects as a client. A client
  // connects, retrying until the timeout (the server may start later), then says HELLO with
  // its rank; the server refuses a rank that is already connected.
  explicit TcpStore(Options options);
  // Says BYE (a clean exit, not a death) and closes; the server then stops its thread, and
  // the other ranks' calls fail saying the store is unreachable.
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::vector<char>& value);
  // Waits until the key is set, up to the default timeout or the one given.
  std::vector<char> get(const std::string& key);
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout);
  // Whether every key is set now; never waits.
  bool check(const std::vector<std::string>& keys);
  // Waits until every key is set.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  // An atomic counter, stored as decimal text (get() reads "3"); a missing key counts as 0.
  // Returns the new value.
  int64_t add(const std::string& key, int64_t delta);
  // Ranks whose connection closed without BYE, ascending.
  std::vector<int> dead_ranks();

  int port() const { return port_; }
  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }

 private:
  struct Server;

  // Sends one request and returns its reply's arguments; throws kiln::Error when the server
  // refuses it (a timed-out wait, a rank claimed twice) or cannot be reached. `what` names the
  // call in messages.
  std::vector<std::string> request(uint8_t op, const std::vector<std::string>& args,
                                   std::chrono::steady_clock::time_point deadline, const std::string& what);
  [[noreturn]] void lose_connection(const std::string& why);

  Options options_;
  int port_ = 0;
  std::unique_ptr<Server> server_;  // only in the serving process
  std::mutex mutex_;                // one request at a time on fd_
  int fd_ = -1;                     // the connection to the server; -1 once lost
  std::string lost_;                // why it was lost, repeated by every later call
};

}  // namespace kiln::runtime::dist
