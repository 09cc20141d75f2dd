#include "runtime/dist/tcp_store.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdio>
#include <map>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

#include "ir/error.h"

namespace kiln::runtime::dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The wire protocol. Every message is a frame: an 8-byte little-endian length, then that many
// bytes: a one-byte code (a request's op, a reply's status) and its arguments, each an 8-byte
// little-endian length and that many bytes (so values and keys are any bytes, of any length).
// Numbers travel as decimal text. A client sends one request and reads its one reply before
// the next; BYE has no reply. GET and WAIT carry their timeout: the server answers a wait that
// times out itself, because it alone knows which ranks died.
enum Op : uint8_t { kHello = 1, kBye, kSet, kGet, kWait, kCheck, kAdd, kDeadRanks };
enum Status : uint8_t { kOk = 0, kFailed = 1 };

// Checked before a frame's bytes are awaited, so that a stray connection speaking another
// protocol is dropped rather than buffered without end.
constexpr uint64_t kMaxFrame = uint64_t{1} << 34;
// How much longer than a wait's timeout a client waits for the server to answer it.
constexpr milliseconds kReplyGrace{2000};

struct Message {
  uint8_t code = 0;
  std::vector<std::string> args;
};

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

std::string frame(uint8_t code, const std::vector<std::string>& args) {
  uint64_t length = 1;
  for (const auto& a : args) length += 8 + a.size();
  std::string out;
  out.reserve(8 + length);
  put_u64(out, length);
  out.push_back(static_cast<char>(code));
  for (const auto& a : args) {
    put_u64(out, a.size());
    out += a;
  }
  return out;
}

// Takes one whole frame off the front of `buffer`; false while it is incomplete. Throws
// kiln::Error on bytes that are not a frame of ours.
bool take_frame(std::string& buffer, Message& m) {
  if (buffer.size() < 8) return false;
  uint64_t length = get_u64(buffer.data());
  KILN_CHECK(length >= 1 && length <= kMaxFrame, "malformed store frame (length {})", length);
  if (buffer.size() - 8 < length) return false;
  const char* p = buffer.data() + 8;
  const char* end = p + length;
  m.code = static_cast<uint8_t>(*p++);
  m.args.clear();
  while (p < end) {
    KILN_CHECK(end - p >= 8, "malformed store frame (a truncated argument)");
    uint64_t n = get_u64(p);
    p += 8;
    KILN_CHECK(n <= static_cast<uint64_t>(end - p), "malformed store frame (an argument overruns it)");
    m.args.emplace_back(p, n);
    p += n;
  }
  buffer.erase(0, 8 + length);
  return true;
}

bool parse_int(const std::string& s, int64_t& v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size();
}

int64_t to_int(const std::string& s) {
  int64_t v = 0;
  KILN_CHECK(parse_int(s, v), "malformed store message (expected a number)");
  return v;
}

// Arguments a request needs at least (GET and WAIT: the timeout, then the keys).
size_t min_args(uint8_t op) {
  switch (op) {
    case kHello: case kSet: case kAdd: case kGet: return 2;
    case kWait: return 1;
    default: return 0;
  }
}

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

// Timeouts from callers are clamped to [0, about 35 years], so that "forever"
// (milliseconds::max()) does not overflow a deadline.
milliseconds bounded(milliseconds ms) { return std::clamp(ms, milliseconds(0), milliseconds(int64_t{1} << 40)); }

std::string seconds(milliseconds ms) { return fmt::format("{:.1f} s", ms.count() / 1000.0); }

// A key as messages show it: quoted, and cut short if long.
std::string shown_key(const std::string& key) {
  return key.size() <= 100 ? "'" + key + "'" : "'" + key.substr(0, 100) + "...'";
}

std::string rank_list(const std::vector<int>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Small requests and replies go out at once rather than waiting on Nagle's algorithm.
void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int poll_ms(Clock::time_point deadline) {
  auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, INT_MAX));
}

// Waits until `fd` is ready for `events` or the deadline passes (false). An error or a hangup
// counts as ready: the send or recv that follows reports it.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, poll_ms(deadline));
    if (n > 0 || (n < 0 && errno != EINTR)) return true;
    if (n == 0 && Clock::now() >= deadline) return false;
  }
}

