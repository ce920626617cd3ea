// Tests of CpuQueue and CpuEvent: work runs on the worker, in order, never at
// submission; events order work across queues with CUDA semantics; failures are
// kept, skip later work, travel through events, and are rethrown once.
// Suites named *Threads run under the TSan preset.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "outcore/backends/cpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "support/test_seed.hpp"

namespace {

using outcore::Block;
using outcore::BufferView;
using outcore::Device;
using outcore::Event;
using outcore::MemoryKind;
using outcore::Queue;
using outcore::UsageError;
using namespace std::chrono_literals;

/// Holds a queue's worker inside a host_task until the test opens it.
class Gate {
public:
    void open() {
        {
            std::lock_guard lock(mutex_);
            open_ = true;
        }
        cv_.notify_all();
    }
    void wait() {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [this] { return open_; });
    }
    [[nodiscard]] bool is_open() {
        std::lock_guard lock(mutex_);
        return open_;
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool open_ = false;
};

/// Opens a gate when it goes out of scope, so a failing assertion never leaves a
/// queue destructor draining a task that waits forever. Declare it after the queues.
struct OpenOnExit {
    Gate& gate;
    ~OpenOnExit() { gate.open(); }
};

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
    std::vector<std::byte> out(n);
    for (auto& b : out) b = static_cast<std::byte>(rng() & 0xFF);
    return out;
}

std::unique_ptr<Device> small_device() {
    return outcore::cpu::make_cpu_device({.total_memory_bytes = 64 * outcore::kMiB});
}

// Upload, copy and download are queued behind a closed gate; the host source is
// rewritten after submission. The download must show the rewritten bytes: copies
// that ran at submission, or out of order, would show the poison or the old bytes.
TEST(CpuQueue, CopiesRunOnTheWorkerInOrderNotAtSubmission) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = small_device();
    const std::size_t n = 1 + rng() % 100000;
    Block a = dev->allocate({.bytes = n, .kind = MemoryKind::Device});
    Block b = dev->allocate({.bytes = n, .kind = MemoryKind::Device});
    std::vector<std::byte> src = random_bytes(rng, n);
    std::vector<std::byte> dst(n, std::byte{0xA5});
    const std::vector<std::byte> poison = dst;
    Gate gate;
    auto q = dev->create_queue();
    OpenOnExit guard{gate};

    q->host_task([&] { gate.wait(); });
    q->upload(src.data(), a);
    q->copy(a, b);
    q->download(b, dst.data());
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(dst, poison) << "work ran before the worker reached it";

    const std::vector<std::byte> later = random_bytes(rng, n);
    std::copy(later.begin(), later.end(), src.begin());  // same storage the upload points at
    gate.open();
    q->synchronize();
    EXPECT_EQ(dst, later);
}

