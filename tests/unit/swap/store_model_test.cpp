// TieredStore against a reference model: random sequences of put, create, acquire
// (Read / Write / Discard, writing through the Pin), release, read, write, erase,
// prefetch, drain and budget changes, each checked against a std::map of the bytes
// every object should hold, with validate() after every step. Budgets are a few
// objects, so every sequence swaps between all three tiers. StoreModelThreads runs
// four threads on one store (and runs under the tsan preset).
//
// OUTCORE_TEST_SEED replays a run (each sequence draws its own seed from it and prints
// it on failure); OUTCORE_TEST_SCALE scales the number of sequences.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "outcore/swap/store.hpp"
#include "support/test_seed.hpp"
#include "unit/swap/store_test_support.hpp"

namespace outcore::swap {
namespace {

using namespace store_test;  // NOLINT(google-build-using-namespace): test helpers

constexpr std::size_t kSequences = 10000;
constexpr int kMaxSteps = 200;
constexpr std::size_t kMaxObjects = 24;

std::uint64_t log_uniform(std::mt19937_64& rng, std::uint64_t lo, std::uint64_t hi) {
    std::uniform_real_distribution<double> e(std::log2(static_cast<double>(lo)),
                                             std::log2(static_cast<double>(hi)));
    return std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::exp2(e(rng))), lo, hi);
}

/// One sequence's store: small objects and budgets of a few of them; one in 32 uses
/// objects of up to 2.5 units so objects span unit boundaries.
struct Config {
    std::uint64_t max_object = 0;
    std::uint64_t max_unit = 0;  ///< largest unit an object can have
    std::uint64_t device_budget = 0;
    std::uint64_t host_budget = 0;
    bool disk = true;
    std::uint32_t wash_units = 0;

    static Config draw(std::mt19937_64& rng) {
        Config c;
        if (rng() % 32 == 0) {
            c.max_object = 2 * kUnit + kUnit / 2;
            c.max_unit = kUnit;
            c.device_budget = kUnit + rng() % (3 * kUnit);
        } else {
            c.max_object = log_uniform(rng, 4 * kKiB, 48 * kKiB);
            c.max_unit = c.max_object;
            c.device_budget = c.max_object / 2 + rng() % (8 * c.max_object);
        }
        // Twice the largest unit: room for a unit coming up and a victim going down.
        c.host_budget = 2 * c.max_unit + rng() % (6 * c.max_unit);
        c.disk = rng() % 5 != 0;
        c.wash_units = rng() % 2 == 0 ? 0 : static_cast<std::uint32_t>(1 + rng() % 8);
        return c;
    }

    StoreOptions options(const std::filesystem::path& dir) const {
        return {.device_budget_bytes = device_budget,
                .host_budget_bytes = host_budget,
                .pinned_pool_bytes = 2 * kUnit,
                .unit_bytes = kUnit,
                .spill_dir = disk ? dir : std::filesystem::path{},
                .direct_io = false,
                .wash_queue_units = wash_units};
    }

    std::uint64_t object_bytes(std::mt19937_64& rng) const {
        if (max_object > kUnit && rng() % 2 == 0) return log_uniform(rng, 1, max_object);
        return log_uniform(rng, 1, std::min<std::uint64_t>(max_object, 64 * kKiB));
    }
};

/// A Pin the model holds, with what it was acquired for.
struct Held {
    Pin pin;
    Access access;
};

/// The reference: every object's bytes, and the pins held.
class Model {
public:
    Model(TieredStore& store, Device& device, const Config& config, std::mt19937_64& rng, bool alone)
        : store_(store), device_(device), config_(config), rng_(rng), alone_(alone) {}

    /// One random operation, checked against the reference.
    void step() {
        const unsigned op = static_cast<unsigned>(rng_() % 100);
        if (ref_.empty() || (op < 16 && ref_.size() < kMaxObjects)) return put();
        if (op < 19 && ref_.size() < kMaxObjects) return create();
        if (op < 40) return acquire();
        if (op < 54) return release();
        if (op < 62) return write_through_pin();
        if (op < 76) return read();
        if (op < 83) return write();
        if (op < 89 || ref_.size() >= kMaxObjects) return erase();
        if (op < 93) return prefetch();
        if (op < 94) return prefetch_order();
        if (op < 96) return drain();
        if (alone_) set_budget();
    }