// One attempt on every address `host` resolves to. Non-blocking, so that an address that
// drops packets costs no more than the deadline. Returns -1 with `why` when none answers.
Fd try_connect(const std::string& host, int port, Clock::time_point deadline, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    why = fmt::format("cannot resolve '{}': {}", host, ::gai_strerror(rc));
    return Fd();
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, ::freeaddrinfo);
  for (addrinfo* a = found; a; a = a->ai_next) {
    Fd s(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (s.get() < 0) {
      why = errno_text(errno);
      continue;
    }
    int err = ::connect(s.get(), a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      socklen_t len = sizeof err;
      err = ETIMEDOUT;
      if (wait_ready(s.get(), POLLOUT, deadline)) ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      set_nodelay(s.get());
      return s;
    }
    why = errno_text(err);
  }
  return Fd();
}

// Listens on every interface (MASTER_ADDR may name any of them): IPv6 taking IPv4 too where
// the machine has IPv6, else IPv4 alone.
Fd listen_on(int port, std::string& why) {
  for (int family : {AF_INET6, AF_INET}) {
    Fd s(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (s.get() < 0) continue;
    int one = 1, zero = 0;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage address{};
    if (family == AF_INET6) {
      ::setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&address);
      a6->sin6_family = AF_INET6;
      a6->sin6_addr = in6addr_any;
      a6->sin6_port = htons(static_cast<uint16_t>(port));
    } else {
      auto* a4 = reinterpret_cast<sockaddr_in*>(&address);
      a4->sin_family = AF_INET;
      a4->sin_addr.s_addr = htonl(INADDR_ANY);
      a4->sin_port = htons(static_cast<uint16_t>(port));
    }
    socklen_t len = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&address), len) == 0 && ::listen(s.get(), SOMAXCONN) == 0)
      return s;
    why = errno_text(errno);
  }
  return Fd();
}

int bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t len = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &len);
  return ntohs(address.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

}  // namespace

// The server: one thread polls the listening socket and every connection. A GET or WAIT whose
// keys are not all set is parked on its connection until a SET or ADD completes it or its
// deadline passes; clients send one request at a time, so a connection has at most one.
struct TcpStore::Server {
  struct Conn {
    Fd fd;
    std::string in, out;  // bytes received and not yet parsed; bytes not yet sent
    int rank = -1;        // after HELLO
    bool said_bye = false, eof = false, closed = false;
    bool parked = false;  // the wait below is pending
    uint8_t wait_op = 0;
    std::vector<std::string> wait_keys;
    milliseconds wait_timeout{0};
    Clock::time_point wait_deadline;
  };

  int port = 0;

