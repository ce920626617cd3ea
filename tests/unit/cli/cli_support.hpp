// tests/unit/cli/cli_support.hpp — running the built `outcore` binary from tests: its
// exit code, stdout and stderr, with a deadline (a hang fails the test), in a scratch
// directory removed afterwards.
//
//   CliRun r = run_cli({"gemm", "--m", "8", "--n", "8", "--k", "8", "--verify"});
//   EXPECT_EQ(r.exit_code, 0) << r.err;
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;  // NOLINT(readability-identifier-naming): POSIX

namespace outcore::cli::test {

/// A fresh directory under the system temp dir, removed with everything in it.
class Scratch {
public:
    Scratch() {
        std::string pattern = (std::filesystem::temp_directory_path() / "outcore-cli-XXXXXX").string();
        std::vector<char> buf(pattern.begin(), pattern.end());
        buf.push_back('\0');
        if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = buf.data();
    }
    ~Scratch() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }
    [[nodiscard]] const std::filesystem::path& path() const { return path_; }
    /// Entry names, to show no temporary file was left behind.
    [[nodiscard]] std::vector<std::string> entries() const {
        std::vector<std::string> out;
        for (const auto& e : std::filesystem::directory_iterator(path_))
            out.push_back(e.path().filename().string());
        return out;
    }

private:
    std::filesystem::path path_;
};

struct CliRun {
    int exit_code = -1;      ///< the process's exit status; 128 + signal when killed
    bool signaled = false;   ///< died of a signal (a crash)
    bool timed_out = false;  ///< killed at the deadline (a hang)
    std::string out;
    std::string err;
};

inline std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// Runs OUTCORE_CLI_PATH with `args`, stdout and stderr to files in `scratch`.
inline CliRun run_cli(const Scratch& scratch, const std::vector<std::string>& args,
                      std::chrono::seconds deadline = std::chrono::seconds(120)) {
    const std::string out_path = scratch.file(".stdout");
    const std::string err_path = scratch.file(".stderr");
    std::vector<std::string> argv_s{OUTCORE_CLI_PATH};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("posix_spawn of " + argv_s[0] + " failed");

    CliRun r;
    const auto until = std::chrono::steady_clock::now() + deadline;
    int status = 0;
    while (true) {
        const pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (std::chrono::steady_clock::now() > until) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            r.timed_out = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r.signaled = !r.timed_out;
        r.exit_code = 128 + WTERMSIG(status);
    }
    r.out = read_all(out_path);
    r.err = read_all(err_path);
    std::filesystem::remove(out_path);
    std::filesystem::remove(err_path);
    return r;
}

/// A failure is one line on stderr: "outcore: error: ...\n".
inline ::testing::AssertionResult is_one_line_error(const CliRun& r) {
    if (r.err.rfind("outcore: error: ", 0) != 0) {
        return ::testing::AssertionFailure() << "stderr does not start with 'outcore: error: ': " << r.err;
    }
    const auto newlines = std::count(r.err.begin(), r.err.end(), '\n');
    if (newlines != 1 || r.err.back() != '\n') {
        return ::testing::AssertionFailure() << "stderr is not exactly one line: " << r.err;
    }
    return ::testing::AssertionSuccess();
}

}  // namespace outcore::cli::test