    /// Every object reads back as the model says.
    void check_all() {
        for (const auto& [value, bytes] : ref_) {
            ASSERT_EQ(store_.size(BlockId{value}), bytes.size());
            ASSERT_TRUE(same_bytes(read_all(store_, BlockId{value}), bytes)) << "object " << value;
        }
    }

    void check_counts() {
        const StoreStats s = store_.stats();
        if (alone_) {
            ASSERT_EQ(s.objects, ref_.size());
            ASSERT_EQ(s.pinned_units, pinned_units().size());
        }
    }

    void release_all() { held_.clear(); }
    /// Refusals seen: each kind must turn up somewhere in a full run.
    [[nodiscard]] std::uint64_t out_of_memory() const { return out_of_memory_; }
    [[nodiscard]] std::uint64_t usage_errors() const { return usage_errors_; }
    /// Objects the threads share (acquired for Read only, never changed).
    void add_shared(BlockId id, std::vector<std::byte> bytes) { shared_.emplace(id.value, std::move(bytes)); }

private:
    BlockId pick() {
        auto it = ref_.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(rng_() % ref_.size()));
        return BlockId{it->first};
    }

    std::uint64_t unit_size(BlockId id, std::uint64_t u) const {
        const std::uint64_t bytes = size_of(id);
        return std::min(kUnit, bytes - u * kUnit);
    }
    std::uint64_t size_of(BlockId id) const {
        if (const auto it = ref_.find(id.value); it != ref_.end()) return it->second.size();
        return shared_.at(id.value).size();
    }
    std::uint64_t unit_count(BlockId id) const { return (size_of(id) + kUnit - 1) / kUnit; }

    std::set<std::pair<std::uint64_t, std::uint64_t>> pinned_units() const {
        std::set<std::pair<std::uint64_t, std::uint64_t>> units;
        for (const Held& h : held_) {
            for (std::uint64_t u = 0; u < unit_count(h.pin.id()); ++u) units.emplace(h.pin.id().value, u);
        }
        return units;
    }
    bool pinned(BlockId id) const {
        return std::any_of(held_.begin(), held_.end(), [&](const Held& h) { return h.pin.id() == id; });
    }
    std::uint64_t pinned_bytes() const {
        std::uint64_t total = 0;
        for (const auto& [value, u] : pinned_units()) total += unit_size(BlockId{value}, u);
        return total;
    }

    /// Whether an OutOfMemory is what the model predicts (or may happen at all).
    /// Single-threaded with a disk tier the model predicts exactly; without one, a full
    /// host tier can refuse anything that needs room there; with other threads their
    /// pins and transfers can take the room too.
    bool exact() const { return alone_ && config_.disk; }

    void put() {
        std::vector<std::byte> bytes = random_bytes(rng_, config_.object_bytes(rng_));
        const std::size_t before = alone_ ? store_.stats().objects : 0;
        try {
            const BlockId id = store_.put(bytes);
            ASSERT_EQ(store_.size(id), bytes.size());
            ASSERT_TRUE(same_bytes(read_all(store_, id), bytes));
            ref_.emplace(id.value, std::move(bytes));
        } catch (const OutOfMemory& e) {
            ++out_of_memory_;
            ASSERT_FALSE(exact()) << "put of " << bytes.size() << " bytes: " << e.what();
            if (alone_) {
                ASSERT_EQ(store_.stats().objects, before) << "a failed put must keep nothing";
            }
        }
    }

    void create() {
        const std::uint64_t n = config_.object_bytes(rng_);
        const BlockId id = store_.create(n);
        ref_.emplace(id.value, std::vector<std::byte>(n));
    }

    void acquire() {
        BlockId id = pick();
        if (!shared_.empty() && rng_() % 4 == 0) {
            auto it = shared_.begin();
            std::advance(it, static_cast<std::ptrdiff_t>(rng_() % shared_.size()));
            id = BlockId{it->first};
        }
        const bool is_shared = shared_.count(id.value) != 0;
        const unsigned a = static_cast<unsigned>(rng_() % 10);
        const Access access = is_shared || a < 5 ? Access::Read : a < 8 ? Access::Write : Access::Discard;
        // The prediction: room for the units not pinned yet next to everything pinned.
        std::uint64_t need = 0;
        const auto units = pinned_units();
        for (std::uint64_t u = 0; u < unit_count(id); ++u) {
            if (units.count({id.value, u}) == 0) need += unit_size(id, u);
        }
        const std::uint64_t budget = device_budget_;
        const bool fits = size_of(id) <= budget && pinned_bytes() + need <= budget;
        std::optional<Pin> pin;
        try {
            pin = store_.acquire(id, access);
        } catch (const OutOfMemory& e) {
            ++out_of_memory_;
            if (exact()) {
                ASSERT_FALSE(fits) << "acquire of " << size_of(id) << " bytes: " << e.what();
            }
            ASSERT_NE(std::string(e.what()).find("[swap]"), std::string::npos) << e.what();
            return;
        }
        if (exact()) {
            ASSERT_TRUE(fits) << "acquire succeeded beyond the device budget";
        }
        ASSERT_EQ(pin->bytes(), size_of(id));
        ASSERT_EQ(pin->views().size(), unit_count(id));
        if (access == Access::Discard) {
            // The contract: the caller overwrites every byte.
            std::vector<std::byte> bytes = random_bytes(rng_, size_of(id));
            store_test::write_through(*pin, 0, bytes, kUnit);
            ref_[id.value] = std::move(bytes);
        } else if (rng_() % 4 == 0) {
            ASSERT_TRUE(same_bytes(device_bytes(*pin), is_shared ? shared_.at(id.value) : ref_.at(id.value)));
        }
        held_.push_back(Held{std::move(*pin), access});
    }

    void release() {
        if (held_.empty()) return;
        const std::size_t i = rng_() % held_.size();
        const BlockId id = held_[i].pin.id();
        held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
        if (ref_.count(id.value) != 0) {
            ASSERT_TRUE(same_bytes(read_all(store_, id), ref_.at(id.value)));
        }
    }

    void write_through_pin() {
        std::vector<Held*> writable;
        for (Held& h : held_) {
            if (h.access != Access::Read) writable.push_back(&h);
        }
        if (writable.empty()) return;
        const Pin& pin = writable[rng_() % writable.size()]->pin;
        std::vector<std::byte>& bytes = ref_.at(pin.id().value);
        const std::uint64_t offset = rng_() % bytes.size();
        const std::uint64_t n = 1 + rng_() % (bytes.size() - offset);
        const std::vector<std::byte> patch = random_bytes(rng_, n);
        if (rng_() % 3 == 0) {
            upload_through(device_, pin, offset, patch, kUnit);
        } else {
            store_test::write_through(pin, offset, patch, kUnit);
        }
        std::copy(patch.begin(), patch.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset));
        ASSERT_TRUE(same_bytes(read_all(store_, pin.id()), bytes));
    }

    void read() {
        const BlockId id = pick();
        ASSERT_TRUE(same_bytes(read_all(store_, id), ref_.at(id.value)));
    }

    void write() {
        const BlockId id = pick();
        std::vector<std::byte> bytes = random_bytes(rng_, ref_.at(id.value).size());
        const bool is_pinned = pinned(id);
        try {
            store_.write(id, bytes);
        } catch (const UsageError& e) {
            ++usage_errors_;
            ASSERT_TRUE(is_pinned) << e.what();
            return;
        } catch (const OutOfMemory& e) {
            ++out_of_memory_;
            ASSERT_FALSE(exact()) << e.what();
            // Units are replaced one at a time: each holds the old or the new bytes.
            const std::vector<std::byte> now = read_all(store_, id);
            std::vector<std::byte>& old = ref_.at(id.value);
            for (std::uint64_t u = 0; u < unit_count(id); ++u) {
                const auto first = static_cast<std::ptrdiff_t>(u * kUnit);
                const auto last = first + static_cast<std::ptrdiff_t>(unit_size(id, u));
                const bool is_old = std::equal(now.begin() + first, now.begin() + last, old.begin() + first);
                const bool is_new =
                    std::equal(now.begin() + first, now.begin() + last, bytes.begin() + first);
                ASSERT_TRUE(is_old || is_new) << "unit " << u << " holds neither the old nor the new bytes";
            }
            old = now;
            return;
        }
        ASSERT_FALSE(is_pinned) << "write to a pinned object succeeded";
        ref_[id.value] = std::move(bytes);
        ASSERT_TRUE(same_bytes(read_all(store_, id), ref_.at(id.value)));
    }

    void erase() {
        const BlockId id = pick();
        const bool is_pinned = pinned(id);
        try {
            store_.erase(id);
        } catch (const UsageError& e) {
            ++usage_errors_;
            ASSERT_TRUE(is_pinned) << e.what();
            return;
        }
        ASSERT_FALSE(is_pinned) << "erase of a pinned object succeeded";
        ref_.erase(id.value);
        ASSERT_THROW((void)store_.size(id), UsageError);
    }

    void prefetch() { store_.prefetch(pick()); }

    void prefetch_order() {
        std::vector<BlockId> order;
        for (int i = 0; i < 6; ++i) order.push_back(pick());
        store_.prefetch(order);
    }

    void drain() {
        store_.drain();
        if (alone_) expect_balanced(store_, device_);
    }

    void set_budget() {
        if (rng_() % 2 == 0) {
            const std::uint64_t b = config_.max_unit / 2 + rng_() % (8 * config_.max_unit);
            const bool fits = pinned_bytes() <= b;
            try {
                store_.set_budget(Tier::Device, b);
                device_budget_ = b;
                ASSERT_TRUE(fits || !exact()) << "a device budget below the pinned bytes was accepted";
            } catch (const OutOfMemory& e) {
                ++out_of_memory_;
                if (exact()) {
                    ASSERT_FALSE(fits) << e.what();
                }
                ASSERT_EQ(store_.stats().device.budget_bytes, device_budget_)
                    << "a refused budget must not stick";
            }
        } else {
            const std::uint64_t b = 2 * config_.max_unit + rng_() % (6 * config_.max_unit);
            try {
                store_.set_budget(Tier::Host, b);
            } catch (const OutOfMemory& e) {
                ++out_of_memory_;
                ASSERT_FALSE(exact()) << e.what();
            }
        }
    }

    TieredStore& store_;
    Device& device_;
    const Config config_;
    std::mt19937_64& rng_;
    const bool alone_;
    std::uint64_t device_budget_ = config_.device_budget;
    std::map<std::uint64_t, std::vector<std::byte>> ref_;
    std::map<std::uint64_t, std::vector<std::byte>> shared_;
    std::vector<Held> held_;
    std::uint64_t out_of_memory_ = 0;
    std::uint64_t usage_errors_ = 0;
};

