// The launchers' rendezvous on a c10d TCPStore. Keys: "round" (the round now forming or running),
// "round<k>/count" and "round<k>/node<i>" (who joined, in order), "round<k>/final" (how many take
// part, set once), "round<k>/master" (the ranks' store, chosen by the round's node 0),
// "round<k>/restart" (why every node must stop its ranks, set once), "round<k>/done<i>", and
// "beat/<node>" (a counter each launcher adds to once a second).
#include "lib/distributed/rendezvous.h"

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <unistd.h>

#include "lib/base/errors.h"
#include "lib/distributed/c10d.h"
#include "lib/distributed/launcher_network.h"
#include "lib/runtime/error_text.h"
#include "lib/runtime/signals.h"
#include "lib/runtime/torch_logs.h"

namespace trainer::dist {
namespace {

using Clock = std::chrono::steady_clock;
using Seconds = std::chrono::duration<double>;

// now + `seconds`, on the steady clock.
Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(Seconds(seconds));
}

// How long one store operation may wait (a node whose link went down answers nothing).
constexpr std::chrono::milliseconds kStoreTimeout{10000};

using Store = c10::intrusive_ptr<c10d::TCPStore>;

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }
std::string text_of(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

class TcpRendezvous : public NodeRendezvous {
 public:
  explicit TcpRendezvous(const LaunchOptions& o) : o_(o), elastic_(is_elastic(o)) {
    address_ = local_address_towards(o.master_addr, o.master_port);
    if (address_.empty()) address_ = o.master_addr;
    id_ = fmt::format("{}#{}", address_, ::getpid());
    host_ = elastic_ ? is_local_address(o.master_addr) : o.node_rank == 0;
    connect();
    if (host_) compare_set("round", "", "0");
  }
  // Leaves the round whatever ended the run (see leave()).
  ~TcpRendezvous() override { leave(); }

  Round join(const std::function<int()>& interrupted) override {
    interrupted_ = interrupted;
    // The round just ended gives way to the next (whichever node gets here first moves it on).
    if (round_ >= 0) compare_set("round", std::to_string(round_), std::to_string(round_ + 1));
    Clock::time_point deadline = after(o_.rdzv_timeout_seconds);
    while (true) {
      const int k = std::stoi(get("round"));
      const std::string pre = fmt::format("round{}/", k);
      int position = o_.node_rank;
      int nodes = o_.nnodes;
      if (elastic_) {
        if (check(pre + "final")) {
          // The round runs without this node: every node stops for the next, which takes it in
          // (unless the round is full already: this node then stands by for a later one).
          if (std::stoi(get(pre + "final")) < o_.nnodes) ask_restart(pre, join_request(address_));
          wait_for_round_after(k, deadline);
          continue;
        }
        position = static_cast<int>(add(pre + "count", 1)) - 1;
        set(pre + fmt::format("node{}", position), id_);
        nodes = close_round(pre, deadline);
        if (position >= nodes) {
          if (nodes < o_.nnodes) ask_restart(pre, join_request(address_));
          deadline = after(o_.rdzv_timeout_seconds);
          wait_for_round_after(k, deadline);
          continue;
        }
      } else {
        if (check(pre + "final")) {
          // The round formed without this node (its launcher started again while the others
          // run): they stop for the next round.
          ask_restart(pre, join_request(address_));
          wait_for_round_after(k, deadline);
          continue;
        }
        set(pre + fmt::format("node{}", position), id_);
        for (int i = 0; i < nodes; ++i) {
          const std::string key = pre + fmt::format("node{}", i);
          while (!check(key)) {
            if (Clock::now() >= deadline) {
              throw std::runtime_error(fmt::format(
                  "{}: node {} did not join round {} of the rendezvous at {}:{} within {} s",
                  o_.name, i, k, o_.master_addr, o_.master_port, o_.rdzv_timeout_seconds));
            }
            wait_a_little();
          }
        }
      }
      Round round;
      round.number = k;
      round.node_rank = position;
      round.nnodes = nodes;
      members_.clear();
      for (int i = 0; i < nodes; ++i) {
        std::string id = get(pre + fmt::format("node{}", i));
        members_.push_back(id);
        round.addresses.push_back(id.substr(0, id.rfind('#')));
      }
      if (!elastic_ && position == 0) compare_set(pre + "final", "", std::to_string(nodes));
      if (position == 0) {
        const std::string master = fmt::format("{}:{}", address_, free_port());
        set(pre + "master", master);
      }
      const std::string master = get(pre + "master");
      round.master_addr = master.substr(0, master.rfind(':'));
      round.master_port = std::stoi(master.substr(master.rfind(':') + 1));
      round_ = k;
      prefix_ = pre;
      position_ = position;
      seen_.clear();
      return round;
    }
  }

  std::string poll() override {
    if (Clock::now() < next_poll_) return "";
    next_poll_ = Clock::now() + std::chrono::seconds(1);
    try {
      beat();
      if (check(prefix_ + "abort")) {
        given_up_ = true;
        return get(prefix_ + "abort");
      }
      if (check(prefix_ + "restart")) return get(prefix_ + "restart");
      if (std::string lost = lost_nodes(); !lost.empty()) {
        ask_restart(prefix_, lost);
        return get(prefix_ + "restart");
      }
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  Stop report_failure(const std::string& what) override {
    Stop stop;
    try {
      ask_restart(prefix_, fmt::format("node {} ({}): {}", position_, address_, what));
      stop.reason = get(prefix_ + "restart");
      stop.final = given_up_ = check(prefix_ + "abort");
      // Which nodes are gone: those whose heartbeat does not move for kNodeLostSeconds (a live
      // launcher beats once a second, also while it stops its ranks). Done as soon as every
      // other node has beaten since now.
      std::map<std::string, int64_t> before;
      for (size_t i = 0; i < members_.size(); ++i) {
        if (static_cast<int>(i) != position_) before[members_[i]] = add("beat/" + members_[i], 0);
      }
      const Clock::time_point until = after(kNodeLostSeconds + 0.5);
      while (Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        beat();
        bool all_beat = true;
        for (const auto& [id, value] : before) all_beat = all_beat && add("beat/" + id, 0) != value;
        if (all_beat) return stop;
        if (std::string lost = lost_nodes(); !lost.empty()) {
          stop.lost = lost;
          return stop;
        }
      }
      stop.lost = lost_nodes();
    } catch (const std::exception& e) {
      stop.lost = e.what();
    }
    return stop;
  }

  void give_up(const std::string& why) override {
    given_up_ = true;
    try {
      compare_set(prefix_ + "abort", "", why);
      ask_restart(prefix_, why);
    } catch (const std::exception&) {
      // The rendezvous is gone already: nobody waits.
    }
  }

  bool given_up() const override { return given_up_; }

  void finished() override { leave(); }

 private:
  // This node is done with the run, whether its ranks ended well, it gave up, or it was
  // interrupted: it says so (done<i>), and the host keeps the store up, beating, until every
  // other node of the round has left too or fell silent for kNodeLostSeconds. A node that is
  // still telling the others of its failure (report_failure) then gets its answer, instead of
  // finding the rendezvous gone because the host learned of that failure first. Once.
  void leave() {
    if (left_ || !store_ || members_.empty()) return;
    left_ = true;
    try {
      set(prefix_ + fmt::format("done{}", position_), "1");
      if (!host_) return;
      while (true) {
        bool waiting = false;
        for (size_t i = 0; i < members_.size(); ++i) {
          if (static_cast<int>(i) == position_ || check(prefix_ + fmt::format("done{}", i)))
            continue;
          waiting = waiting || silent_seconds(members_[i]) < kNodeLostSeconds;
        }
        if (!waiting) return;
        beat();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    } catch (const std::exception&) {
      // The run is over; a node that left early is no error.
    }
  }

  // The store: hosted here (the server), or reached at master_addr:master_port.
  // c10d's TCPStore, made on a thread of its own and waited for at most the rendezvous timeout
  // and a little: a port that accepts the connection but never answers (another program holds
  // it) would hold c10d's client in recv() for ever. Throws std::runtime_error with the cause.
  Store make_store(const c10d::TCPStoreOptions& options) {
    auto promise = std::make_shared<std::promise<Store>>();
    std::future<Store> future = promise->get_future();
    std::thread([promise, options, addr = o_.master_addr]() {
      try {
        promise->set_value(c10::make_intrusive<c10d::TCPStore>(addr, options));
      } catch (const c10::Error& e) {
        std::string cause = runtime::error_line(e);
        // c10d's check of its own protocol: something else answers on that port.
        if (cause.find("Ping failed") != std::string::npos) {
          cause =
              "something answers on that port, but not a rendezvous (another program holds "
              "it?)";
        }
        promise->set_exception(std::make_exception_ptr(std::runtime_error(cause)));
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    }).detach();
    const auto limit = std::chrono::duration<double>(std::max(1.0, o_.rdzv_timeout_seconds) + 2);
    if (future.wait_for(limit) != std::future_status::ready) {
      throw std::runtime_error(
          "it accepted the connection but never answered (another program holds that port?)");
    }
    return future.get();
  }

  void connect() {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(o_.master_port);
    options.waitWorkers = false;
    options.timeout = std::chrono::milliseconds(
        static_cast<int64_t>(std::max(1.0, o_.rdzv_timeout_seconds) * 1000));
    // c10d's log line for every failed connection attempt (with a backtrace) is silent
    // (make_tcp_rendezvous routes LibTorch's text): the one error line below says it.
    std::string cause;
    for (int tries = 0; tries < 2 && !store_; ++tries) {
      options.isServer = host_;
      try {
        store_ = make_store(options);
      } catch (const std::runtime_error& e) {
        cause = e.what();
        // Several elastic nodes on one machine: the first to bind hosts, the others join it.
        if (host_ && elastic_ && cause.find("EADDRINUSE") != std::string::npos) {
          host_ = false;
          continue;
        }
        break;
      }
    }
    if (!store_) {
      throw std::runtime_error(fmt::format("{}: {} the rendezvous at {}:{} within {} s: {}",
                                           o_.name, host_ ? "could not host" : "could not reach",
                                           o_.master_addr, o_.master_port, o_.rdzv_timeout_seconds,
                                           cause));
    }
    store_->setTimeout(kStoreTimeout);
  }

  // The store's operations. Each runs on a thread of its own and is waited for at most
  // kStoreTimeout (a node whose link went down answers nothing, and c10d's client would wait on
  // its socket for ever): past it, or on an error, the store counts as lost for good (a thread
  // still waiting keeps its own reference to the store) and every call throws one line.
  template <typename F>
  auto call(F&& operation) -> decltype(operation(std::declval<const Store&>())) {
    using Result = decltype(operation(std::declval<const Store&>()));
    if (!lost_.empty()) throw std::runtime_error(lost_);
    auto promise = std::make_shared<std::promise<Result>>();
    std::future<Result> future = promise->get_future();
    std::thread([promise, store = store_, operation = std::forward<F>(operation)]() mutable {
      try {
        if constexpr (std::is_void_v<Result>) {
          operation(store);
          promise->set_value();
        } else {
          promise->set_value(operation(store));
        }
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    }).detach();
    if (future.wait_for(kStoreTimeout) != std::future_status::ready) {
      lost_ = fmt::format("the rendezvous at {}:{} was lost: no answer within {} s", o_.master_addr,
                          o_.master_port, kStoreTimeout.count() / 1000);
      throw std::runtime_error(lost_);
    }
    try {
      return future.get();
    } catch (const std::exception& e) {
      std::string cause = e.what();
      if (auto* error = dynamic_cast<const c10::Error*>(&e)) cause = runtime::error_line(*error);
      lost_ = fmt::format("the rendezvous at {}:{} was lost (its node is gone?): {}",
                          o_.master_addr, o_.master_port, cause.substr(0, cause.find('\n')));
      throw std::runtime_error(lost_);
    }
  }
  std::string get(const std::string& key) {
    return call([key](const Store& store) { return text_of(store->get(key)); });
  }
  void set(const std::string& key, const std::string& value) {
    call([key, value](const Store& store) { store->set(key, bytes_of(value)); });
  }
  int64_t add(const std::string& key, int64_t delta) {
    return call([key, delta](const Store& store) { return store->add(key, delta); });
  }
  bool check(const std::string& key) {
    return call([key](const Store& store) { return store->check({key}); });
  }
  void compare_set(const std::string& key, const std::string& expected,
                   const std::string& desired) {
    call([key, expected, desired](const Store& store) {
      store->compareSet(key, bytes_of(expected), bytes_of(desired));
    });
  }

  // Adds to this node's heartbeat, at most once a second.
  void beat() {
    if (Clock::now() < next_beat_) return;
    next_beat_ = Clock::now() + std::chrono::seconds(1);
    add("beat/" + id_, 1);
  }

  // Seconds since node `id`'s heartbeat last moved, as this launcher has watched it.
  double silent_seconds(const std::string& id) {
    const auto now = Clock::now();
    const int64_t value = add("beat/" + id, 0);
    auto [it, fresh] = seen_.try_emplace(id, Seen{value, now});
    if (!fresh && value != it->second.value) it->second = Seen{value, now};
    return Seconds(now - it->second.changed).count();
  }

  // The members of the round whose heartbeat has not moved for kNodeLostSeconds ("" when none).
  std::string lost_nodes() {
    std::vector<std::string> lost;
    for (size_t i = 0; i < members_.size(); ++i) {
      // A node whose ranks all ended well stops beating when its launcher exits.
      if (static_cast<int>(i) == position_ || check(prefix_ + fmt::format("done{}", i))) continue;
      const double silent = silent_seconds(members_[i]);
      if (silent >= kNodeLostSeconds) {
        const std::string& id = members_[i];
        lost.push_back(fmt::format("node {} ({}) was lost: no heartbeat for {:.0f} s", i,
                                   id.substr(0, id.rfind('#')), std::max(silent, 0.0)));
      }
    }
    std::string text;
    for (const auto& line : lost) text += (text.empty() ? "" : "; ") + line;
    return text;
  }

  void ask_restart(const std::string& pre, const std::string& why) {
    compare_set(pre + "restart", "", why);
  }

  // The round closes: with every node, or with at least min_nnodes once the last call passed.
  // Returns how many nodes take part.
  int close_round(const std::string& pre, Clock::time_point deadline) {
    std::optional<Clock::time_point> enough_since;
    while (true) {
      if (check(pre + "final")) return std::stoi(get(pre + "final"));
      beat();
      const int64_t joined = add(pre + "count", 0);
      if (joined >= o_.nnodes) {
        compare_set(pre + "final", "", std::to_string(o_.nnodes));
        continue;
      }
      if (joined >= o_.min_nnodes) {
        if (!enough_since) enough_since = Clock::now();
        if (Seconds(Clock::now() - *enough_since).count() >= o_.rdzv_last_call_seconds) {
          compare_set(pre + "final", "", std::to_string(joined));
          continue;
        }
      }
      if (Clock::now() >= deadline) {
        throw std::runtime_error(fmt::format(
            "{}: only {} of at least {} nodes joined the rendezvous at {}:{} within {} s", o_.name,
            joined, o_.min_nnodes, o_.master_addr, o_.master_port, o_.rdzv_timeout_seconds));
      }
      wait_a_little(/*beat_now=*/false);
    }
  }

  // One pause of a wait for the other nodes (a beat first, unless the caller just beat): 100 ms,
  // or less when SIGINT or SIGTERM came, which ends the wait (Interrupted) rather than being
  // answered only when the rendezvous times out.
  void wait_a_little(bool beat_now = true) {
    if (beat_now) beat();
    for (int i = 0; i < 10; ++i) {
      if (const int signal = interrupted_ ? interrupted_() : 0) {
        throw Interrupted(signal, fmt::format("{}: interrupted by {} while waiting at the "
                                              "rendezvous at {}:{}; no rank was started",
                                              o_.name, runtime::signal_name(signal), o_.master_addr,
                                              o_.master_port));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // Until "round" moves past k (the running nodes stopped for the next round).
  void wait_for_round_after(int k, Clock::time_point deadline) {
    while (std::stoi(get("round")) <= k) {
      if (Clock::now() >= deadline) {
        throw std::runtime_error(
            fmt::format("{}: the nodes of round {} did not start a new round within {} s", o_.name,
                        k, o_.rdzv_timeout_seconds));
      }
      wait_a_little();
    }
  }

  struct Seen {
    int64_t value = 0;
    Clock::time_point changed;
  };

  LaunchOptions o_;
  bool elastic_ = false;
  bool host_ = false;
  std::string address_;  // this node's address on the interface that reaches the master
  std::string id_;       // address#pid: several nodes may share a machine
  Store store_;
  std::string lost_;  // why the store is lost, once it is
  bool given_up_ = false;
  bool left_ = false;
  int round_ = -1;
  std::string prefix_;
  int position_ = 0;
  std::vector<std::string> members_;
  std::map<std::string, Seen> seen_;
  Clock::time_point next_beat_{};
  Clock::time_point next_poll_{};
  std::function<int()> interrupted_;  // join's: the signal that ends a wait (0: none)
};

}  // namespace

std::unique_ptr<NodeRendezvous> make_tcp_rendezvous(const LaunchOptions& options) {
  runtime::route_torch_logs();
  return std::make_unique<TcpRendezvous>(options);
}

}  // namespace trainer::dist
