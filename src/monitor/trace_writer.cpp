// Writing a recorded trace as Chrome Trace Event JSON (docs/tracing.md has the format):
// streamed through a 1 MiB buffer, never built as one document; to a temporary file
// renamed over the target once complete, so a reader never sees half a trace.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/monitor/trace.hpp"
#include "trace_internal.hpp"

#ifndef OUTCORE_VERSION_STRING
#define OUTCORE_VERSION_STRING "unknown"
#endif

namespace outcore::monitor {

namespace {

constexpr const char* kComponent = "trace";
constexpr std::size_t kFlushBytes = std::size_t{1} << 20;

std::filesystem::path temporary_for(const std::filesystem::path& file) {
    std::filesystem::path tmp = file;
    tmp += fmt::format(".{}.tmp", ::getpid());
    return tmp;
}

std::string_view tier_name(unsigned char tier) noexcept {
    switch (static_cast<Tier>(tier)) {
        case Tier::Device: return "device";
        case Tier::HostPinned:
        case Tier::Host: return "host";
        case Tier::Disk: return "disk";
    }
    return "unknown";
}

std::string_view memory_kind_name(unsigned char kind) noexcept {
    switch (static_cast<MemoryKind>(kind)) {
        case MemoryKind::Device: return "device";
        case MemoryKind::HostPinned: return "host-pinned";
        case MemoryKind::HostCached: return "host-cached";
    }
    return "unknown";
}

std::string_view swap_name(unsigned char kind) noexcept {
    switch (static_cast<SwapKind>(kind)) {
        case SwapKind::SwapIn: return "swap_in";
        case SwapKind::SwapOut: return "swap_out";
        case SwapKind::Evict: return "evict";
        case SwapKind::WriteBack: return "write_back";
    }
    return "unknown";
}

}  // namespace

/// Where the JSON goes: a string (to_json), or a file flushed every kFlushBytes.
class TraceRecorder::Sink {
public:
    Sink(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {
        buffer_.reserve(kFlushBytes);
    }
    Sink() = default;

    std::string& buffer() noexcept { return buffer_; }
    void maybe_flush() {
        if (file_ != nullptr && buffer_.size() >= kFlushBytes) flush();
    }
    void flush() {
        if (file_ == nullptr || buffer_.empty()) return;
        if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
            throw IoError(kComponent, fmt::format("cannot write the trace to {}", path_), errno, path_,
                          "write");
        }
        buffer_.clear();
    }

