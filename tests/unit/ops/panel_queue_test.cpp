// detail::PanelQueue (src/ops/unit_scheduler.hpp), the hand-out policy gemm_on_devices
// and filter_on_devices share: a device keeps its panel, a free one takes an untouched
// panel first, then the fullest; every unit handed out exactly once, under threads too.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "devices_test_support.hpp"
#include "ops/unit_scheduler.hpp"
#include "outcore/core/error.hpp"

namespace {

using outcore::devices_test::cpu_devices;
using outcore::devices_test::pointers;
using outcore::devices_test::within_a_minute;

// The hand-out policy: a device stays on its panel; a free one takes an untouched
// panel first, then joins the panel with the most units left; nothing after stop().
TEST(PanelQueue, KeepsAPanelThenTakesAnUntouchedOneThenTheFullest) {
    using outcore::ops::detail::PanelQueue;
    const std::size_t sizes[] = {3, 1, 2};
    PanelQueue q(sizes, 1);
    auto pair = [](const std::optional<PanelQueue::Visit>& v) {
        return v ? std::pair{v->panel, v->unit} : std::pair{SIZE_MAX, SIZE_MAX};
    };
    using P = std::pair<std::size_t, std::size_t>;
    EXPECT_EQ(pair(q.first_visit()), (P{0, 0}));
    EXPECT_EQ(q.next(0), 1U);
    EXPECT_EQ(pair(q.visit()), (P{1, 3}));
    EXPECT_EQ(q.next(1), std::nullopt);
    EXPECT_EQ(pair(q.visit()), (P{2, 4}));
    // Every panel is visited: join the one with the most units left (0: one, 2: one).
    EXPECT_EQ(pair(q.visit()), (P{0, 2}));
    EXPECT_EQ(pair(q.visit()), (P{2, 5}));
    EXPECT_EQ(q.visit(), std::nullopt);

    PanelQueue stopped(sizes, 1);
    (void)stopped.first_visit();
    stopped.stop();
    EXPECT_EQ(stopped.next(0), std::nullopt);
    EXPECT_EQ(stopped.visit(), std::nullopt);
}

// Every device takes its first unit before any takes a second: a device that started
// early waits for the others' first visits instead of running through a whole panel.
TEST(PanelQueueThreads, EveryDeviceTakesAUnitBeforeAnyTakesTwo) {
    using outcore::ops::detail::PanelQueue;
    const std::size_t sizes[] = {4};
    PanelQueue q(sizes, 2);
    ASSERT_EQ(q.first_visit()->unit, 0U);
    std::atomic<bool> returned{false};
    std::optional<std::size_t> second;
    std::thread early([&] {
        second = q.next(0);
        returned.store(true);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(returned.load()) << "the second claim did not wait for the other device";
    const std::optional<PanelQueue::Visit> late = q.first_visit();
    early.join();
    ASSERT_TRUE(late.has_value());
    EXPECT_EQ(late->unit, 1U);
    EXPECT_EQ(second, 2U);

    // stop() ends the wait.
    PanelQueue stopped(sizes, 2);
    (void)stopped.first_visit();
    std::thread waiting([&] { EXPECT_EQ(stopped.next(0), std::nullopt); });
    stopped.stop();
    waiting.join();
}

// A queue made for another number of devices is refused (its first-claim barrier would
// wait forever for a device that never comes).
TEST(PanelQueueThreads, AQueueForAnotherDeviceCountIsAUsageError) {
    using outcore::ops::detail::PanelQueue;
    auto owned = cpu_devices(2);
    const std::size_t sizes[] = {4};
    for (const std::size_t made_for : {1U, 3U}) {
        PanelQueue q(sizes, made_for);
        within_a_minute([&] {
            EXPECT_THROW(outcore::ops::detail::run_panels(pointers(owned), q, "test",
                                                          [&](std::size_t, PanelQueue::Visit v) {
                                                              while (q.next(v.panel)) {}
                                                          }),
                         outcore::UsageError)
                << made_for;
        });
    }
}

// Threads taking panels and their units hand out every unit exactly once.
TEST(PanelQueueThreads, HandsOutEveryUnitExactlyOnce) {
    using outcore::ops::detail::PanelQueue;
    auto owned = cpu_devices(4);
    const std::vector<std::size_t> sizes = {5, 1, 7, 3, 2};
    PanelQueue q(sizes, owned.size());
    std::mutex mutex;
    std::multiset<std::size_t> taken;
    outcore::ops::detail::run_panels(pointers(owned), q, "test", [&](std::size_t, PanelQueue::Visit v) {
        for (std::optional<std::size_t> u = v.unit; u; u = q.next(v.panel)) {
            std::lock_guard lock(mutex);
            taken.insert(*u);
        }
    });
    ASSERT_EQ(taken.size(), 18U);
    for (std::size_t u = 0; u < 18; ++u) EXPECT_EQ(taken.count(u), 1U) << u;
}

}  // namespace
