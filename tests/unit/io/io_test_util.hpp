// tests/unit/io/io_test_util.hpp — scratch directories and random data for the io tests.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/device/dtype.hpp"

namespace outcore::io::test {

/// A fresh directory under the system temp dir, removed with everything in it.
class ScratchDir {
public:
    ScratchDir() {
        std::string pattern = (std::filesystem::temp_directory_path() / "outcore-io-XXXXXX").string();
        std::vector<char> buf(pattern.begin(), pattern.end());
        buf.push_back('\0');
        if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = buf.data();
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }
    /// Names of the entries in the directory (to prove no temporary file was left).
    [[nodiscard]] std::vector<std::string> entries() const {
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(path_)) {
            names.push_back(e.path().filename().string());
        }
        return names;
    }

private:
    std::filesystem::path path_;
};

/// The whole content of a file ("" when it cannot be opened).
inline std::string read_file(const std::string& path) {
    std::string out;
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return out;
    char buf[1 << 16];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
    return out;
}

/// `count` random bytes (every dtype's bit patterns, NaNs included: compared bytewise).
inline std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t count) {
    std::vector<std::byte> out(count);
    std::uniform_int_distribution<int> byte(0, 255);
    for (std::byte& b : out) b = static_cast<std::byte>(byte(rng));
    return out;
}

inline const std::vector<DType>& npy_dtypes() {
    static const std::vector<DType> kAll = {DType::F32, DType::F64, DType::F16, DType::U16, DType::U8};
    return kAll;
}

/// Runs `f`, expects an Error of type E whose message is one line, starts with
/// "[component]" and contains every needle. Returns the message.
template <class E, class F>
std::string expect_one_line_error(F&& f, std::string_view component,
                                  std::initializer_list<std::string_view> needles) {
    try {
        f();
    } catch (const E& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        EXPECT_EQ(what.rfind("[" + std::string(component) + "]", 0), 0U) << what;
        for (std::string_view n : needles) {
            EXPECT_NE(what.find(n), std::string::npos) << "'" << n << "' not in: " << what;
        }
        return what;
    } catch (const std::exception& e) {
        ADD_FAILURE() << "wrong exception type: " << e.what();
        return {};
    }
    ADD_FAILURE() << "no exception";
    return {};
}

}  // namespace outcore::io::test