// A random program of fills, copies, uploads and downloads over several blocks,
// all queued behind a gate, must leave exactly what running it sequentially on a
// host model leaves, and every download must see the model's bytes at its position.
TEST(CpuQueue, RandomWorkMatchesASequentialModel) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = small_device();
    constexpr std::size_t kBlockBytes = 8192;
    const std::array<MemoryKind, 3> kinds = {MemoryKind::Device, MemoryKind::HostPinned,
                                             MemoryKind::HostCached};
    std::vector<Block> blocks;
    std::vector<std::vector<std::byte>> model;
    for (int i = 0; i < 4; ++i) {
        blocks.push_back(
            dev->allocate({.bytes = kBlockBytes, .kind = kinds[static_cast<std::size_t>(i) % 3]}));
        model.emplace_back(kBlockBytes, std::byte{0});
    }
    Gate gate;
    auto q = dev->create_queue();
    OpenOnExit guard{gate};
    q->host_task([&] { gate.wait(); });
    for (std::size_t i = 0; i < blocks.size(); ++i) q->fill(blocks[i], std::byte{0});

    struct Download {
        std::vector<std::byte> got;
        std::vector<std::byte> expected;
    };
    std::vector<std::vector<std::byte>> uploads;  // kept alive until the queue is done
    std::vector<Download> downloads;
    auto random_range = [&](std::size_t max_bytes) {
        const std::size_t bytes = 1 + rng() % max_bytes;
        const std::size_t offset = rng() % (kBlockBytes - bytes + 1);
        return std::pair{offset, bytes};
    };
    const std::uint64_t ops = outcore::test::scaled(400);
    uploads.reserve(ops);  // not needed for correctness (moves keep buffers), but plain
    downloads.reserve(ops);
    for (std::uint64_t op = 0; op < ops; ++op) {
        const std::size_t bi = rng() % blocks.size();
        switch (rng() % 4) {
            case 0: {
                const auto [off, len] = random_range(2048);
                const auto value = static_cast<std::byte>(rng() & 0xFF);
                q->fill(BufferView(blocks[bi], off, len), value);
                std::fill_n(model[bi].begin() + static_cast<std::ptrdiff_t>(off), len, value);
                break;
            }
            case 1: {
                const auto [off, len] = random_range(2048);
                uploads.push_back(random_bytes(rng, len));
                q->upload(uploads.back().data(), BufferView(blocks[bi], off, len));
                std::copy(uploads.back().begin(), uploads.back().end(),
                          model[bi].begin() + static_cast<std::ptrdiff_t>(off));
                break;
            }
            case 2: {
                const auto [off, len] = random_range(2048);
                const auto first = model[bi].begin() + static_cast<std::ptrdiff_t>(off);
                downloads.push_back(
                    Download{std::vector<std::byte>(len, std::byte{0xEE}),
                             std::vector<std::byte>(first, first + static_cast<std::ptrdiff_t>(len))});
                q->download(BufferView(blocks[bi], off, len), downloads.back().got.data());
                break;
            }
            default: {
                const std::size_t di =
                    (bi + 1 + rng() % (blocks.size() - 1)) % blocks.size();  // another block
                const auto [soff, len] = random_range(2048);
                const std::size_t doff = rng() % (kBlockBytes - len + 1);
                q->copy(BufferView(blocks[bi], soff, len), BufferView(blocks[di], doff, len));
                std::copy_n(model[bi].begin() + static_cast<std::ptrdiff_t>(soff), len,
                            model[di].begin() + static_cast<std::ptrdiff_t>(doff));
                break;
            }
        }
    }
    gate.open();
    q->synchronize();
    for (std::size_t i = 0; i < downloads.size(); ++i) {
        ASSERT_EQ(downloads[i].got, downloads[i].expected) << "download " << i;
    }
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        std::vector<std::byte> final_bytes(kBlockBytes);
        q->download(blocks[i], final_bytes.data());
        q->synchronize();
        EXPECT_EQ(final_bytes, model[i]) << "block " << i;
    }
}

TEST(CpuQueue, HostTasksRunInOrderOnOneWorkerThread) {
    auto dev = small_device();
    auto q = dev->create_queue(outcore::QueueRole::Compute);
    EXPECT_EQ(q->role(), outcore::QueueRole::Compute);
    EXPECT_EQ(&q->device(), dev.get());
    std::vector<int> order;
    std::vector<std::thread::id> ids;
    for (int i = 0; i < 100; ++i) {
        q->host_task([&order, &ids, i] {
            order.push_back(i);
            ids.push_back(std::this_thread::get_id());
        });
    }
    q->synchronize();
    ASSERT_EQ(order.size(), 100U);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
    for (const auto& id : ids) {
        EXPECT_EQ(id, ids.front());
        EXPECT_NE(id, std::this_thread::get_id());
    }
}

TEST(CpuQueue, FailureSkipsLaterWorkAndIsRethrownOnce) {
    auto dev = small_device();
    Block pinned = dev->allocate({.bytes = 256, .kind = MemoryKind::HostPinned});
    std::memset(pinned.host(), 0x11, 256);
    auto q = dev->create_queue();
    auto before = dev->create_event();
    auto after = dev->create_event();
    bool ran = false;

    q->record(*before);
    q->host_task([] { throw std::runtime_error("boom"); });
    q->fill(pinned, std::byte{0x22});
    q->host_task([&ran] { ran = true; });
    q->record(*after);

    EXPECT_NO_THROW(before->wait()) << "a record made before the failure does not carry it";
    try {
        after->wait();
        FAIL() << "an event recorded after the failure did not rethrow it";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "boom");
    }
    EXPECT_TRUE(after->query());
    try {
        q->synchronize();
        FAIL() << "synchronize did not rethrow the failure";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "boom");
    }
    EXPECT_FALSE(ran);
    EXPECT_EQ(pinned.host()[0], std::byte{0x11});
    EXPECT_EQ(pinned.host()[255], std::byte{0x11});

    // Reported once; the queue then works again.
    EXPECT_NO_THROW(q->synchronize());
    q->fill(pinned, std::byte{0x33});
    q->record(*after);
    EXPECT_NO_THROW(after->wait());
    EXPECT_NO_THROW(q->synchronize());
    EXPECT_EQ(pinned.host()[0], std::byte{0x33});
    EXPECT_EQ(pinned.host()[255], std::byte{0x33});
}