  explicit Server(const Options& o) : world_size(o.world_size) {
    std::string why;
    listener = listen_on(o.port, why);
    KILN_CHECK(listener.get() >= 0, "rank {} could not serve the store on port {}: {}; is MASTER_PORT in use by another job?",
               o.rank, o.port, why);
    port = bound_port(listener.get());
    int pipe_fds[2];
    KILN_CHECK(::pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) == 0, "the store could not make a pipe: {}", errno_text(errno));
    wake_read.reset(pipe_fds[0]);
    wake_write.reset(pipe_fds[1]);
    thread = std::thread([this] { run(); });
  }

  ~Server() {
    char byte = 0;
    (void)!::write(wake_write.get(), &byte, 1);
    thread.join();
  }

 private:
  int world_size;
  Fd listener, wake_read, wake_write;
  std::vector<std::unique_ptr<Conn>> conns;
  std::unordered_map<std::string, std::string> data;
  std::map<int, Conn*> connected;  // rank -> its connection, from HELLO to close
  std::set<int> dead, left;        // ranks whose connection closed without / after BYE
  std::thread thread;

  void run() {
    try {
      serve();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kiln: the store's server thread stopped: %s\n", e.what());
    }
    conns.clear();  // closing every connection tells the clients the store is gone
    listener.reset();
  }

  void serve() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.assign({{wake_read.get(), POLLIN, 0}, {listener.get(), POLLIN, 0}});
      for (auto& c : conns) fds.push_back({c->fd.get(), static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
      if (::poll(fds.data(), fds.size(), next_deadline_ms()) < 0 && errno != EINTR)
        fail("poll failed: {}", errno_text(errno));
      if (fds[0].revents) return;  // the destructor woke us
      size_t polled = fds.size() - 2;
      if (fds[1].revents & POLLIN) accept_all();
      for (size_t i = 0; i < polled; ++i) {
        if (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) receive(*conns[i]);
        if (fds[i + 2].revents & POLLOUT) flush(*conns[i]);
      }
      // Frames are handled after every read, and a connection's end after its frames: a BYE
      // and the close that follows it often arrive together.
      for (auto& c : conns) process(*c);
      expire_waits();
      std::erase_if(conns, [](const auto& c) { return c->closed; });
    }
  }

  int next_deadline_ms() const {
    int ms = -1;
    for (const auto& c : conns)
      if (c->parked) ms = ms < 0 ? poll_ms(c->wait_deadline) : std::min(ms, poll_ms(c->wait_deadline));
    return ms;
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0 && errno == EINTR) continue;
      if (fd < 0) return;
      set_nodelay(fd);
      conns.push_back(std::make_unique<Conn>());
      conns.back()->fd.reset(fd);
    }
  }

  void receive(Conn& c) {
    char buffer[65536];
    while (!c.eof) {
      ssize_t n = ::recv(c.fd.get(), buffer, sizeof buffer, 0);
      if (n > 0) {
        c.in.append(buffer, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        c.eof = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
        return;
      }
    }
  }

  void flush(Conn& c) {
    while (!c.closed && !c.out.empty()) {
      ssize_t n = ::send(c.fd.get(), c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out.erase(0, static_cast<size_t>(n));
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;  // the rest goes when poll says the socket can take it
      } else if (!(n < 0 && errno == EINTR)) {
        drop(c);
      }
    }
  }

  void drop(Conn& c) {
    if (c.closed) return;
    c.closed = true;
    c.parked = false;
    if (auto it = connected.find(c.rank); it != connected.end() && it->second == &c) {
      connected.erase(it);
      (c.said_bye ? left : dead).insert(c.rank);
    }
    c.fd.reset();
  }

  void reply(Conn& c, Status status, const std::vector<std::string>& args) {
    c.out += frame(status, args);
    flush(c);
  }

  void process(Conn& c) {
    Message m;
    try {
      while (!c.closed && !c.parked && take_frame(c.in, m)) handle(c, m);
    } catch (const Error&) {
      drop(c);  // not a client of ours, or a broken one
    }
    if (c.eof) drop(c);
  }

  bool all_set(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return data.count(k) > 0; });
  }

  void handle(Conn& c, Message& m) {
    auto& a = m.args;
    KILN_CHECK(a.size() >= min_args(m.code), "malformed store request");
    switch (m.code) {
      case kHello: {
        int64_t rank = to_int(a[0]), world = to_int(a[1]);
        std::string refusal;
        if (world != world_size)
          refusal = fmt::format("rank {} was started with a world of {} ranks, the store's is {}", rank, world, world_size);
        else if (rank < 0 || rank >= world_size)
          refusal = fmt::format("rank {} is not in a world of {} ranks", rank, world_size);
        else if (connected.count(static_cast<int>(rank)))
          refusal = fmt::format("another process already joined the store as rank {}: two processes claim rank {}", rank, rank);
        if (!refusal.empty()) return reply(c, kFailed, {refusal});
        c.rank = static_cast<int>(rank);
        connected[c.rank] = &c;
        dead.erase(c.rank);  // a rank that comes back is alive again
        left.erase(c.rank);
        return reply(c, kOk, {});
      }
      case kBye:
        c.said_bye = true;
        return;
      case kSet:
        data[a[0]] = std::move(a[1]);
        reply(c, kOk, {});
        return wake_waits();
      case kAdd: {
        int64_t value = 0;
        if (auto it = data.find(a[0]); it != data.end() && !parse_int(it->second, value))
          return reply(c, kFailed, {fmt::format("add() on key {}: it holds {} bytes that are not a counter",
                                                shown_key(a[0]), it->second.size())});
        if (__builtin_add_overflow(value, to_int(a[1]), &value))
          return reply(c, kFailed, {fmt::format("add() on key {} overflows a 64-bit counter", shown_key(a[0]))});
        data[a[0]] = std::to_string(value);
        reply(c, kOk, {std::to_string(value)});
        return wake_waits();
      }
      case kCheck:
        return reply(c, kOk, {all_set(a) ? "1" : "0"});
      case kGet:
      case kWait:
        c.wait_op = m.code;
        c.wait_timeout = bounded(milliseconds(to_int(a[0])));
        c.wait_deadline = Clock::now() + c.wait_timeout;
        c.wait_keys.assign(a.begin() + 1, a.end());
        c.parked = true;
        if (all_set(c.wait_keys)) answer(c);
        return;
      case kDeadRanks: {
        std::vector<std::string> ranks;
        for (int r : dead) ranks.push_back(std::to_string(r));
        return reply(c, kOk, ranks);
      }
    }
    fail("unknown store request {}", m.code);
  }

  void answer(Conn& c) {
    c.parked = false;
    if (c.wait_op == kGet) return reply(c, kOk, {data.at(c.wait_keys[0])});
    reply(c, kOk, {});
  }

  void wake_waits() {
    for (auto& c : conns)
      if (c->parked && all_set(c->wait_keys)) answer(*c);
  }

  void expire_waits() {
    auto now = Clock::now();
    for (auto& c : conns) {
      if (!c->parked || c->wait_deadline > now) continue;
      c->parked = false;
      reply(*c, kFailed, {timeout_message(*c)});
    }
  }

  std::string timeout_message(const Conn& c) const {
    std::vector<std::string> missing;
    for (const auto& k : c.wait_keys)
      if (!data.count(k)) missing.push_back(shown_key(k));
    std::string what = c.wait_keys.size() == 1
                           ? "key " + shown_key(c.wait_keys[0])
                           : fmt::format("keys {} ({} of the {} waited on)", fmt::join(missing, ", "), missing.size(), c.wait_keys.size());
    return fmt::format("waited {} for {}; {}", seconds(c.wait_timeout), what, fault_report());
  }

  // What the store knows of who is at fault: ranks that died, left, or never came.
  std::string fault_report() const {
    std::vector<int> died(dead.begin(), dead.end()), gone(left.begin(), left.end()), absent;
    for (int r = 0; r < world_size; ++r)
      if (!connected.count(r) && !dead.count(r) && !left.count(r)) absent.push_back(r);
    std::vector<std::string> parts;
    if (!died.empty())
      parts.push_back(fmt::format("{} died ({} to the store closed)", rank_list(died),
                                  died.size() == 1 ? "its connection" : "their connections"));
    if (!gone.empty()) parts.push_back(fmt::format("{} already left (closed the store cleanly)", rank_list(gone)));
    if (!absent.empty()) parts.push_back(fmt::format("{} never connected", rank_list(absent)));
    if (parts.empty()) parts.push_back("every rank is still connected, so a rank that should set it may be stuck");
    return fmt::format("{}", fmt::join(parts, "; "));
  }
};

