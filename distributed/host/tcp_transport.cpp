// The TCP transport: ranks started without an MPI launcher meet at RUNE_MASTER_ADDR, as
// torch.distributed's MASTER_ADDR / MASTER_PORT. Rank 0 listens there; every other rank listens
// on a port of its own, connects to rank 0 and says who it is (rank, world size, port); rank 0
// answers with every rank's address, and each rank then connects to the ranks below it, so
// every pair of ranks shares one connection. A message is a frame (tag, bytes) then its bytes;
// on one connection frames arrive in the order sent, and every rank makes the same calls in the
// same order, so the receiver knows which frame comes next (a mismatch raises, it never
// misreads data).
//
// No wait is unbounded: every connect, accept, read and write polls against the deadline, and a
// peer that died closes its connections (read 0 / ECONNRESET), which raises at once. A listening
// rank reads the hellos of all the connections it accepted at once (HelloGate), so a stranger
// that connects and sends nothing, or half a hello, delays no rank: it is dropped with a warning
// after a few seconds, as is a hello without rune's magic.
//
// Rendezvous faults are named on every rank that joined: rank 0 answers each joining rank with a
// verdict (accepted, or the reason the world cannot start: a world size that differs from its
// own, a rank claimed twice, a rank missing at the timeout) before the address table, so a
// refused rank raises with rank 0's reason and both values instead of "connection closed".
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "distributed/host/transport.h"

namespace rune::distributed::detail {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kMagic = 0x52554e4554435031;  // "RUNETCP1"

struct Hello {
  int64_t magic, rank, size, port;
};
struct Address {
  uint32_t ip;  // network order
  uint16_t port;
  uint16_t pad;
};
// Rank 0's answer to a joining rank: ok, or the reason the world cannot start (NUL-terminated).
struct Verdict {
  int64_t magic, ok;
  char reason[496];
};
struct Frame {
  int64_t tag, bytes;
};

std::string errno_text() { return std::strerror(errno); }

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int ms_left(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 100));
}

// Reads or writes all n bytes on a nonblocking socket before the deadline: false on timeout;
// raises `what` + the reason when the peer closed or the socket failed.
bool move_all(int fd, void* buf, size_t n, bool write, Clock::time_point deadline,
              const std::string& what) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) throw distributed_error(what + ": the connection was closed");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      throw distributed_error(what + ": " + errno_text());
    if (Clock::now() >= deadline) return false;
    pollfd pfd{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    ::poll(&pfd, 1, ms_left(deadline));
  }
  return true;
}

// A listening socket on port (0: any) of every interface; raises naming the address.
int listen_on(const std::string& api, uint16_t port, const std::string& where) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw distributed_error(api + ": socket: " + errno_text());
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0) {
    const bool in_use = errno == EADDRINUSE;
    std::string e = errno_text();
    ::close(fd);
    throw distributed_error(api + ": cannot listen on " + where + ": " + e +
                            (in_use && port != 0
                                 ? " (is another process rank 0 at this address? RUNE_RANK must be "
                                   "unique; or the port is taken)"
                                 : ""));
  }
  set_nonblocking(fd);
  return fd;
}

uint16_t port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// How long an accepted connection has to send its whole hello: a rank sends it as soon as it has
// connected, so only a stranger (a port scanner, a health check, a process of another program)
// takes longer; it is then dropped and the rendezvous goes on.
constexpr double kHelloSeconds = 5;

std::string peer_text(uint32_t ip, uint16_t port) {
  char buf[INET_ADDRSTRLEN] = "?";
  in_addr a{ip};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(port);
}

// The connections accepted on a listening socket, their hellos read concurrently: a connection
// that sends nothing, half a hello or something else never holds up the ranks behind it. Each
// has kHelloSeconds (at most the whole timeout) from its accept to send a hello with rune's magic;
// one that does not, or that closes first, is dropped with a warning on stderr.
class HelloGate {
 public:
  struct Arrival {
    int fd;
    uint32_t ip;  // network order
    Hello hello;
  };

