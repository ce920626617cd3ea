// TieredStore fault sweeps (SQLite style): one fixed scenario that moves data through
// every tier is run with the N-th device allocation, pinned allocation, copy, disk
// write, disk read or disk reservation failing, once and from N on, for every N until
// a run sees no fault. After each run: every call either did its job or threw exactly
// the documented error, every object reads back bit-exact, the store's books balance
// with the device's, and nothing leaked.
#include <gtest/gtest.h>

#include <cerrno>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "outcore/swap/file_io.hpp"
#include "outcore/swap/store.hpp"
#include "support/test_seed.hpp"
#include "unit/swap/store_test_support.hpp"

namespace outcore::swap {
namespace {

using namespace store_test;  // NOLINT(google-build-using-namespace): test helpers

/// Which errors a run may see: the documented error of the injected fault.
using Allowed = std::function<bool(const Error&)>;

template <typename E>
Allowed only() {
    return [](const Error& e) { return dynamic_cast<const E*>(&e) != nullptr; };
}
Allowed none() {
    return [](const Error&) { return false; };
}

/// Keeps the thrash and washer warnings of hundreds of runs off the output.
class QuietLog {
public:
    QuietLog() : level_(log::level()) { log::set_level(log::Level::Error); }
    ~QuietLog() { log::set_level(level_); }
    QuietLog(const QuietLog&) = delete;
    QuietLog& operator=(const QuietLog&) = delete;

private:
    log::Level level_;
};

/// The scenario and its reference. Every call goes through attempt(): an error must be
/// one the fault allows, and the reference changes only when the call succeeded.
class Scenario {
public:
    Scenario(TieredStore& store, std::uint64_t seed, Allowed allowed)
        : store_(store), rng_(seed), allowed_(std::move(allowed)) {}

    void run() {
        const BlockId a = put(kUnit + kUnit / 2);
        const BlockId b = put(5 * kKiB);
        const BlockId c = put(kUnit / 2 + 3);
        const BlockId d = put(9 * kKiB);
        acquire_read(a);
        acquire_write(b);
        acquire_write(a);
        acquire_discard(c);
        read_all_objects();
        write(a);
        write(d);
        attempt([&] {
            store_.prefetch(b);
            store_.drain();
        });
        attempt([&] { store_.set_budget(Tier::Device, kUnit / 2); });
        attempt([&] { store_.set_budget(Tier::Device, 2 * kUnit); });
        const BlockId e = create(kUnit + 4 * kKiB);
        acquire_read(e);
        acquire_write(e);
        put(kUnit / 2);
        put(kUnit / 2);
        for (const auto& [value, bytes] : ref_) acquire_read(BlockId{value});
        attempt([&] {
            store_.erase(d);
            ref_.erase(d.value);
        });
        attempt([&] { store_.set_budget(Tier::Host, 2 * kUnit); });
        read_all_objects();
    }

    [[nodiscard]] const std::map<std::uint64_t, std::vector<std::byte>>& reference() const { return ref_; }
    [[nodiscard]] std::size_t errors() const { return errors_; }

private:
    void attempt(const std::function<void()>& call) {
        try {
            call();
        } catch (const Error& e) {
            ++errors_;
            if (!allowed_(e)) ADD_FAILURE() << "undocumented error for this fault: " << e.what();
        }
    }

    BlockId put(std::uint64_t n) {
        BlockId id;
        attempt([&] {
            std::vector<std::byte> bytes = random_bytes(rng_, n);
            id = store_.put(bytes);
            ref_.emplace(id.value, std::move(bytes));
        });
        return id;
    }

    BlockId create(std::uint64_t n) {
        BlockId id;
        attempt([&] {
            id = store_.create(n);
            ref_.emplace(id.value, std::vector<std::byte>(n));
        });
        return id;
    }

    void acquire_read(BlockId id) {
        if (ref_.count(id.value) == 0) return;
        attempt([&] {
            const Pin pin = store_.acquire(id, Access::Read);
            EXPECT_TRUE(same_bytes(device_bytes(pin), ref_.at(id.value))) << "acquire brought wrong bytes";
        });
    }

    void acquire_write(BlockId id) {
        if (ref_.count(id.value) == 0) return;
        attempt([&] {
            const Pin pin = store_.acquire(id, Access::Write);
            std::vector<std::byte>& bytes = ref_.at(id.value);
            EXPECT_TRUE(same_bytes(device_bytes(pin), bytes)) << "acquire brought wrong bytes";
            const std::uint64_t offset = bytes.size() / 3;
            const std::vector<std::byte> patch = random_bytes(rng_, bytes.size() - offset);
            write_through(pin, offset, patch, kUnit);
            std::copy(patch.begin(), patch.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset));
        });
    }

    void acquire_discard(BlockId id) {
        if (ref_.count(id.value) == 0) return;
        attempt([&] {
            const Pin pin = store_.acquire(id, Access::Discard);
            std::vector<std::byte> bytes = random_bytes(rng_, pin.bytes());
            write_through(pin, 0, bytes, kUnit);
            ref_[id.value] = std::move(bytes);
        });
    }

