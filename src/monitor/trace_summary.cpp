// src/monitor/trace_summary.cpp — reading a Chrome trace once, streaming, into a
// TraceSummary. nlohmann-json's callback parser hands us each element of traceEvents
// as it completes; we keep a compact Span for timed events and discard the element,
// so memory is about 40 bytes per event, not the whole document.
#include "outcore/monitor/trace_summary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/monitor/intervals.hpp"

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#define OUTCORE_TRACE_JSON 1
#else
#define OUTCORE_TRACE_JSON 0
#endif

namespace outcore::monitor {
namespace {

constexpr std::string_view kComponent = "trace";

#if OUTCORE_TRACE_JSON
using Json = nlohmann::json;
constexpr double kNsPerUs = 1000.0;
constexpr std::size_t kMaxBins = 1000000;
// |ts| and dur up to this (in µs, about 34 days) keep ts + dur and
// the span from the first event to the last within int64 nanoseconds.
constexpr double kMaxAbsUs = 3e15;

enum class SpanKind : unsigned char { Copy, Kernel, Host, Other };

// One "X" event, compactly.
struct Span {
    std::int64_t begin_ns = 0;
    std::int64_t end_ns = 0;
    std::uint64_t bytes = 0;
    std::uint32_t track = 0;
    SpanKind kind = SpanKind::Other;
    std::uint8_t direction = 0;
};

// The index of the item whose `field` is `name`, appended when missing (few items).
template <typename T>
std::size_t index_of(std::vector<T>& items, std::string T::*field, std::string_view name) {
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (items[i].*field == name) return i;
    }
    items.emplace_back();
    items.back().*field = std::string(name);
    return items.size() - 1;
}

const Json* member(const Json& object, const char* key) {
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

std::string_view string_member(const Json& object, const char* key) {
    const Json* v = member(object, key);
    return v != nullptr && v->is_string() ? std::string_view(v->get_ref<const std::string&>())
                                          : std::string_view();
}

class Collector {
public:
    explicit Collector(std::string_view name) : name_(name) {
        for (const char* d : {"h2d", "d2h", "d2d"}) direction_names_.emplace_back(d);
        for (const char* t : {"device", "host", "disk"}) index_of(tiers_, &TierSummary::tier, t);
    }

    void on_element(const Json& e) {
        ++event_count_;
        if (!e.is_object()) {
            ++unknown_;
            return;
        }
        const std::string_view ph = string_member(e, "ph");
        const std::string_view cat = string_member(e, "cat");
        const std::string_view name = string_member(e, "name");
        if (ph == "M") {
            if (name == "thread_name") {
                const Json* args = member(e, "args");
                if (args != nullptr && args->is_object()) {
                    track_names_[tid_of(e)] = std::string(string_member(*args, "name"));
                }
                (void)track(tid_of(e));
            }
        } else if (ph == "X") {
            on_span(e, cat, name);
        } else if (ph == "i" || ph == "I") {
            on_instant(e, cat, name);
        } else if (ph == "C") {
            on_counter(e, name);
        } else {
            ++unknown_;
        }
    }

    void on_other_data(const Json& o) {
        summary_.producer = std::string(string_member(o, "producer"));
        summary_.version = std::string(string_member(o, "version"));
        if (const Json* f = member(o, "trace_format"); f != nullptr && f->is_number_integer()) {
            summary_.trace_format = f->get<std::int64_t>();
        }
        if (const Json* d = member(o, "dropped_events"); d != nullptr && d->is_number_unsigned()) {
            summary_.dropped_events = d->get<std::uint64_t>();
        }
    }

    [[nodiscard]] std::uint64_t event_count() const noexcept { return event_count_; }
    TraceSummary finish(const SummaryOptions& options);

private:
    [[noreturn]] void malformed(const Json& e, std::string_view what) const {
        throw CorruptionError(
            kComponent, fmt::format("{}: event {} (ph \"{}\", name \"{}\"): {}", name_, event_count_ - 1,
                                    string_member(e, "ph"), string_member(e, "name"), what));
    }

    // A time field in µs, as nanoseconds.
    std::int64_t time_ns(const Json& e, const char* key) const {
        const Json* v = member(e, key);
        if (v == nullptr || !v->is_number())
            malformed(e, fmt::format("\"{}\" is missing or not a number", key));
        const double us = v->get<double>();
        if (!std::isfinite(us) || std::fabs(us) > kMaxAbsUs) {
            malformed(e, fmt::format("\"{}\" is out of range ({})", key, us));
        }
        return std::llround(us * kNsPerUs);
    }

    std::uint64_t bytes_arg(const Json& e) const {
        const Json* args = member(e, "args");
        if (args == nullptr || !args->is_object()) return 0;
        const Json* b = member(*args, "bytes");
        if (b == nullptr) return 0;
        if (b->is_number_unsigned()) return b->get<std::uint64_t>();
        if (b->is_number_float() && b->get<double>() >= 0 && b->get<double>() < 1.8e19) {
            return static_cast<std::uint64_t>(b->get<double>());
        }
        malformed(e, "\"args.bytes\" is not a non-negative number");
    }

    static std::int64_t tid_of(const Json& e) {
        const Json* t = member(e, "tid");
        return t != nullptr && t->is_number_integer() ? t->get<std::int64_t>() : 0;
    }

    std::uint32_t track(std::int64_t tid) {
        auto [it, inserted] = track_of_.try_emplace(tid, static_cast<std::uint32_t>(track_tids_.size()));
        if (inserted) {
            track_tids_.push_back(tid);
            track_events_.push_back(0);
            track_bytes_.push_back(0);
        }
        return it->second;
    }

    void note_time(std::int64_t begin_ns, std::int64_t end_ns) noexcept {
        first_ns_ = std::min(first_ns_, begin_ns);
        last_ns_ = std::max(last_ns_, end_ns);
    }

    std::uint8_t direction(std::string_view d) {
        for (std::size_t i = 0; i < direction_names_.size(); ++i) {
            if (direction_names_[i] == d) return static_cast<std::uint8_t>(i);
        }
        if (direction_names_.size() >= 255) return 254;  // absurd trace: lump the rest together
        direction_names_.emplace_back(d);
        return static_cast<std::uint8_t>(direction_names_.size() - 1);
    }

    void count_swap(std::string_view name, std::uint64_t bytes) {
        SwapSummary& s = summary_.swaps[index_of(summary_.swaps, &SwapSummary::name, name)];
        ++s.count;
        s.bytes += bytes;
    }

    void on_span(const Json& e, std::string_view cat, std::string_view name) {
        Span s;
        s.begin_ns = time_ns(e, "ts");
        const std::int64_t dur = time_ns(e, "dur");
        if (dur < 0) malformed(e, "\"dur\" is negative");
        s.end_ns = s.begin_ns + dur;
        s.track = track(tid_of(e));
        ++track_events_[s.track];
        note_time(s.begin_ns, s.end_ns);
        if (cat == "copy") {
            s.kind = SpanKind::Copy;
            s.bytes = bytes_arg(e);
            std::string_view d;
            if (const Json* args = member(e, "args"); args != nullptr && args->is_object()) {
                d = string_member(*args, "direction");
            }
            if (d.empty())
                d = name == "upload"     ? "h2d"
                    : name == "download" ? "d2h"
                    : name == "copy"     ? "d2d"
                                         : "unknown";
            s.direction = direction(d);
        } else if (cat == "kernel") {
            s.kind = SpanKind::Kernel;
            ++summary_.kernel_count;
        } else if (cat == "host") {
            s.kind = SpanKind::Host;  // a reader or writer thread's fill or drain
            s.bytes = bytes_arg(e);
        } else if (cat == "swap") {
            count_swap(name, bytes_arg(e));
        } else {
            ++unknown_;  // still busy time on its track
        }
        if (s.kind == SpanKind::Copy || s.kind == SpanKind::Host) track_bytes_[s.track] += s.bytes;
        spans_.push_back(s);
    }

    void on_instant(const Json& e, std::string_view cat, std::string_view name) {
        const std::int64_t t = time_ns(e, "ts");
        note_time(t, t);
        ++track_events_[track(tid_of(e))];
        if (cat == "alloc" && name == "allocate") {
            ++summary_.allocation_count;
            summary_.allocated_bytes += bytes_arg(e);
        } else if (cat == "alloc" && name == "free") {
            ++summary_.free_count;
        } else if (cat == "swap") {
            count_swap(name, bytes_arg(e));
        } else {
            ++unknown_;
        }
    }

    void on_counter(const Json& e, std::string_view name) {
        const bool resident = name == "resident bytes";
        if (!resident && name != "budget bytes") {
            ++unknown_;
            return;
        }
        const std::int64_t t = time_ns(e, "ts");
        note_time(t, t);
        const Json* args = member(e, "args");
        if (args == nullptr || !args->is_object()) return;
        for (const auto& [tier, value] : args->items()) {
            if (!value.is_number()) continue;  // the format has numbers only; skip anything else
            TierSummary& ts = tiers_[index_of(tiers_, &TierSummary::tier, tier)];
            // Clamped, so that converting the series to bytes stays defined on nonsense values.
            const double v = std::clamp(value.get<double>(), 0.0, 1.8e19);
            (resident ? ts.resident : ts.budget).push_back({static_cast<double>(t) * 1e-9, v});
        }
    }

    std::string name_;
    TraceSummary summary_;
    std::uint64_t event_count_ = 0;
    std::uint64_t unknown_ = 0;
    std::int64_t first_ns_ = std::numeric_limits<std::int64_t>::max();
    std::int64_t last_ns_ = std::numeric_limits<std::int64_t>::min();
    std::vector<Span> spans_;
    std::vector<std::string> direction_names_;
    std::vector<TierSummary> tiers_;
    std::unordered_map<std::int64_t, std::uint32_t> track_of_;
    std::vector<std::int64_t> track_tids_;
    std::vector<std::uint64_t> track_events_;
    std::vector<std::uint64_t> track_bytes_;  // copies' and host spans' args.bytes
    std::map<std::int64_t, std::string> track_names_;
};

// Adds `weight` × (the share of [begin, end) in each bin) to `bins`; an empty
// interval lands wholly in the bin holding `begin`.
void spread(std::vector<double>& bins, double bin_ns, double begin, double end, double weight) {
    const auto last_bin = static_cast<std::ptrdiff_t>(bins.size()) - 1;
    auto bin_of = [&](double t) {
        return std::clamp<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(t / bin_ns), 0, last_bin);
    };
    if (end <= begin) {
        bins[static_cast<std::size_t>(bin_of(begin))] += weight;
        return;
    }
    const double length = end - begin;
    for (std::ptrdiff_t k = bin_of(begin); k <= bin_of(end); ++k) {
        const double lo = std::max(begin, static_cast<double>(k) * bin_ns);
        const double hi = k == last_bin ? end : std::min(end, static_cast<double>(k + 1) * bin_ns);
        if (hi > lo) bins[static_cast<std::size_t>(k)] += weight * (hi - lo) / length;
    }
}

double seconds(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }

TraceSummary Collector::finish(const SummaryOptions& options) {
    TraceSummary& s = summary_;
    s.event_count = event_count_;
    s.unknown_event_count = unknown_;
    if (first_ns_ > last_ns_) first_ns_ = last_ns_ = 0;  // no timed event
    const std::int64_t wall_ns = last_ns_ - first_ns_;
    s.begin_seconds = seconds(first_ns_);
    s.end_seconds = seconds(last_ns_);
    s.wall_seconds = seconds(wall_ns);
    s.bin_count = wall_ns > 0 ? std::max<std::size_t>(1, options.bins) : 0;
    const double bin_ns =
        s.bin_count > 0 ? static_cast<double>(wall_ns) / static_cast<double>(s.bin_count) : 0;
    s.bin_seconds = bin_ns * 1e-9;
    auto rel = [&](std::int64_t t) { return static_cast<double>(t - first_ns_); };

    // Interval sets: per track (all spans, copies), per direction, all kernels.
    const std::size_t track_count = track_tids_.size();
    std::vector<std::vector<Interval>> track_all(track_count), track_copies(track_count);
    std::vector<std::vector<Interval>> by_direction(direction_names_.size());
    std::vector<Interval> kernels;
    s.directions.resize(direction_names_.size());
    for (std::size_t d = 0; d < direction_names_.size(); ++d) {
        s.directions[d].direction = direction_names_[d];
        s.directions[d].bytes_per_second_bins.assign(s.bin_count, 0.0);
    }
    for (const Span& span : spans_) {
        const Interval i{span.begin_ns, span.end_ns};
        track_all[span.track].push_back(i);
        if (span.kind == SpanKind::Kernel) kernels.push_back(i);
        if (span.kind != SpanKind::Copy) continue;
        track_copies[span.track].push_back(i);
        by_direction[span.direction].push_back(i);
        DirectionSummary& d = s.directions[span.direction];
        d.bytes += span.bytes;
        ++d.count;
        if (s.bin_count > 0) {
            spread(d.bytes_per_second_bins, bin_ns, rel(span.begin_ns), rel(span.end_ns),
                   static_cast<double>(span.bytes));
        }
    }
    spans_ = {};
    merge_intervals(kernels);
    const std::int64_t compute_ns = busy_ns(kernels);
    std::int64_t transfer_ns = 0;
    std::int64_t hidden_ns = 0;
    for (std::vector<Interval>& copies : track_copies) {
        merge_intervals(copies);
        transfer_ns += busy_ns(copies);
        hidden_ns += overlap_ns(copies, kernels);
    }
    s.compute_busy_seconds = seconds(compute_ns);
    s.transfer_seconds = seconds(transfer_ns);
    s.exposed_transfer_seconds = seconds(transfer_ns - hidden_ns);
    s.hidden_transfer_fraction = hidden_fraction(hidden_ns, transfer_ns);

    for (std::size_t d = 0; d < s.directions.size(); ++d) {
        DirectionSummary& ds = s.directions[d];
        merge_intervals(by_direction[d]);
        ds.busy_seconds = seconds(busy_ns(by_direction[d]));
        const auto bytes = static_cast<double>(ds.bytes);
        ds.busy_bytes_per_second = ds.busy_seconds > 0 ? bytes / ds.busy_seconds : 0;
        ds.wall_bytes_per_second = s.wall_seconds > 0 ? bytes / s.wall_seconds : 0;
        for (double& b : ds.bytes_per_second_bins) b /= s.bin_seconds;
    }

    std::vector<std::uint32_t> order(track_count);
    for (std::uint32_t t = 0; t < track_count; ++t) order[t] = t;
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return track_tids_[a] < track_tids_[b]; });
    for (std::uint32_t t : order) {
        TrackSummary ts;
        ts.tid = track_tids_[t];
        auto name = track_names_.find(ts.tid);
        ts.name = name != track_names_.end() && !name->second.empty() ? name->second
                                                                      : fmt::format("tid {}", ts.tid);
        ts.event_count = track_events_[t];
        merge_intervals(track_all[t]);
        const std::int64_t busy = busy_ns(track_all[t]);
        ts.busy_seconds = seconds(busy);
        ts.busy_fraction = wall_ns > 0 ? static_cast<double>(busy) / static_cast<double>(wall_ns) : 0;
        ts.bytes = track_bytes_[t];
        ts.busy_bytes_per_second = busy > 0 ? static_cast<double>(ts.bytes) / seconds(busy) : 0;
        ts.busy_fraction_bins.assign(s.bin_count, 0.0);
        if (s.bin_count > 0) {
            for (const Interval& i : track_all[t]) {
                spread(ts.busy_fraction_bins, bin_ns, rel(i.begin_ns), rel(i.end_ns),
                       rel(i.end_ns) - rel(i.begin_ns));
            }
            for (double& f : ts.busy_fraction_bins) f = std::min(1.0, f / bin_ns);
        }
        s.tracks.push_back(std::move(ts));
    }

    for (TierSummary& t : tiers_) {
        for (const CounterPoint& p : t.resident) {
            if (p.value > static_cast<double>(t.peak_bytes) || (t.peak_bytes == 0 && p.value > 0)) {
                t.peak_bytes = static_cast<std::uint64_t>(p.value);
                t.peak_time_seconds = p.time_seconds;
            }
        }
        for (const CounterPoint& p : t.budget)
            t.budget_bytes = std::max(t.budget_bytes, static_cast<std::uint64_t>(p.value));
    }
    s.tiers = std::move(tiers_);
    std::sort(s.swaps.begin(), s.swaps.end(),
              [](const SwapSummary& a, const SwapSummary& b) { return a.name < b.name; });
    return std::move(s);
}