TEST(CpuQueue, NonStandardExceptionsAreKeptToo) {
    auto dev = small_device();
    auto q = dev->create_queue();
    q->host_task([] { throw 42; });  // NOLINT(hicpp-exception-baseclass): the point of the test
    EXPECT_THROW(q->synchronize(), int);
}

TEST(CpuQueue, DestructorDrainsPendingWork) {
    auto dev = small_device();
    std::atomic<int> count{0};
    Gate gate;
    auto q = dev->create_queue();
    q->host_task([&] { gate.wait(); });
    for (int i = 0; i < 50; ++i) q->host_task([&] { ++count; });
    std::thread opener([&] {
        std::this_thread::sleep_for(10ms);
        gate.open();
    });
    q.reset();
    EXPECT_EQ(count.load(), 50);
    opener.join();
}

TEST(CpuQueue, DestructorDoesNotThrowAnUnreportedFailure) {
    auto dev = small_device();
    auto q = dev->create_queue();
    q->host_task([] { throw std::runtime_error("never reported"); });
    EXPECT_NO_THROW(q.reset());
}

TEST(CpuEvent, NeverRecordedCountsAsComplete) {
    auto dev = small_device();
    auto e = dev->create_event();
    EXPECT_TRUE(e->query());
    EXPECT_NO_THROW(e->wait());
    auto q = dev->create_queue();
    bool ran = false;
    q->wait(*e);
    q->host_task([&ran] { ran = true; });
    q->synchronize();
    EXPECT_TRUE(ran);
}

class ForeignEvent final : public Event {
    void do_wait() override {}
    bool do_query() override { return true; }
};

TEST(CpuEvent, RejectsEventsOfOtherBackends) {
    auto dev = small_device();
    auto q = dev->create_queue();
    ForeignEvent foreign;
    EXPECT_THROW(q->record(foreign), UsageError);
    EXPECT_THROW(q->wait(foreign), UsageError);
}

TEST(CpuEvent, EventsOfAnotherCpuDeviceWork) {
    auto dev = small_device();
    auto other = small_device();
    auto q = dev->create_queue();
    auto e = other->create_event();
    q->record(*e);
    e->wait();
    EXPECT_TRUE(e->query());
}

// Queue 2 waits for an event queue 1 records after a gated upload. When queue 2
// passes its wait the event must be complete, and its copy must see queue 1's data.
TEST(CpuQueueThreads, EventOrdersWorkAcrossQueues) {
    std::mt19937_64 rng(outcore::test::seed());
    auto dev = small_device();
    const std::size_t n = 1 + rng() % (1 << 20);
    Block a = dev->allocate({.bytes = n, .kind = MemoryKind::Device});
    Block b = dev->allocate({.bytes = n, .kind = MemoryKind::Device});
    const std::vector<std::byte> data = random_bytes(rng, n);
    std::vector<std::byte> dst(n, std::byte{0});
    Gate gate;
    auto q1 = dev->create_queue(outcore::QueueRole::Upload);
    auto q2 = dev->create_queue(outcore::QueueRole::Download);
    auto uploaded = dev->create_event();
    OpenOnExit guard{gate};

    q1->host_task([&] { gate.wait(); });
    q1->upload(data.data(), a);
    q1->record(*uploaded);
    q2->wait(*uploaded);
    std::atomic<bool> complete_when_passed{false};
    q2->host_task([&] { complete_when_passed = uploaded->query(); });
    q2->copy(a, b);
    q2->download(b, dst.data());

    std::this_thread::sleep_for(5ms);
    EXPECT_FALSE(uploaded->query());
    gate.open();
    q2->synchronize();
    EXPECT_TRUE(complete_when_passed.load());
    EXPECT_EQ(dst, data);
    q1->synchronize();
}

// CUDA semantics: a wait targets the record current when the wait is issued. A later
// record that completes at once must not release an earlier wait, and a wait issued
// after that later record must not block on the earlier one.
TEST(CpuQueueThreads, WaitTargetsTheRecordCurrentWhenIssued) {
    auto dev = small_device();
    Gate gate;
    auto slow = dev->create_queue();
    auto waiter = dev->create_queue();
    auto fast = dev->create_queue();
    auto late = dev->create_queue();
    auto e = dev->create_event();
    OpenOnExit guard{gate};

    slow->host_task([&] { gate.wait(); });
    slow->record(*e);
    waiter->wait(*e);
    std::atomic<bool> waiter_ran{false};
    std::atomic<bool> waiter_saw_open{false};
    waiter->host_task([&] {
        waiter_saw_open = gate.is_open();
        waiter_ran = true;
    });

    fast->record(*e);
    fast->synchronize();
    e->wait();  // targets fast's record, which is complete
    EXPECT_TRUE(e->query());
    late->wait(*e);
    late->synchronize();  // would hang if it waited on the slow record

    std::this_thread::sleep_for(5ms);
    EXPECT_FALSE(waiter_ran.load()) << "the wait was released by a later record";
    gate.open();
    waiter->synchronize();
    EXPECT_TRUE(waiter_saw_open.load());
    slow->synchronize();
}