    void write(BlockId id) {
        if (ref_.count(id.value) == 0) return;
        std::vector<std::byte>& old = ref_.at(id.value);
        const std::vector<std::byte> bytes = random_bytes(rng_, old.size());
        try {
            store_.write(id, bytes);
            old = bytes;
        } catch (const Error& e) {
            ++errors_;
            if (!allowed_(e)) ADD_FAILURE() << "undocumented error for this fault: " << e.what();
            // Each unit holds the old or the new bytes; the reference follows the store.
            std::vector<std::byte> now;
            attempt([&] { now = read_all(store_, id); });
            if (now.empty()) return;  // the read failed too (allowed): leave it to the final check
            for (std::size_t at = 0; at < now.size(); at += kUnit) {
                const std::size_t n = std::min<std::size_t>(kUnit, now.size() - at);
                const auto first = static_cast<std::ptrdiff_t>(at);
                const auto last = first + static_cast<std::ptrdiff_t>(n);
                EXPECT_TRUE(std::equal(now.begin() + first, now.begin() + last, old.begin() + first) ||
                            std::equal(now.begin() + first, now.begin() + last, bytes.begin() + first))
                    << "a unit holds neither the old nor the new bytes after a failed write";
            }
            old = now;
        }
    }

    void read_all_objects() {
        for (const auto& [value, bytes] : ref_) {
            attempt([&] {
                EXPECT_TRUE(same_bytes(read_all(store_, BlockId{value}), bytes))
                    << "read returned wrong bytes";
            });
        }
    }

    TieredStore& store_;
    std::mt19937_64 rng_;
    Allowed allowed_;
    std::map<std::uint64_t, std::vector<std::byte>> ref_;
    std::size_t errors_ = 0;
};

class StoreFaultTest : public ::testing::Test {
protected:
    StoreOptions options(std::uint32_t wash_units = 0) {
        return {.device_budget_bytes = 2 * kUnit,
                .host_budget_bytes = 3 * kUnit,
                .pinned_pool_bytes = 2 * kUnit,
                .unit_bytes = kUnit,
                .spill_dir = dir_.path(),
                .direct_io = false,
                .wash_queue_units = wash_units,
                .file_io = &faulty_io_};
    }

    /// Runs the scenario once with `arm` injecting a fault (after the store exists) and
    /// checks everything afterwards. Returns how many faults were injected.
    std::uint64_t run_once(const std::function<void(TieredStore&)>& arm,
                           const std::function<std::uint64_t()>& injected, const Allowed& allowed,
                           std::uint32_t wash_units = 0) {
        std::uint64_t count = 0;
        {
            TieredStore store(*device_, options(wash_units));
            arm(store);
            Scenario scenario(store, scenario_seed_, allowed);
            scenario.run();
            store.drain();
            count = injected();
            device_->disarm();
            faulty_io_.disarm();
            // Nothing lost: every object the scenario kept reads back bit-exact.
            for (const auto& [value, bytes] : scenario.reference()) {
                EXPECT_TRUE(same_bytes(read_all(store, BlockId{value}), bytes))
                    << "object " << value << " after the fault";
            }
            expect_balanced(store, *device_);
            const StoreStats s = store.stats();
            EXPECT_EQ(s.objects, scenario.reference().size());
            EXPECT_EQ(s.pinned_units, 0U);
            EXPECT_EQ(s.checksum_failures, 0U);
        }
        EXPECT_EQ(device_->allocated_bytes(MemoryKind::Device), 0U) << "device memory leaked";
        EXPECT_EQ(device_->allocated_bytes(MemoryKind::HostPinned), 0U) << "pinned memory leaked";
        return count;
    }

    /// For N = 1, 2, ... until a run injects nothing: once, then persistent.
    void sweep(const std::string& what, const std::function<void(TieredStore&, std::uint64_t, bool)>& arm,
               const std::function<std::uint64_t()>& injected, const Allowed& once_allowed,
               const Allowed& persistent_allowed) {
        for (const bool persistent : {false, true}) {
            std::uint64_t n = 1;
            for (;; ++n) {
                SCOPED_TRACE(::testing::Message()
                             << what << (persistent ? ", persistent" : ", once") << ", N = " << n);
                const std::uint64_t count = run_once([&](TieredStore& s) { arm(s, n, persistent); }, injected,
                                                     persistent ? persistent_allowed : once_allowed);
                if (::testing::Test::HasFailure()) return;
                if (count == 0) break;
                ASSERT_LT(n, kMaxRuns) << "the scenario never ran out of calls to fail";
            }
            EXPECT_GT(n, 1U) << what << ": the scenario never reached the fault";
        }
    }

    /// A disk fault for FaultyFileIo, armed as the scenario starts.
    void sweep_disk(const std::string& what, FileOp op, int error, std::size_t short_bytes,
                    const Allowed& once_allowed, const Allowed& persistent_allowed) {
        sweep(
            what,
            [&](TieredStore&, std::uint64_t n, bool persistent) {
                faulty_io_.arm({.op = op,
                                .nth = n,
                                .error = error,
                                .short_bytes = short_bytes,
                                .persistent = persistent});
            },
            [&] { return faulty_io_.injected(); }, once_allowed, persistent_allowed);
    }