    /// Appends ts (or dur) nanoseconds as microseconds with three decimals.
    void micros(std::int64_t ns) {
        const std::uint64_t v = ns > 0 ? static_cast<std::uint64_t>(ns) : 0;
        fmt::format_to(std::back_inserter(buffer_), "{}.{:03}", v / 1000, v % 1000);
    }
    /// Appends `text` as a JSON string, quotes included.
    void string(std::string_view text) {
        buffer_.push_back('"');
        for (const char ch : text) {
            const auto c = static_cast<unsigned char>(ch);
            if (c == '"' || c == '\\') {
                buffer_.push_back('\\');
                buffer_.push_back(ch);
            } else if (c < 0x20) {
                fmt::format_to(std::back_inserter(buffer_), "\\u{:04x}", c);
            } else {
                buffer_.push_back(ch);
            }
        }
        buffer_.push_back('"');
    }
    template <typename... Args>
    void print(fmt::format_string<Args...> f, Args&&... args) {
        fmt::format_to(std::back_inserter(buffer_), f, std::forward<Args>(args)...);
    }

private:
    std::FILE* file_ = nullptr;
    std::string path_;
    std::string buffer_;
};

std::uint64_t TraceRecorder::write_to(Sink& out) const {
    std::lock_guard lock(mutex_);

    // Track names: a queue name alone, or prefixed by its device when several appear.
    std::set<std::uint64_t> devices;
    for (const TrackKey& t : tracks_) {
        if (t.device_id != detail::kOwnTrack) devices.insert(t.device_id);
    }
    auto track_name = [&](const TrackKey& t) {
        if (t.device_id == detail::kOwnTrack || devices.size() <= 1) return t.queue;
        return fmt::format("device {} {}", t.device_id, t.queue);
    };

    // Time order; the origin puts the first event at ≥ 0.
    std::vector<std::uint32_t> order(records_.size());
    std::iota(order.begin(), order.end(), 0U);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
        return records_[x].begin_ns < records_[y].begin_ns;
    });
    std::int64_t origin = start_ns_;
    if (!order.empty()) origin = std::min(origin, records_[order.front()].begin_ns);

    out.print(R"({{"displayTimeUnit":"ns","otherData":{{"producer":"outcore","version":)");
    out.string(OUTCORE_VERSION_STRING);
    out.print(R"(,"trace_format":1,"dropped_events":{}}},"traceEvents":[)", dropped_);
    out.print(R"({{"ph":"M","name":"process_name","pid":1,"tid":0,"ts":0,"args":{{"name":"outcore"}}}})");
    for (std::size_t i = 0; i < tracks_.size(); ++i) {
        out.print(R"(,{{"ph":"M","name":"thread_name","pid":1,"tid":{},"ts":0,"args":{{"name":)", i + 1);
        out.string(track_name(tracks_[i]));
        out.print("}}}}");
    }

    // Per track, the end of its last event: a later begin is clamped to it.
    std::vector<std::int64_t> track_end(tracks_.size(), std::numeric_limits<std::int64_t>::min());
    std::uint64_t written = 0;
    for (const std::uint32_t index : order) {
        const Record& r = records_[index];
        const std::uint32_t tid = r.track + 1;
        std::int64_t begin = r.begin_ns;
        std::int64_t end = r.end_ns;
        if (r.type == Type::Op || r.type == Type::Swap) {
            begin = std::max(begin, track_end[r.track]);
            end = std::max(end, begin);
            track_end[r.track] = end;
        }
        out.print(",\n{{");
        // An X event's times, after its "ts": key.
        auto times = [&] {
            out.micros(begin - origin);
            out.print(R"(,"dur":)");
            out.micros(end - begin);
        };
        switch (r.type) {
            case Type::Op: {
                const auto kind = static_cast<OpKind>(r.kind);
                if (kind == OpKind::Kernel) {
                    const std::string_view name = r.name == 0 ? "compute" : std::string_view(names_[r.name]);
                    out.print(R"("ph":"X","cat":"kernel","name":)");
                    out.string(name);
                    out.print(R"(,"pid":1,"tid":{},"ts":)", tid);
                    times();
                    out.print(R"(,"args":{{}})");
                } else if (kind == OpKind::HostRead || kind == OpKind::HostWrite) {
                    out.print(R"("ph":"X","cat":"host","name":"{}","pid":1,"tid":{},"ts":)",
                              kind == OpKind::HostRead ? "read" : "write", tid);
                    times();
                    out.print(R"(,"args":{{"bytes":{}}})", r.a);
                } else {
                    const char* name = kind == OpKind::Upload     ? "upload"
                                       : kind == OpKind::Download ? "download"
                                                                  : "copy";
                    const char* direction = kind == OpKind::Upload     ? "h2d"
                                            : kind == OpKind::Download ? "d2h"
                                                                       : "d2d";
                    out.print(R"("ph":"X","cat":"copy","name":"{}","pid":1,"tid":{},"ts":)", name, tid);
                    times();
                    out.print(R"(,"args":{{"bytes":{},"direction":"{}"}})", r.a, direction);
                }
                break;
            }
            case Type::Swap: {
                const bool instant = end == begin;
                out.print(R"("ph":"{}","cat":"swap","name":"{}","pid":1,"tid":{},"ts":)", instant ? "i" : "X",
                          swap_name(r.kind), tid);
                out.micros(begin - origin);
                if (instant) {
                    out.print(R"(,"s":"t")");
                } else {
                    out.print(R"(,"dur":)");
                    out.micros(end - begin);
                }
                out.print(R"(,"args":{{"from":"{}","to":"{}","bytes":{},"dirty":{}}})", tier_name(r.from),
                          tier_name(static_cast<unsigned char>(r.to & ~detail::kDirtyBit)), r.a,
                          (r.to & detail::kDirtyBit) != 0);
                break;
            }
            case Type::Allocate:
            case Type::Free: {
                out.print(R"("ph":"i","s":"t","cat":"alloc","name":"{}","pid":1,"tid":{},"ts":)",
                          r.type == Type::Allocate ? "allocate" : "free", tid);
                out.micros(begin - origin);
                out.print(R"(,"args":{{"kind":"{}","bytes":{})", memory_kind_name(r.kind), r.a);
                if (r.type == Type::Allocate) {
                    out.print(R"(,"tag":)");
                    out.string(names_[r.name]);
                }
                out.print("}}");
                break;
            }
            case Type::Resident:
                out.print(R"("ph":"C","name":"resident bytes","pid":1,"tid":0,"ts":)");
                out.micros(begin - origin);
                out.print(R"(,"args":{{"device":{},"host":{},"disk":{}}})", r.a, r.b, r.c);
                break;
            case Type::Budget:
                out.print(R"("ph":"C","name":"budget bytes","pid":1,"tid":0,"ts":)");
                out.micros(begin - origin);
                out.print(R"(,"args":{{)");
                if (r.a > 0) out.print(R"("device":{})", r.a);
                if (r.a > 0 && r.b > 0) out.print(",");
                if (r.b > 0) out.print(R"("host":{})", r.b);
                out.print("}}");
                break;
        }
        out.print("}}");
        ++written;
        out.maybe_flush();
    }
    out.print("\n]}}\n");
    out.flush();
    return written;
}