TcpStore::TcpStore(Options options) : options_(std::move(options)) {
  options_.timeout = bounded(options_.timeout);
  KILN_CHECK(options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size,
             "TcpStore: rank {} is not in a world of {} ranks", options_.rank, options_.world_size);
  auto deadline = Clock::now() + options_.timeout;
  if (options_.is_server) {
    server_ = std::make_unique<Server>(options_);
    port_ = server_->port;
  } else {
    KILN_CHECK(options_.port > 0 && options_.port < 65536, "rank {}: the store's port {} is not a TCP port (MASTER_PORT)",
               options_.rank, options_.port);
    port_ = options_.port;
  }
  // The server may not be up yet (ranks start in any order): retry, backing off, until the timeout.
  std::string why = "no address";
  for (milliseconds pause{20};; pause = std::min(pause * 2, milliseconds(500))) {
    if (Fd s = try_connect(options_.host, port_, deadline, why); s.get() >= 0) {
      fd_ = s.release();
      break;
    }
    auto now = Clock::now();
    if (now >= deadline)
      fail("rank {} could not connect to the store at {}:{} within {} ({}); is rank 0 running, and do MASTER_ADDR and "
           "MASTER_PORT name its host and port?",
           rank(), options_.host, port_, seconds(options_.timeout), why);
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
  }
  try {
    request(kHello, {std::to_string(rank()), std::to_string(world_size())}, Clock::now() + options_.timeout, "HELLO");
  } catch (...) {
    if (fd_ >= 0) ::close(fd_);
    throw;
  }
}

