// The rendezvous of a run on several nodes, on c10d's TCPStore (torchrun's c10d backend in
// spirit): the launcher of the node that owns the master address hosts the store; every
// launcher joins each round there, beats once a second while its ranks run, and learns there
// that every node must stop them.
#pragma once

#include <memory>

#include "lib/distributed/launcher.h"

namespace trainer::dist {

// The rendezvous for `options` (nnodes > 1, or elastic). Static runs (min_nnodes 0 or equal to
// nnodes): node ranks as given, node 0 hosts the store, every round waits for all nodes. Elastic
// runs: the node whose address is master_addr hosts it (the first to bind it); a round closes
// when nnodes have joined, or min_nnodes have and rdzv_last_call_seconds passed; node ranks
// follow the order of joining. Throws std::runtime_error (one line) when the store cannot be
// hosted or reached within rdzv_timeout_seconds.
std::unique_ptr<NodeRendezvous> make_tcp_rendezvous(const LaunchOptions& options);

// Seconds without a heartbeat after which a node counts as lost.
inline constexpr double kNodeLostSeconds = 6.0;

}  // namespace trainer::dist
