// A child process for integration tests (the libtorrent swarm, the test network): its
// stdout read line by line with a deadline, its stdin held open so closing it tells the
// child to stop, and a destructor that always reaps it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dhtc::test {

class subprocess {
public:
    /// Starts `argv[0]` with `argv` (searched on PATH when it has no slash). stderr is
    /// inherited, so the child's logs appear in the test output.
    explicit subprocess(const std::vector<std::string>& argv);
    ~subprocess();
    subprocess(const subprocess&) = delete;
    subprocess& operator=(const subprocess&) = delete;

    /// The next line of stdout (without the newline), or nothing when `timeout` passes or
    /// the child closed stdout.
    std::optional<std::string> read_line(std::chrono::milliseconds timeout);
    /// Closes the child's stdin, then waits up to `grace` for it to exit before SIGTERM and,
    /// after another `grace`, SIGKILL. Returns the exit status (-1 if killed by a signal).
    int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));
    bool running();
    int pid() const noexcept { return pid_; }

private:
    int pid_ = -1;
    int stdin_fd_ = -1;
    int stdout_fd_ = -1;
    std::string buffer_;
    bool eof_ = false;
    std::optional<int> status_;
};

} // namespace dhtc::test