/// What a run exercised, summed over its sequences.
struct Coverage {
    std::uint64_t device_write_backs = 0;
    std::uint64_t disk_writes = 0;
    std::uint64_t disk_reads = 0;
    std::uint64_t washed = 0;
    std::uint64_t prefetched = 0;
    std::uint64_t thrashes = 0;
    std::uint64_t out_of_memory = 0;
    std::uint64_t usage_errors = 0;

    void add(const StoreStats& s, const Model& m) {
        device_write_backs += s.device.dirty_evictions;
        disk_writes += s.host.dirty_evictions;
        disk_reads += s.disk.swap_out_count;
        washed += s.host.write_back_bytes;
        prefetched += s.prefetch_count;
        thrashes += s.thrash_count;
        out_of_memory += m.out_of_memory();
        usage_errors += m.usage_errors();
    }
    /// Every path the sequences are meant to reach was reached.
    void expect_all() const {
        EXPECT_GT(device_write_backs, 0U) << "no dirty unit was ever written back from the device";
        EXPECT_GT(disk_writes, 0U) << "no eviction ever wrote to disk";
        EXPECT_GT(disk_reads, 0U) << "nothing was ever read back from disk";
        EXPECT_GT(washed, 0U) << "the washer never ran";
        EXPECT_GT(prefetched, 0U) << "no prefetch ever brought a unit in";
        EXPECT_GT(thrashes, 0U) << "no thrash was ever detected";
        EXPECT_GT(out_of_memory, 0U) << "no OutOfMemory was ever predicted and seen";
        EXPECT_GT(usage_errors, 0U) << "no UsageError (pinned erase or write) was ever seen";
    }
};

