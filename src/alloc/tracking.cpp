#include "outcore/alloc/tracking.hpp"

#include <cxxabi.h>
#include <execinfo.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

#include "alloc/block_key.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"

namespace outcore::alloc {
namespace {

#ifdef NDEBUG
constexpr bool kStacksByDefault = false;
#else
constexpr bool kStacksByDefault = true;
#endif

// Frames of the capture itself (capture_stack) that say nothing about the caller.
constexpr int kSkippedFrames = 1;

struct Record {
    std::string_view tag;
    std::uint64_t bytes = 0;
    MemoryKind kind = MemoryKind::Device;
    std::chrono::steady_clock::time_point allocated_at{};
    std::uint64_t sequence = 0;
    // Raw return addresses; symbolized only when a report asks, which is rare.
    std::vector<void*> frames;
};

// Not inlined, so the one skipped frame is always this function's own.
[[gnu::noinline]] std::vector<void*> capture_stack(std::size_t depth) {
    std::vector<void*> frames(depth + kSkippedFrames);
    const int n = ::backtrace(frames.data(), static_cast<int>(frames.size()));
    if (n <= kSkippedFrames) return {};
    frames.erase(frames.begin(), frames.begin() + kSkippedFrames);
    frames.resize(static_cast<std::size_t>(n - kSkippedFrames));
    return frames;
}

// backtrace_symbols writes "module(mangled+0x1f) [0x...]"; people read demangled names.
std::string demangle_line(const char* line) {
    std::string text(line);
    const auto open = text.find('(');
    const auto plus = text.find('+', open == std::string::npos ? 0 : open);
    if (open == std::string::npos || plus == std::string::npos || plus == open + 1) return text;
    const std::string mangled = text.substr(open + 1, plus - open - 1);
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> name(
        abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), &std::free);
    if (status != 0 || !name) return text;
    return text.substr(0, open + 1) + name.get() + text.substr(plus);
}

std::vector<std::string> symbolize(const std::vector<void*>& frames) {
    std::vector<std::string> out;
    if (frames.empty()) return out;
    // backtrace_symbols returns one malloc'd block holding every string.
    std::unique_ptr<char*, decltype(&std::free)> names(
        ::backtrace_symbols(frames.data(), static_cast<int>(frames.size())), &std::free);
    out.reserve(frames.size());
    for (std::size_t i = 0; i < frames.size(); ++i) {
        out.push_back(names ? demangle_line(names.get()[i]) : fmt::format("{}", frames[i]));
    }
    return out;
}

std::string format_age(std::uint64_t ns) {
    if (ns >= 1'000'000'000ULL) return fmt::format("{:.1f} s", static_cast<double>(ns) / 1e9);
    if (ns >= 1'000'000ULL) return fmt::format("{:.1f} ms", static_cast<double>(ns) / 1e6);
    return fmt::format("{:.1f} us", static_cast<double>(ns) / 1e3);
}

}  // namespace

struct Tracking::State {
    std::mutex mutex;
    std::uint64_t next_sequence = 0;
    std::unordered_map<detail::BlockKey, Record, detail::BlockKeyHash> live;
};

Tracking::Tracking(Allocator& upstream, TrackingOptions options)
    : upstream_(upstream),
      capture_stacks_(options.capture_stack_traces.value_or(kStacksByDefault)),
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
    Record record;
    record.tag = request.tag;
    if (capture_stacks_) record.frames = capture_stack(stack_depth_);
    const RawBlock raw = upstream_.allocate_raw(request);
    try {
        record.bytes = raw.bytes;
        record.kind = raw.kind;
        record.allocated_at = std::chrono::steady_clock::now();
        std::lock_guard lock(state_->mutex);
        record.sequence = state_->next_sequence;
        if (!state_->live.emplace(detail::BlockKey::of(raw), std::move(record)).second) {
            throw InternalError("tracking", "upstream handed out a block that is already live");
        }
        ++state_->next_sequence;
    } catch (...) {
        upstream_.deallocate_raw(raw);
        throw;
    }
    return raw;
}

void Tracking::do_deallocate(const RawBlock& block) noexcept {
    bool known = false;
    {
        // Forget the block before upstream frees it: once freed, another thread may be
        // handed the same address and record it under the same key.
        std::lock_guard lock(state_->mutex);
        known = state_->live.erase(detail::BlockKey::of(block)) == 1;
    }
    if (!known) {
        try {
            log::error("tracking", "deallocate of a block of {} bytes this allocator did not hand out",
                       block.bytes);
        } catch (...) {  // formatting can throw bad_alloc; this path must not
        }
    }
    upstream_.deallocate_raw(block);
}

std::vector<LiveAllocation> Tracking::live_allocations() const {
    std::vector<LiveAllocation> out;
    std::vector<std::vector<void*>> frames;
    {
        std::lock_guard lock(state_->mutex);
        out.reserve(state_->live.size());
        frames.reserve(state_->live.size());
        for (const auto& [key, r] : state_->live) {
            out.push_back({r.tag, r.bytes, r.kind, r.allocated_at, r.sequence, {}});
            frames.push_back(r.frames);
        }
    }
    // Symbolize outside the lock: backtrace_symbols is slow.
    for (std::size_t i = 0; i < out.size(); ++i) out[i].stack = symbolize(frames[i]);
    std::sort(out.begin(), out.end(),
              [](const LiveAllocation& a, const LiveAllocation& b) { return a.sequence < b.sequence; });
    return out;
}

std::uint64_t Tracking::live_count() const {
    std::lock_guard lock(state_->mutex);
    return state_->live.size();
}

LeakReport Tracking::leak_report() const {
    struct Accumulator {
        LeakGroup group;
        std::chrono::steady_clock::time_point oldest_at = std::chrono::steady_clock::time_point::max();
        std::vector<void*> oldest_frames;
    };
    std::map<std::string_view, Accumulator> by_tag;
    LeakReport report;
    const auto now = std::chrono::steady_clock::now();
    {
        std::lock_guard lock(state_->mutex);
        for (const auto& [key, r] : state_->live) {
            Accumulator& acc = by_tag[r.tag];
            acc.group.count += 1;
            acc.group.bytes += r.bytes;
            if (r.allocated_at < acc.oldest_at) {
                acc.oldest_at = r.allocated_at;
                acc.oldest_frames = r.frames;
            }
            report.count += 1;
            report.bytes += r.bytes;
        }
    }
    report.groups.reserve(by_tag.size());
    for (auto& [tag, acc] : by_tag) {
        acc.group.tag = std::string(tag);
        // A block recorded after `now` was read (another thread) has age 0, not negative.
        const auto age = std::max(now - acc.oldest_at, std::chrono::steady_clock::duration::zero());
        acc.group.oldest_age_ns =
            static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(age).count());
        acc.group.oldest_stack = symbolize(acc.oldest_frames);
        report.groups.push_back(std::move(acc.group));
    }
    std::sort(report.groups.begin(), report.groups.end(), [](const LeakGroup& a, const LeakGroup& b) {
        if (a.bytes != b.bytes) return a.bytes > b.bytes;
        return a.tag < b.tag;
    });
    return report;
}

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