  // `me`: "rune::distributed::init: rank 0", for warnings.
  HelloGate(std::string me, int listener, double timeout)
      : me_(std::move(me)),
        listener_(listener),
        wait_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(std::min(kHelloSeconds, timeout)))) {}
  ~HelloGate() {
    for (auto& c : pending_) ::close(c.fd);
  }
  HelloGate(const HelloGate&) = delete;
  HelloGate& operator=(const HelloGate&) = delete;

  // The next connection that sent a whole hello with rune's magic, or nullopt at the deadline.
  // The caller owns the returned socket.
  std::optional<Arrival> next(Clock::time_point deadline) {
    for (;;) {
      accept_all();
      for (size_t i = 0; i < pending_.size();) {
        Pending& c = pending_[i];
        if (auto done = read_hello(c)) {
          if (*done) {
            Arrival a{c.fd, c.ip, c.hello};
            pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
            return a;
          }
          drop(i);
          continue;
        }
        if (Clock::now() >= c.until) {
          warn(c, "sent " + std::to_string(c.got) + " of the " + std::to_string(sizeof(Hello)) +
                      " bytes of a rank's hello in " + format_seconds(seconds(wait_)) + " s");
          drop(i);
          continue;
        }
        ++i;
      }
      const auto now = Clock::now();
      if (now >= deadline) return std::nullopt;
      // Wait for a new connection or bytes on a pending one, no longer than the next expiry.
      auto until = deadline;
      std::vector<pollfd> pfds{{listener_, POLLIN, 0}};
      for (const auto& c : pending_) {
        pfds.push_back({c.fd, POLLIN, 0});
        until = std::min(until, c.until);
      }
      ::poll(pfds.data(), pfds.size(), ms_left(until));
    }
  }

 private:
  struct Pending {
    int fd;
    uint32_t ip;
    uint16_t port;
    Clock::time_point until;
    Hello hello{};
    size_t got = 0;  // bytes of `hello` read
  };

  static double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  void accept_all() {
    for (;;) {
      sockaddr_in a{};
      socklen_t len = sizeof a;
      int fd = ::accept(listener_, reinterpret_cast<sockaddr*>(&a), &len);
      if (fd < 0) return;  // EAGAIN: none waiting (other errors: the next poll tries again)
      set_nonblocking(fd);
      pending_.push_back({fd, a.sin_addr.s_addr, ntohs(a.sin_port), Clock::now() + wait_});
    }
  }

  // Reads what has arrived of c's hello: true when it is whole and rune's, false when the
  // connection is to be dropped (closed, failed, not rune's; warned), nullopt while incomplete.
  std::optional<bool> read_hello(Pending& c) {
    while (c.got < sizeof(Hello)) {
      ssize_t k = ::recv(c.fd, reinterpret_cast<char*>(&c.hello) + c.got, sizeof(Hello) - c.got, 0);
      if (k > 0) {
        c.got += static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return std::nullopt;
      warn(c, k == 0 ? "closed after " + std::to_string(c.got) + " bytes, before a whole hello"
                     : "failed before a whole hello: " + errno_text());
      return false;
    }
    if (c.hello.magic != kMagic) {
      warn(c, "sent a hello without rune's magic (not a rune rank)");
      return false;
    }
    return true;
  }

  void drop(size_t i) {
    ::close(pending_[i].fd);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  void warn(const Pending& c, const std::string& what) const {
    std::fprintf(stderr, "%s: ignored a connection from %s that %s\n", me_.c_str(),
                 peer_text(c.ip, c.port).c_str(), what.c_str());
  }

  std::string me_;
  int listener_;
  Clock::duration wait_;
  std::vector<Pending> pending_;
};

// Connects to ip:port, retrying while nobody listens yet, until the deadline (-1 on timeout).
int connect_to(uint32_t ip, uint16_t port, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = ip;
    a.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      set_nonblocking(fd);
      return fd;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(std::vector<int> peers) : fd_(std::move(peers)) {}
  ~TcpTransport() override { finalize(); }
  const char* name() const override { return "TCP"; }
  void finalize() override {
    for (int& fd : fd_) close_fd(fd);
  }
  void cancel() override { cancelled_ = true; }

  void exchange(const char* api, int rank, int tag, const std::vector<Message>& sends,
                const std::vector<Message>& recvs, double timeout) override {
    // One stream per message: a frame header, then the payload.
    struct Stream {
      const Message* m;
      Frame frame;
      size_t done = 0;  // bytes of frame + payload moved
      bool finished() const { return done == sizeof(Frame) + m->bytes; }
    };
    std::vector<Stream> out, in;
    for (const auto& m : sends) out.push_back({&m, {tag, static_cast<int64_t>(m.bytes)}});
    for (const auto& m : recvs) in.push_back({&m, {}});
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout));
    auto who = [&](int peer) {
      return std::string(api) + ": rank " + std::to_string(rank) + ": the connection to rank " +
             std::to_string(peer);
    };
    for (;;) {
      if (cancelled_)  // checked at least every 100 ms (the poll's longest wait)
        throw distributed_error(std::string(api) + ": rank " + std::to_string(rank) +
                                ": the communicator was finalized with this collective in flight");
      std::vector<pollfd> pfds;
      std::vector<Stream*> of;
      std::vector<bool> writing;
      for (auto* list : {&out, &in})
        for (auto& s : *list) {
          if (s.finished()) continue;
          int fd = s.m->peer >= 0 && s.m->peer < static_cast<int>(fd_.size()) ? fd_[s.m->peer] : -1;
          if (fd < 0)
            throw distributed_error(std::string(api) + ": rank " + std::to_string(rank) +
                                    ": no connection to rank " + std::to_string(s.m->peer) +
                                    " (finalized?)");
          pfds.push_back({fd, static_cast<short>(list == &out ? POLLOUT : POLLIN), 0});
          of.push_back(&s);
          writing.push_back(list == &out);
        }
      if (pfds.empty()) return;
      auto now = Clock::now();
      if (now >= deadline) {
        std::set<int> waiting;
        for (Stream* s : of) waiting.insert(s->m->peer);
        std::string list;
        for (int p : waiting) list += (list.empty() ? " " : ", ") + std::to_string(p);
        throw distributed_error(std::string(api) + ": rank " + std::to_string(rank) +
                                " timed out after " + format_seconds(timeout) +
                                " s waiting for rank" + list +
                                " (a rank that died, never joined or never made this call; "
                                "RUNE_DISTRIBUTED_TIMEOUT sets the limit)");
      }
      ::poll(pfds.data(), pfds.size(), ms_left(deadline));
      for (size_t i = 0; i < pfds.size(); ++i) {
        if (!pfds[i].revents) continue;
        Stream& s = *of[i];
        const int fd = pfds[i].fd;
        // Move what the socket takes now (nonblocking), the frame first.
        while (!s.finished()) {
          char* base;
          size_t at, len;
          if (s.done < sizeof(Frame)) {
            base = reinterpret_cast<char*>(&s.frame);
            at = s.done;
            len = sizeof(Frame) - s.done;
          } else {
            base = static_cast<char*>(s.m->data);
            at = s.done - sizeof(Frame);
            len = s.m->bytes - at;
          }
          ssize_t k =
              writing[i] ? ::send(fd, base + at, len, MSG_NOSIGNAL) : ::recv(fd, base + at, len, 0);
          if (k == 0 && !writing[i])
            throw distributed_error(who(s.m->peer) + " was closed (the rank died or finalized)");
          if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
            throw distributed_error(who(s.m->peer) + " failed: " + errno_text() +
                                    " (the rank died?)");
          }
          s.done += static_cast<size_t>(k);
          if (!writing[i] && s.done == sizeof(Frame) &&
              (s.frame.tag != tag || s.frame.bytes != static_cast<int64_t>(s.m->bytes)))
            throw distributed_error(std::string(api) + ": rank " + std::to_string(rank) + " got " +
                                    std::to_string(s.frame.bytes) + " bytes (tag " +
                                    std::to_string(s.frame.tag) + ") from rank " +
                                    std::to_string(s.m->peer) + " where it expected " +
                                    std::to_string(s.m->bytes) + " (tag " + std::to_string(tag) +
                                    "): the ranks' calls are out of step");
        }
      }
    }
  }

 private:
  std::vector<int> fd_;  // per rank: the connection to it (-1: none, or this rank)
  std::atomic<bool> cancelled_{false};
};

}  // namespace