/// Keeps warnings (thrashing is the point here) off the test output.
class QuietLog {
public:
    QuietLog() : level_(log::level()) { log::set_level(log::Level::Error); }
    ~QuietLog() { log::set_level(level_); }
    QuietLog(const QuietLog&) = delete;
    QuietLog& operator=(const QuietLog&) = delete;

private:
    log::Level level_;
};

TEST(StoreModel, RandomSequencesMatchTheReference) {
    std::mt19937_64 master(test::seed());
    const QuietLog quiet;
    TempDir dir;
    auto device = make_device();
    const std::size_t sequences = test::scaled(kSequences);
    Coverage coverage;
    for (std::size_t seq = 0; seq < sequences; ++seq) {
        const std::uint64_t seed = master();
        std::mt19937_64 rng(seed);
        const Config config = Config::draw(rng);
        SCOPED_TRACE(::testing::Message()
                     << "sequence " << seq << " (seed " << seed << ", device budget " << config.device_budget
                     << ", host budget " << config.host_budget << ", disk " << config.disk << ", wash "
                     << config.wash_units << ")");
        {
            TieredStore store(*device, config.options(dir.path()));
            Model model(store, *device, config, rng, /*alone=*/true);
            const int steps = 1 + static_cast<int>(rng() % kMaxSteps);
            for (int i = 0; i < steps; ++i) {
                model.step();
                ASSERT_NO_THROW(store.validate()) << "after step " << i;
                ASSERT_NO_FATAL_FAILURE(model.check_counts()) << "after step " << i;
                if (::testing::Test::HasFatalFailure()) return;
            }
            ASSERT_NO_FATAL_FAILURE(model.check_all());
            model.release_all();
            coverage.add(store.stats(), model);
            store.drain();
            ASSERT_NO_FATAL_FAILURE(expect_balanced(store, *device));
        }
        ASSERT_EQ(device->allocated_bytes(MemoryKind::Device), 0U) << "the store leaked device memory";
        ASSERT_EQ(device->allocated_bytes(MemoryKind::HostPinned), 0U) << "the store leaked pinned memory";
        ASSERT_TRUE(dir.entries().empty()) << "a spill file was left in the directory";
    }
    // A scaled-down run (sanitizers) may be too short to reach every path.
    if (sequences >= kSequences / 10) coverage.expect_all();
}

