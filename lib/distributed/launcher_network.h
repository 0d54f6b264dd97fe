// The launcher's sockets (torch-free): whether a port is taken on this machine, whether node 0's
// store answers, whether a host name resolves, and which of this machine's addresses reaches it.
#pragma once

#include <string>

namespace trainer::dist {

// True when something already listens on (or holds) `port` on this machine.
bool port_is_busy(int port);

// Waits until a TCP connection to host:port succeeds (true), or `seconds` pass (false).
bool reachable(const std::string& host, int port, double seconds);

// Whether `host` is a known host name or address.
bool resolves(const std::string& host);

// This machine's address on the interface that reaches `host` (the source address the kernel
// would choose for it: a UDP socket connected there, nothing sent). Empty when `host` does not
// resolve or no route reaches it.
std::string local_address_towards(const std::string& host, int port);

// Whether `host` resolves only to loopback addresses (127.0.0.0/8, ::1), or is "localhost".
bool is_loopback(const std::string& host);

// Whether `host` is an address of this machine (a socket can be bound to it).
bool is_local_address(const std::string& host);

}  // namespace trainer::dist
