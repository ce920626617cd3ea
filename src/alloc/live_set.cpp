#include "alloc/live_set.hpp"

#include <cxxabi.h>
#include <execinfo.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>

namespace outcore::alloc::detail {
namespace {

// Frames of the capture itself (capture_stack) that say nothing about the caller.
constexpr int kSkippedFrames = 1;

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

}  // namespace

// Not inlined (see the declaration), so the one skipped frame is always its own.
std::vector<void*> capture_stack(std::size_t depth) {
    std::vector<void*> frames(depth + kSkippedFrames);
    const int n = ::backtrace(frames.data(), static_cast<int>(frames.size()));
    if (n <= kSkippedFrames) return {};
    frames.erase(frames.begin(), frames.begin() + kSkippedFrames);
    frames.resize(static_cast<std::size_t>(n - kSkippedFrames));
    return frames;
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

bool LiveSet::add(const BlockKey& key, Entry entry) {
    std::lock_guard lock(mutex_);
    if (!live_.emplace(key, Record{std::move(entry), next_sequence_}).second) return false;
    ++next_sequence_;
    return true;
}

bool LiveSet::remove(const BlockKey& key) noexcept {
    std::lock_guard lock(mutex_);
    return live_.erase(key) == 1;
}

std::uint64_t LiveSet::size() const {
    std::lock_guard lock(mutex_);
    return live_.size();
}

std::vector<LiveAllocation> LiveSet::live_allocations() const {
    std::vector<LiveAllocation> out;
    std::vector<std::vector<void*>> frames;
    {
        std::lock_guard lock(mutex_);
        out.reserve(live_.size());
        frames.reserve(live_.size());
        for (const auto& [key, r] : live_) {
            const Entry& e = r.entry;
            out.push_back({.tag = e.tag,
                           .bytes = e.bytes,
                           .kind = e.kind,
                           .allocated_at = e.allocated_at,
                           .sequence = r.sequence,
                           .stack = {},
                           .device_id = e.device_id});
            frames.push_back(e.frames);
        }
    }
    // Symbolize outside the lock: backtrace_symbols is slow.
    for (std::size_t i = 0; i < out.size(); ++i) out[i].stack = symbolize(frames[i]);
    std::sort(out.begin(), out.end(),
              [](const LiveAllocation& a, const LiveAllocation& b) { return a.sequence < b.sequence; });
    return out;
}

LeakReport LiveSet::leak_report() const {
    struct Accumulator {
        LeakGroup group;
        std::chrono::steady_clock::time_point oldest_at = std::chrono::steady_clock::time_point::max();
        std::vector<void*> oldest_frames;
    };
    std::map<std::string_view, Accumulator> by_tag;
    LeakReport report;
    const auto now = std::chrono::steady_clock::now();
    {
        std::lock_guard lock(mutex_);
        for (const auto& [key, r] : live_) {
            const Entry& e = r.entry;
            Accumulator& acc = by_tag[e.tag];
            acc.group.count += 1;
            acc.group.bytes += e.bytes;
            if (e.allocated_at < acc.oldest_at) {
                acc.oldest_at = e.allocated_at;
                acc.oldest_frames = e.frames;
            }
            report.count += 1;
            report.bytes += e.bytes;
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

}  // namespace outcore::alloc::detail