TEST(StoreModelThreads, FourThreadsOnOneStoreMatchTheirReferences) {
    constexpr int kThreads = 4;
    std::mt19937_64 master(test::seed());
    const QuietLog quiet;
    TempDir dir;
    auto device = make_device();
    Config config;
    config.max_object = 48 * kKiB;
    config.max_unit = config.max_object;
    config.device_budget = 12 * config.max_object;
    config.host_budget = 24 * config.max_object;
    config.disk = true;
    config.wash_units = 4;
    TieredStore store(*device, config.options(dir.path()));
    // Objects every thread reads and pins for Read at the same time.
    std::vector<std::pair<BlockId, std::vector<std::byte>>> shared;
    for (int i = 0; i < 6; ++i) {
        std::vector<std::byte> bytes = random_bytes(master, config.object_bytes(master));
        shared.emplace_back(store.put(bytes), std::move(bytes));
    }
    const std::size_t steps = test::scaled(5000);
    std::vector<std::uint64_t> seeds;
    for (int t = 0; t < kThreads; ++t) seeds.push_back(master());
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937_64 rng(seeds[static_cast<std::size_t>(t)]);
            Model model(store, *device, config, rng, /*alone=*/false);
            for (const auto& [id, bytes] : shared) model.add_shared(id, bytes);
            for (std::size_t i = 0; i < steps && !::testing::Test::HasFailure(); ++i) model.step();
            model.check_all();
            model.release_all();
            if (::testing::Test::HasFailure()) failures.fetch_add(1);
        });
    }
    for (std::thread& th : threads) th.join();
    ASSERT_EQ(failures.load(), 0);
    for (const auto& [id, bytes] : shared) EXPECT_TRUE(same_bytes(read_all(store, id), bytes));
    store.drain();
    expect_balanced(store, *device);
    EXPECT_EQ(store.stats().pinned_units, 0U);
}

}  // namespace
}  // namespace outcore::swap
