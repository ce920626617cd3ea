#include "outcore/alloc/tracking.hpp"

#include <fmt/format.h>

#include <chrono>
#include <vector>

#include "alloc/live_set.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"

namespace outcore::alloc {
namespace {

std::string format_age(std::uint64_t ns) {
    if (ns >= 1'000'000'000ULL) return fmt::format("{:.1f} s", static_cast<double>(ns) / 1e9);
    if (ns >= 1'000'000ULL) return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6);
    return fmt::format("{:.1f} us", static_cast<double>(ns) / 1e3);
}

}  // namespace

struct Tracking::State {
    detail::LiveSet live;
};

Tracking::Tracking(Allocator& upstream, TrackingOptions options)
    : upstream_(upstream),
      capture_stacks_(options.capture_stack_traces.value_or(detail::kStacksByDefault)),
      stack_depth_(options.stack_depth),
      report_at_destruction_(options.report_at_destruction),
      state_(std::make_unique<State>()) {}

Tracking::~Tracking() {
    if (!report_at_destruction_) return;
    try {
        const LeakReport report = leak_report();
        if (!report.empty()) {
            log::error("tracking", "{} block(s) still live at destruction:\n{}", report.count,
                       alloc::format_leak_report(report));
        }
    } catch (...) {  // a destructor must not throw; the report is best effort
    }
}

RawBlock Tracking::do_allocate(const AllocationRequest& request) {
    std::vector<void*> frames;
    if (capture_stacks_) frames = detail::capture_stack(stack_depth_);
    const RawBlock raw = upstream_.allocate_raw(request);
    try {
        const bool fresh =
            state_->live.add(detail::BlockKey::of(raw), {.tag = request.tag,
                                                         .bytes = raw.bytes,
                                                         .kind = raw.kind,
                                                         .device_id = raw.device_id,
                                                         .allocated_at = std::chrono::steady_clock::now(),
                                                         .frames = std::move(frames)});
        if (!fresh) throw InternalError("tracking", "upstream handed out a block that is already live");
    } catch (...) {
        upstream_.deallocate_raw(raw);
        throw;
    }
    return raw;
}

void Tracking::do_deallocate(const RawBlock& block) noexcept {
    // Forget the block before upstream frees it: once freed, another thread may be
    // handed the same address and record it under the same key.
    const bool known = state_->live.remove(detail::BlockKey::of(block));
    if (!known) {
        try {
            log::error("tracking", "deallocate of a block of {} bytes this allocator did not hand out",
                       block.bytes);
        } catch (...) {  // formatting can throw bad_alloc; this path must not
        }
    }
    upstream_.deallocate_raw(block);
}

std::vector<LiveAllocation> Tracking::live_allocations() const { return state_->live.live_allocations(); }

std::uint64_t Tracking::live_count() const { return state_->live.size(); }

LeakReport Tracking::leak_report() const { return state_->live.leak_report(); }

std::string Tracking::format_leak_report() const { return alloc::format_leak_report(leak_report()); }

std::string format_leak_report(const LeakReport& report) {
    if (report.empty()) return {};
    std::string out = fmt::format("leak report: {} live block(s), {} in {} tag(s)\n", report.count,
                                  format_size(report.bytes), report.groups.size());
    for (const LeakGroup& g : report.groups) {
        out += fmt::format("  {}: {} block(s), {}, oldest {} old\n", g.tag.empty() ? "(untagged)" : g.tag,
                           g.count, format_size(g.bytes), format_age(g.oldest_age_ns));
        for (const std::string& frame : g.oldest_stack) out += fmt::format("      at {}\n", frame);
    }
    return out;
}

}  // namespace outcore::alloc