TEST(CpuQueueThreads, HostWaitsBlockUntilTheRecordCompletes) {
    auto dev = small_device();
    Gate gate;
    auto q = dev->create_queue();
    auto e = dev->create_event();
    OpenOnExit guard{gate};
    std::atomic<bool> work_done{false};
    q->host_task([&] { gate.wait(); });
    q->host_task([&] { work_done = true; });
    q->record(*e);
    std::atomic<int> saw_done{0};
    std::vector<std::thread> waiters;
    for (int i = 0; i < 3; ++i) {
        waiters.emplace_back([&] {
            e->wait();
            if (work_done.load()) ++saw_done;
        });
    }
    std::this_thread::sleep_for(5ms);
    EXPECT_FALSE(e->query());
    gate.open();
    for (auto& t : waiters) t.join();
    EXPECT_EQ(saw_done.load(), 3);
    EXPECT_TRUE(e->query());
}

TEST(CpuQueueThreads, FailureTravelsThroughEventWaits) {
    auto dev = small_device();
    auto q1 = dev->create_queue();
    auto q2 = dev->create_queue();
    auto e = dev->create_event();
    std::atomic<bool> ran{false};
    q1->host_task([] { throw outcore::InternalError("test", "upstream failed"); });
    q1->record(*e);
    q2->wait(*e);
    q2->host_task([&] { ran = true; });
    EXPECT_THROW(q2->synchronize(), outcore::InternalError);
    EXPECT_FALSE(ran.load()) << "work that depended on failed work ran";
    EXPECT_THROW(q1->synchronize(), outcore::InternalError);
    // Both queues are usable again.
    q2->host_task([&] { ran = true; });
    EXPECT_NO_THROW(q2->synchronize());
    EXPECT_TRUE(ran.load());
}

// Two queues take turns incrementing a plain (non-atomic) counter, ordered only by
// events. Any missing happens-before shows up as a wrong count here or as a TSan report.
TEST(CpuQueueThreads, EventsPingPongBetweenQueues) {
    auto dev = small_device();
    auto q1 = dev->create_queue();
    auto q2 = dev->create_queue();
    auto e1 = dev->create_event();
    auto e2 = dev->create_event();
    std::int64_t counter = 0;
    std::atomic<bool> out_of_turn{false};
    const auto rounds = static_cast<std::int64_t>(outcore::test::scaled(300));
    for (std::int64_t i = 0; i < rounds; ++i) {
        q1->wait(*e2);
        q1->host_task([&, i] {
            if (counter != 2 * i) out_of_turn = true;
            ++counter;
        });
        q1->record(*e1);
        q2->wait(*e1);
        q2->host_task([&, i] {
            if (counter != 2 * i + 1) out_of_turn = true;
            ++counter;
        });
        q2->record(*e2);
    }
    q2->synchronize();
    q1->synchronize();
    EXPECT_FALSE(out_of_turn.load());
    EXPECT_EQ(counter, 2 * rounds);
}

// Several host threads, each with its own queue, move data through one device at once.
TEST(CpuQueueThreads, QueuesOnSeveralThreadsAreIndependent) {
    const std::uint64_t base_seed = outcore::test::seed();
    auto dev = small_device();
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(base_seed + static_cast<std::uint64_t>(t));
            auto q = dev->create_queue();
            for (std::uint64_t i = 0; i < outcore::test::scaled(30); ++i) {
                const std::size_t n = 1 + rng() % 65536;
                Block a = dev->allocate({.bytes = n, .kind = MemoryKind::Device});
                Block b = dev->allocate({.bytes = n, .kind = MemoryKind::HostCached});
                const std::vector<std::byte> src = random_bytes(rng, n);
                std::vector<std::byte> dst(n);
                q->upload(src.data(), a);
                q->copy(a, b);
                q->download(b, dst.data());
                q->synchronize();
                if (dst != src) ++mismatches;
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0);
    EXPECT_EQ(dev->allocated_bytes(), 0U);
}

}  // namespace
