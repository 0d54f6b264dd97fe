// The launcher's sockets, with POSIX calls.
#include "lib/distributed/launcher_network.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/distributed/launcher.h"

namespace trainer::dist {

using Clock = std::chrono::steady_clock;

bool port_is_busy(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool busy =
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno == EADDRINUSE;
  ::close(fd);
  return busy;
}

bool reachable(const std::string& host, int port, double seconds) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) == 0) {
      for (addrinfo* a = found; a; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        ::close(fd);
        if (ok) {
          ::freeaddrinfo(found);
          return true;
        }
      }
      ::freeaddrinfo(found);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (Clock::now() < deadline);
  return false;
}

bool resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  ::freeaddrinfo(found);
  return true;
}

namespace {

// The addresses `host` resolves to (TCP), or none.
template <typename F>
bool for_each_address(const std::string& host, int port, F&& f) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool any = false;
  for (addrinfo* a = found; a; a = a->ai_next) {
    any = true;
    if (f(*a)) break;
  }
  ::freeaddrinfo(found);
  return any;
}

std::string address_text(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (address->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
                sizeof text);
  } else if (address->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text,
                sizeof text);
  }
  return text;
}

}  // namespace

std::string local_address_towards(const std::string& host, int port) {
  std::string local;
  for_each_address(host, port, [&](const addrinfo& a) {
    int fd = ::socket(a.ai_family, SOCK_DGRAM, 0);
    if (fd < 0) return false;
    sockaddr_storage mine{};
    socklen_t length = sizeof mine;
    if (::connect(fd, a.ai_addr, a.ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &length) == 0) {
      local = address_text(reinterpret_cast<sockaddr*>(&mine));
    }
    ::close(fd);
    return !local.empty();
  });
  return local;
}

bool is_loopback(const std::string& host) {
  if (host == "localhost") return true;
  bool all = true;
  const bool any = for_each_address(host, 0, [&](const addrinfo& a) {
    if (a.ai_family == AF_INET) {
      auto ip = ntohl(reinterpret_cast<const sockaddr_in*>(a.ai_addr)->sin_addr.s_addr);
      all = all && (ip >> 24) == 127;
    } else if (a.ai_family == AF_INET6) {
      all =
          all && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a.ai_addr)->sin6_addr);
    } else {
      all = false;
    }
    return false;
  });
  return any && all;
}

bool is_local_address(const std::string& host) {
  bool local = false;
  for_each_address(host, 0, [&](const addrinfo& a) {
    int fd = ::socket(a.ai_family, SOCK_STREAM, 0);
    if (fd < 0) return false;
    local = ::bind(fd, a.ai_addr, a.ai_addrlen) == 0 || errno == EADDRINUSE;
    ::close(fd);
    return local;
  });
  return local;
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(fmt::format("socket failed: {}", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    int error = errno;
    ::close(fd);
    throw std::runtime_error(fmt::format("no free port: {}", std::strerror(error)));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace trainer::dist