std::string TraceRecorder::to_json() const {
    flush_counters();
    Sink sink;
    (void)write_to(sink);
    return std::move(sink.buffer());
}

std::uint64_t TraceRecorder::write(const std::filesystem::path& file) const {
    flush_counters();
    const std::filesystem::path tmp = temporary_for(file);
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) {
        throw IoError(kComponent, fmt::format("cannot create the trace file {}", tmp.string()), errno,
                      tmp.string(), "open");
    }
    std::uint64_t written = 0;
    try {
        Sink sink(f, tmp.string());
        written = write_to(sink);
        if (std::fflush(f) != 0) {
            throw IoError(kComponent, fmt::format("cannot write the trace to {}", tmp.string()), errno,
                          tmp.string(), "write");
        }
    } catch (...) {
        std::fclose(f);
        std::remove(tmp.c_str());
        throw;
    }
    if (std::fclose(f) != 0) {
        const int e = errno;
        std::remove(tmp.c_str());
        throw IoError(kComponent, fmt::format("cannot close the trace file {}", tmp.string()), e,
                      tmp.string(), "close");
    }
    if (std::rename(tmp.c_str(), file.c_str()) != 0) {
        const int e = errno;
        std::remove(tmp.c_str());
        throw IoError(kComponent, fmt::format("cannot rename {} to {}", tmp.string(), file.string()), e,
                      file.string(), "rename");
    }
    return written;
}

namespace detail {

void check_writable(const std::filesystem::path& file) {
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec)) {
        throw IoError(kComponent, fmt::format("the trace file {} is a directory", file.string()), EISDIR,
                      file.string(), "open");
    }
    const std::filesystem::path tmp = temporary_for(file);
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) {
        const int e = errno;
        throw IoError(kComponent, fmt::format("cannot create the trace file {}", file.string()), e,
                      file.string(), "open");
    }
    std::fclose(f);
    std::remove(tmp.c_str());
}

}  // namespace detail
}  // namespace outcore::monitor
