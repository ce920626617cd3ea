// Helpers for the swap-store tests: devices, stores with small budgets, reading and
// writing an object's bytes, and writing through a Pin on the CPU backend.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "outcore/core/size.hpp"
#include "outcore/device/device.hpp"
#include "outcore/device/queue.hpp"
#include "outcore/swap/store.hpp"
#include "support/faulty_device.hpp"
#include "unit/swap/spill_test_support.hpp"

namespace outcore::swap::store_test {

using spill_test::TempDir;

/// `n` random bytes: one draw from `rng` seeds a splitmix64 stream (cheap enough for
/// the millions of bytes the model tests write).
inline std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
    std::vector<std::byte> v(n);
    std::uint64_t state = rng();
    for (std::size_t i = 0; i < n; i += 8) {
        state += 0x9e3779b97f4a7c15ULL;
        std::uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        std::memcpy(v.data() + i, &z, std::min<std::size_t>(8, n - i));
    }
    return v;
}

constexpr std::uint64_t kUnit = 1 * kMiB;
/// The simulated card: far above every budget used here, so only the store's budgets
/// (or an injected fault) ever refuse memory.
constexpr std::uint64_t kCardBytes = 1 * kGiB;

inline std::unique_ptr<test::FaultyDevice> make_device() {
    return test::FaultyDevice::cpu({.total_memory_bytes = kCardBytes});
}

/// got == want, compared with memcmp (std::byte vectors compare byte by byte, and a
/// failure prints the first difference rather than megabytes of hex).
inline ::testing::AssertionResult same_bytes(std::span<const std::byte> got,
                                             std::span<const std::byte> want) {
    if (got.size() != want.size()) {
        return ::testing::AssertionFailure()
               << got.size() << " bytes where " << want.size() << " were expected";
    }
    if (got.empty() || std::memcmp(got.data(), want.data(), got.size()) == 0)
        return ::testing::AssertionSuccess();
    std::size_t i = 0;
    while (got[i] == want[i]) ++i;
    return ::testing::AssertionFailure() << "bytes differ from offset " << i << " of " << got.size() << " (0x"
                                         << std::hex << std::to_integer<int>(got[i]) << " instead of 0x"
                                         << std::to_integer<int>(want[i]) << std::dec << ")";
}

/// The object's bytes, read through the store.
inline std::vector<std::byte> read_all(TieredStore& store, BlockId id) {
    std::vector<std::byte> out(store.size(id));
    store.read(id, out);
    return out;
}

/// Host address of a device view. On the CPU backend device memory is host memory at
/// RawBlock::native (its `host` stays null on purpose, as on a GPU); tests use this to
/// write through a Pin the way a kernel would.
inline std::byte* cpu_address(const BufferView& view) {
    return reinterpret_cast<std::byte*>(view.block.native + view.native_offset());
}

/// Copies `bytes` into the pinned object at `offset` by host writes (CPU backend).
inline void write_through(const Pin& pin, std::uint64_t offset, std::span<const std::byte> bytes,
                          std::uint64_t unit_bytes) {
    std::uint64_t done = 0;
    while (done < bytes.size()) {
        const std::uint64_t at = offset + done;
        const BufferView& v = pin.views()[at / unit_bytes];
        const std::uint64_t in_unit = at % unit_bytes;
        const std::uint64_t n = std::min<std::uint64_t>(bytes.size() - done, v.bytes - in_unit);
        std::memcpy(cpu_address(v) + in_unit, bytes.data() + done, n);
        done += n;
    }
}

/// The same through a device queue (upload of each touched unit range).
inline void upload_through(Device& device, const Pin& pin, std::uint64_t offset,
                           std::span<const std::byte> bytes, std::uint64_t unit_bytes) {
    auto q = device.create_queue(QueueRole::Upload);
    std::uint64_t done = 0;
    while (done < bytes.size()) {
        const std::uint64_t at = offset + done;
        const BufferView& v = pin.views()[at / unit_bytes];
        const std::uint64_t in_unit = at % unit_bytes;
        const std::uint64_t n = std::min<std::uint64_t>(bytes.size() - done, v.bytes - in_unit);
        q->upload(bytes.data() + done, v.sub(in_unit, n));
        done += n;
    }
    q->synchronize();
}

/// The pinned object's bytes, read from device memory directly (CPU backend).
inline std::vector<std::byte> device_bytes(const Pin& pin) {
    std::vector<std::byte> out;
    out.reserve(pin.bytes());
    for (const BufferView& v : pin.views()) {
        const std::byte* p = cpu_address(v);
        out.insert(out.end(), p, p + v.bytes);
    }
    return out;
}

/// The store's accounting agrees with itself and with the device's own counters.
inline void expect_balanced(const TieredStore& store, const Device& device) {
    ASSERT_NO_THROW(store.validate());
    const StoreStats s = store.stats();
    EXPECT_EQ(s.device.resident_bytes, device.allocated_bytes(MemoryKind::Device))
        << "device memory the store holds differs from what the device handed out";
    EXPECT_LE(s.device.resident_bytes, s.device.budget_bytes);
    EXPECT_LE(s.host.resident_bytes, s.host.budget_bytes);
    if (s.disk.budget_bytes != 0) {
        EXPECT_LE(s.disk.resident_bytes, s.disk.budget_bytes);
    }
}

}  // namespace outcore::swap::store_test