std::unique_ptr<Transport> tcp_world(const char* api_c, int rank, int size,
                                     const std::string& master, double timeout) {
  const std::string api = api_c;
  const size_t colon = master.rfind(':');
  char* end = nullptr;
  long port = colon == std::string::npos ? -1 : std::strtol(master.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || !end || *end || port <= 0 || port > 65535)
    throw distributed_error(api + ": RUNE_MASTER_ADDR='" + master +
                            "' is not host:port (e.g. 127.0.0.1:29500)");
  const std::string host = master.substr(0, colon);
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found)
    throw distributed_error(api + ": RUNE_MASTER_ADDR='" + master + "': unknown host '" + host +
                            "'");
  const uint32_t master_ip = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr.s_addr;
  ::freeaddrinfo(found);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout));
  const std::string waited = format_seconds(timeout) + " s";
  std::vector<int> fd(static_cast<size_t>(size), -1);
  auto fail = [&](const std::string& what) {
    for (int& f : fd) close_fd(f);
    throw distributed_error(what);
  };
  try {
    if (rank == 0) {
      int listener = listen_on(api, static_cast<uint16_t>(port), master);
      std::vector<Address> table(static_cast<size_t>(size));
      table[0] = {master_ip, static_cast<uint16_t>(port), 0};
      // The world cannot start: every rank that joined (and `extra`, the connection refused;
      // -1 for a timeout) gets the reason before rank 0 raises it, so each names the same values.
      auto refuse = [&](const std::string& why, int extra) {
        Verdict v{kMagic, 0, {}};
        std::snprintf(v.reason, sizeof v.reason, "%s", why.c_str());
        const auto soon = Clock::now() + std::chrono::seconds(1);
        for (int q = 0; q <= size; ++q) {
          const int c = q < size ? fd[q] : extra;
          if (c < 0) continue;
          try {  // best effort: a joiner that died has nobody to tell
            move_all(c, &v, sizeof v, true, soon, api);
          } catch (const distributed_error&) {
          }
        }
        if (extra >= 0) ::close(extra);
        ::close(listener);
        fail(api + ": rank 0 " + (extra < 0 ? why : "refused the rendezvous: " + why));
      };
      HelloGate gate(api + ": rank 0", listener, timeout);
      for (int joined = 1; joined < size;) {
        auto arrival = gate.next(deadline);
        if (!arrival) {
          std::string missing;
          for (int q = 1; q < size; ++q)
            if (fd[q] < 0) missing += (missing.empty() ? " " : ", ") + std::to_string(q);
          refuse("timed out after " + waited + " waiting for rank" + missing + " to join at " +
                     master +
                     " (RUNE_MASTER_ADDR; a rank that never started or died; "
                     "RUNE_DISTRIBUTED_TIMEOUT sets the limit)",
                 -1);
        }
        const int c = arrival->fd;
        const uint32_t ip = arrival->ip;
        const Hello h = arrival->hello;
        if (h.size != size)
          refuse("rank " + std::to_string(h.rank) +
                     " has RUNE_WORLD_SIZE=" + std::to_string(h.size) +
                     " but rank 0 has RUNE_WORLD_SIZE=" + std::to_string(size),
                 c);
        if (h.rank > 0 && h.rank < size && fd[h.rank] >= 0)
          refuse("two processes joined as rank " + std::to_string(h.rank) +
                     " (RUNE_RANK must be unique, in [0, " + std::to_string(size) + "))",
                 c);
        if (h.rank <= 0 || h.rank >= size)
          refuse("a process joined as rank " + std::to_string(h.rank) +
                     " (RUNE_RANK must be unique, in [0, " + std::to_string(size) +
                     "), and only rank 0 listens at RUNE_MASTER_ADDR)",
                 c);
        fd[h.rank] = c;
        table[h.rank] = {ip, static_cast<uint16_t>(h.port), 0};
        ++joined;
      }
      ::close(listener);
      Verdict ok{kMagic, 1, {}};
      for (int q = 1; q < size; ++q)
        if (!move_all(fd[q], &ok, sizeof ok, true, deadline,
                      api + ": rank 0 -> rank " + std::to_string(q)) ||
            !move_all(fd[q], table.data(), table.size() * sizeof(Address), true, deadline,
                      api + ": rank 0 -> rank " + std::to_string(q)))
          fail(api + ": rank 0 timed out after " + waited + " sending the addresses");
    } else {
      int listener = listen_on(api, 0, "a port of rank " + std::to_string(rank));
      fd[0] = connect_to(master_ip, static_cast<uint16_t>(port), deadline);
      if (fd[0] < 0) {
        ::close(listener);
        fail(api + ": rank " + std::to_string(rank) + " timed out after " + waited +
             " connecting to rank 0 at " + master +
             " (RUNE_MASTER_ADDR; RUNE_DISTRIBUTED_TIMEOUT sets the limit)");
      }
      Hello h{kMagic, rank, size, port_of(listener)};
      Verdict verdict{};
      const std::string me = api + ": rank " + std::to_string(rank);
      if (!move_all(fd[0], &h, sizeof h, true, deadline, me) ||
          !move_all(fd[0], &verdict, sizeof verdict, false, deadline,
                    me + " waiting for rank 0's answer")) {
        ::close(listener);
        fail(me + " timed out after " + waited + " waiting for every rank to join at " + master);
      }
      if (verdict.magic != kMagic || !verdict.ok) {
        ::close(listener);
        verdict.reason[sizeof verdict.reason - 1] = 0;
        fail(me + " (RUNE_WORLD_SIZE=" + std::to_string(size) + "): rank 0 at " + master +
             " refused the rendezvous: " +
             (verdict.magic == kMagic ? std::string(verdict.reason) : "not a rune rank 0"));
      }
      std::vector<Address> table(static_cast<size_t>(size));
      if (!move_all(fd[0], table.data(), table.size() * sizeof(Address), false, deadline,
                    me + " waiting for rank 0's addresses")) {
        ::close(listener);
        fail(me + " timed out after " + waited + " waiting for rank 0's addresses");
      }
      for (int q = 1; q < rank; ++q) {  // the ranks below connect first, above accept
        fd[q] = connect_to(table[q].ip, table[q].port, deadline);
        Hello me{kMagic, rank, size, 0};
        if (fd[q] < 0 || !move_all(fd[q], &me, sizeof me, true, deadline, api)) {
          ::close(listener);
          fail(api + ": rank " + std::to_string(rank) + " timed out after " + waited +
               " connecting to rank " + std::to_string(q));
        }
      }
      HelloGate gate(me, listener, timeout);
      for (int joined = rank + 1; joined < size; ++joined) {
        auto arrival = gate.next(deadline);
        const Hello from = arrival ? arrival->hello : Hello{};
        if (!arrival || from.rank <= rank || from.rank >= size || fd[from.rank] >= 0) {
          if (arrival) ::close(arrival->fd);
          ::close(listener);
          fail(api + ": rank " + std::to_string(rank) + " timed out after " + waited +
               " waiting for the ranks above it to connect");
        }
        fd[from.rank] = arrival->fd;
      }
      ::close(listener);
    }
  } catch (const distributed_error&) {
    for (int& f : fd) close_fd(f);
    throw;
  }
  return std::make_unique<TcpTransport>(std::move(fd));
}

}  // namespace rune::distributed::detail