// Where in the document the parser is.
struct ParseState {
    enum class Top { None, Object, Array } top = Top::None;
    std::string key;          // the current key of the top-level object
    bool in_events = false;   // inside traceEvents (or a top-level array)
    bool saw_events = false;  // a traceEvents array was found
    [[nodiscard]] int event_depth() const noexcept { return top == Top::Array ? 1 : 2; }
};

template <typename Input>
TraceSummary summarize(Input&& input, const SummaryOptions& options, std::string_view name) {
    if (options.bins > kMaxBins) {
        throw UsageError(kComponent, fmt::format("{} bins requested, at most {}", options.bins, kMaxBins));
    }
    Collector collector(name);
    ParseState st;
    using Event = Json::parse_event_t;
    auto callback = [&](int depth, Event event, Json& value) -> bool {
        switch (event) {
            case Event::object_start:
                if (depth == 0) st.top = ParseState::Top::Object;
                return true;
            case Event::array_start:
                if (depth == 0) {
                    st.top = ParseState::Top::Array;  // the JSON Array Format: just the events
                    st.in_events = st.saw_events = true;
                } else if (depth == 1 && st.top == ParseState::Top::Object && st.key == "traceEvents") {
                    st.in_events = st.saw_events = true;
                }
                return true;
            case Event::key:
                if (depth == 1 && st.top == ParseState::Top::Object) st.key = value.get<std::string>();
                return true;
            case Event::object_end:
            case Event::array_end:
            case Event::value:
                if (st.in_events && depth == st.event_depth()) {
                    collector.on_element(value);
                    return false;  // processed: do not keep it
                }
                if (event == Event::array_end && st.in_events && depth == st.event_depth() - 1)
                    st.in_events = false;
                if (event == Event::object_end && depth == 1 && st.key == "otherData") {
                    collector.on_other_data(value);
                    return false;
                }
                return depth != 1 || event != Event::value;  // top-level scalars are not needed
        }
        return true;
    };
    try {
        const Json rest = Json::parse(std::forward<Input>(input), callback, /*allow_exceptions=*/true);
        static_cast<void>(rest);  // what is left once events were consumed: unused
    } catch (const Json::parse_error& e) {
        std::string what = e.what();
        if (auto p = what.find("] "); p != std::string::npos) what.erase(0, p + 2);
        if (st.saw_events) {
            throw CorruptionError(
                kComponent, fmt::format("{}: malformed or truncated trace after {} events (byte {}): {}",
                                        name, collector.event_count(), e.byte, what));
        }
        throw UsageError(kComponent, fmt::format("{} is not a trace: not JSON ({})", name, what));
    }
    if (!st.saw_events) {
        throw UsageError(
            kComponent,
            fmt::format("{} is not a trace: JSON without a \"traceEvents\" array (expected a Chrome "
                        "trace as `outcore ... --trace` writes)",
                        name));
    }
    return collector.finish(options);
}
#else
template <typename Input>
TraceSummary summarize(Input&& /*input*/, const SummaryOptions& /*options*/, std::string_view name) {
    throw UsageError(kComponent,
                     fmt::format("cannot read {}: outcore was built without nlohmann-json", name));
}
#endif

}  // namespace

