// The observer list behind outcore/monitor/hooks.hpp. Emitting takes a shared lock
// (observers run concurrently); registering takes it exclusively. The count lets an
// unobserved hook return after one relaxed load.
#include "outcore/monitor/hooks.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <vector>

namespace outcore::monitor {

namespace {

struct Observers {
    std::shared_mutex mutex;
    std::vector<Observer*> list;
    std::atomic<std::size_t> count{0};
};

Observers& observers() {
    static Observers o;  // never destroyed before its users: function-local static
    return o;
}

template <class Call>
void for_each_observer(Call&& call) noexcept {
    Observers& o = observers();
    std::shared_lock lock(o.mutex);
    for (Observer* obs : o.list) call(*obs);
}

}  // namespace

std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void add_observer(Observer& observer) {
    Observers& o = observers();
    std::unique_lock lock(o.mutex);
    o.list.push_back(&observer);
    o.count.store(o.list.size(), std::memory_order_relaxed);
}

void remove_observer(Observer& observer) noexcept {
    Observers& o = observers();
    std::unique_lock lock(o.mutex);
    std::erase(o.list, &observer);
    o.count.store(o.list.size(), std::memory_order_relaxed);
}

namespace detail {

bool observed() noexcept { return observers().count.load(std::memory_order_relaxed) != 0; }

void emit_allocate(const AllocationEvent& event) noexcept {
    for_each_observer([&](Observer& o) { o.on_allocate(event); });
}
void emit_free(const AllocationEvent& event) noexcept {
    for_each_observer([&](Observer& o) { o.on_free(event); });
}
void emit_op(const OpEvent& event) noexcept {
    for_each_observer([&](Observer& o) { o.on_op(event); });
}
void emit_swap(const SwapEvent& event) noexcept {
    for_each_observer([&](Observer& o) { o.on_swap(event); });
}

}  // namespace detail
}  // namespace outcore::monitor