    static constexpr std::uint64_t kMaxRuns = 2000;
    QuietLog quiet_;
    std::uint64_t scenario_seed_ = test::seed();
    TempDir dir_;
    std::unique_ptr<test::FaultyDevice> device_ = make_device();
    PosixFileIo posix_io_;
    FaultyFileIo faulty_io_{posix_io_};
};

TEST_F(StoreFaultTest, ScenarioRunsCleanWithoutFaults) {
    const std::uint64_t injected = run_once([](TieredStore&) {}, [] { return std::uint64_t{0}; }, none());
    EXPECT_EQ(injected, 0U);
}

TEST_F(StoreFaultTest, DeviceAllocationFailures) {
    // Once: evict-and-retry absorbs it, or (nothing to evict) OutOfMemory.
    sweep(
        "device allocation",
        [&](TieredStore&, std::uint64_t n, bool persistent) {
            device_->fail_allocation(MemoryKind::Device, n, persistent);
        },
        [&] { return device_->injected(); }, only<OutOfMemory>(), only<OutOfMemory>());
}

TEST_F(StoreFaultTest, PinnedAllocationFailuresFallBackToPageableMemory) {
    sweep(
        "pinned allocation",
        [&](TieredStore&, std::uint64_t n, bool persistent) {
            device_->fail_allocation(MemoryKind::HostPinned, n, persistent);
        },
        [&] { return device_->injected(); }, none(), none());
}

TEST_F(StoreFaultTest, CopyFailuresSeenAtSynchronize) {
    sweep(
        "copy (async)",
        [&](TieredStore&, std::uint64_t n, bool persistent) {
            device_->fail_copy(n, {.persistent = persistent, .at_submit = false});
        },
        [&] { return device_->injected(); }, only<BackendError>(), only<BackendError>());
}

TEST_F(StoreFaultTest, CopyFailuresAtSubmission) {
    sweep(
        "copy (at submit)",
        [&](TieredStore&, std::uint64_t n, bool persistent) {
            device_->fail_copy(n, {.persistent = persistent, .at_submit = true});
        },
        [&] { return device_->injected(); }, only<BackendError>(), only<BackendError>());
}

TEST_F(StoreFaultTest, DiskWriteFailures) {
    sweep_disk("write EIO", FileOp::Write, EIO, 0, only<IoError>(), only<IoError>());
    sweep_disk("write ENOSPC", FileOp::Write, ENOSPC, 0, only<IoError>(), only<IoError>());
    // Retried or continued inside the disk tier: once is invisible; for ever is an IoError.
    sweep_disk("write EINTR", FileOp::Write, EINTR, 0, none(), only<IoError>());
    sweep_disk("write EAGAIN", FileOp::Write, EAGAIN, 0, none(), only<IoError>());
    sweep_disk("short write", FileOp::Write, 0, 64 * kKiB + 3, none(), none());
}

TEST_F(StoreFaultTest, DiskReadFailures) {
    sweep_disk("read EIO", FileOp::Read, EIO, 0, only<IoError>(), only<IoError>());
    sweep_disk("read EINTR", FileOp::Read, EINTR, 0, none(), only<IoError>());
    sweep_disk("read EAGAIN", FileOp::Read, EAGAIN, 0, none(), only<IoError>());
    sweep_disk("short read", FileOp::Read, 0, 64 * kKiB + 3, none(), none());
}

TEST_F(StoreFaultTest, DiskReservationFailures) {
    sweep_disk("fallocate ENOSPC", FileOp::Allocate, ENOSPC, 0, only<IoError>(), only<IoError>());
    sweep_disk("fallocate EIO", FileOp::Allocate, EIO, 0, only<IoError>(), only<IoError>());
}

TEST_F(StoreFaultTest, DiskFailuresWithTheWasherRunning) {
    // The washer's writes race the scenario's, so which call fails varies from run to
    // run; what must not vary: the data survive, and the books balance.
    for (const bool persistent : {false, true}) {
        for (std::uint64_t n = 1; n <= 12; ++n) {
            SCOPED_TRACE(::testing::Message()
                         << "washer, write EIO " << (persistent ? "persistent" : "once") << ", N = " << n);
            (void)run_once(
                [&](TieredStore&) {
                    faulty_io_.arm({.op = FileOp::Write, .nth = n, .error = EIO, .persistent = persistent});
                },
                [&] { return faulty_io_.injected(); }, only<IoError>(), /*wash_units=*/2);
            if (HasFailure()) return;
        }
    }
}

TEST_F(StoreFaultTest, SpillFileThatCannotBeOpenedIsAnIoErrorFromTheConstructor) {
    faulty_io_.arm({.op = FileOp::Open, .nth = 1, .error = EACCES, .persistent = true});
    EXPECT_THROW(TieredStore(*device_, options()), IoError);
    faulty_io_.disarm();
}

}  // namespace
}  // namespace outcore::swap