DirectionSummary TraceSummary::direction(std::string_view d) const {
    for (const DirectionSummary& x : directions) {
        if (x.direction == d) return x;
    }
    DirectionSummary z;
    z.direction = std::string(d);
    return z;
}

TierSummary TraceSummary::tier(std::string_view t) const {
    for (const TierSummary& x : tiers) {
        if (x.tier == t) return x;
    }
    TierSummary z;
    z.tier = std::string(t);
    return z;
}

SwapSummary TraceSummary::swap(std::string_view n) const {
    for (const SwapSummary& x : swaps) {
        if (x.name == n) return x;
    }
    SwapSummary z;
    z.name = std::string(n);
    return z;
}

TraceSummary summarize_trace_text(std::string_view json, const SummaryOptions& options,
                                  std::string_view name) {
    return summarize(json, options, name);
}

TraceSummary summarize_trace(const std::filesystem::path& path, const SummaryOptions& options) {
    const std::string name = path.string();
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        throw UsageError(kComponent, fmt::format("{} is a directory, not a trace file", name));
    }
    std::ifstream in;
    std::vector<char> buffer(std::size_t{1} << 20);
    in.rdbuf()->pubsetbuf(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    errno = 0;
    in.open(path, std::ios::binary);
    if (!in) {
        const int err = errno != 0 ? errno : ENOENT;
        throw IoError(kComponent, fmt::format("cannot open {}: {}", name, std::strerror(err)), err, name,
                      "open");
    }
    if (in.peek() == std::char_traits<char>::eof()) {
        throw UsageError(kComponent, fmt::format("{} is empty, not a trace", name));
    }
    TraceSummary s = summarize(in, options, name);
    if (in.bad()) {
        const int err = errno != 0 ? errno : EIO;
        throw IoError(kComponent, fmt::format("cannot read {}: {}", name, std::strerror(err)), err, name,
                      "read");
    }
    return s;
}

}  // namespace outcore::monitor
