// The launcher's sockets (torch-free): whether a port is taken on this machine, whether node 0's
// store answers, and whether a host name resolves.
#pragma once

#include <string>

namespace trainer::dist {

// True when something already listens on (or holds) `port` on this machine.
bool port_is_busy(int port);

// Waits until a TCP connection to host:port succeeds (true), or `seconds` pass (false).
bool reachable(const std::string& host, int port, double seconds);

// Whether `host` is a known host name or address.
bool resolves(const std::string& host);

}  // namespace trainer::dist