TcpStore::~TcpStore() {
  {
    std::lock_guard lock(mutex_);
    if (fd_ >= 0) {
      // Best effort and brief: a store that is gone must not hold up an exit.
      std::string bye = frame(kBye, {});
      if (wait_ready(fd_, POLLOUT, Clock::now() + milliseconds(1000)))
        (void)!::send(fd_, bye.data(), bye.size(), MSG_NOSIGNAL);
      ::close(fd_);
      fd_ = -1;
    }
  }
  server_.reset();
}

void TcpStore::lose_connection(const std::string& why) {
  ::close(fd_);
  fd_ = -1;
  lost_ = why;
  throw Error(why);
}

std::vector<std::string> TcpStore::request(uint8_t op, const std::vector<std::string>& args,
                                           Clock::time_point deadline, const std::string& what) {
  std::lock_guard lock(mutex_);
  if (fd_ < 0) throw Error(lost_);
  auto unreachable = [&](const std::string& cause) {
    lose_connection(fmt::format("rank {}: the store at {}:{} served by rank 0 is unreachable ({} during {}); rank 0 may have died",
                                rank(), options_.host, port_, cause, what));
  };
  auto no_answer = [&] {
    lose_connection(fmt::format("rank {}: the store at {}:{} served by rank 0 did not answer {} in time; rank 0 may be stuck or "
                                "its machine unreachable",
                                rank(), options_.host, port_, what));
  };
  std::string out = frame(op, args);
  for (size_t sent = 0; sent < out.size();) {
    if (!wait_ready(fd_, POLLOUT, deadline)) no_answer();
    ssize_t n = ::send(fd_, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) sent += static_cast<size_t>(n);
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) unreachable(errno_text(errno));
  }
  std::string in;
  Message reply;
  char buffer[65536];
  for (;;) {
    try {
      if (take_frame(in, reply)) break;
    } catch (const Error& e) {
      unreachable(e.what());
    }
    if (!wait_ready(fd_, POLLIN, deadline)) no_answer();
    ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) in.append(buffer, static_cast<size_t>(n));
    else if (n == 0) unreachable("it closed the connection");
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) unreachable(errno_text(errno));
  }
  if (reply.code != kOk) fail("rank {}: {}", rank(), reply.args.empty() ? "the store refused " + what : reply.args[0]);
  return std::move(reply.args);
}

void TcpStore::set(const std::string& key, const std::vector<char>& value) {
  request(kSet, {key, std::string(value.begin(), value.end())}, Clock::now() + options_.timeout, "set(" + shown_key(key) + ")");
}

std::vector<char> TcpStore::get(const std::string& key) { return get(key, options_.timeout); }

std::vector<char> TcpStore::get(const std::string& key, milliseconds timeout) {
  timeout = bounded(timeout);
  auto reply = request(kGet, {std::to_string(timeout.count()), key}, Clock::now() + timeout + kReplyGrace,
                       "get(" + shown_key(key) + ")");
  KILN_INTERNAL_ASSERT(reply.size() == 1, "a GET reply carries the value");
  return std::vector<char>(reply[0].begin(), reply[0].end());
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  auto reply = request(kCheck, keys, Clock::now() + options_.timeout, "check()");
  KILN_INTERNAL_ASSERT(reply.size() == 1, "a CHECK reply carries one flag");
  return reply[0] == "1";
}

void TcpStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  timeout = bounded(timeout);
  std::vector<std::string> args{std::to_string(timeout.count())};
  args.insert(args.end(), keys.begin(), keys.end());
  request(kWait, args, Clock::now() + timeout + kReplyGrace, "wait()");
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  auto reply = request(kAdd, {key, std::to_string(delta)}, Clock::now() + options_.timeout, "add(" + shown_key(key) + ")");
  KILN_INTERNAL_ASSERT(reply.size() == 1, "an ADD reply carries the new value");
  return to_int(reply[0]);
}

std::vector<int> TcpStore::dead_ranks() {
  std::vector<int> ranks;
  for (const auto& r : request(kDeadRanks, {}, Clock::now() + options_.timeout, "dead_ranks()"))
    ranks.push_back(static_cast<int>(to_int(r)));
  return ranks;
}

}  // namespace kiln::runtime::dist
