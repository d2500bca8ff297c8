// examples/c/crawl.c, the dlopen host, run as a user would: it crawls a swarm of real
// libtorrent seeders on loopback and prints every torrent as a JSON line, once each.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "support/ports.hpp"
#include "support/subprocess.hpp"

using namespace std::chrono_literals;

TEST_CASE("the C example crawls libtorrent seeders through dlopen and prints each torrent once") {
    const int port = dhtc::test::unused_loopback_port(SOCK_DGRAM);
    const std::string options = R"({"port":)" + std::to_string(port) +
                                R"(,"bind_v4":"127.0.0.1","allow_private_addresses":true,"crawl":{"bootstrap":{"sources":[]}}})";
    dhtc::test::subprocess example({DHTC_C_EXAMPLE, "--lib", DHTC_LIBRARY, "--options", options, "--seconds", "90"});
    const auto workdir = std::filesystem::temp_directory_path() / ("dhtc-c-example-" + std::to_string(::getpid()));
    std::filesystem::remove_all(workdir);
    dhtc::test::subprocess swarm({"/usr/bin/python3", DHTC_LT_SWARM, "--bootstrap", "127.0.0.1:" + std::to_string(port),
                                  "--sessions", "2", "--torrents-per-session", "2", "--kinds", "v1,v2,hybrid,unicode",
                                  "--duration", "100", "--announce-interval", "10", "--base-ip", "127.0.60",
                                  "--workdir", workdir.string()});
    std::set<std::string> names;
    std::size_t lines = 0;
    const auto deadline = std::chrono::steady_clock::now() + 80s;
    while (names.size() < 4 && std::chrono::steady_clock::now() < deadline) {
        while (swarm.read_line(0ms)) {
        }
        const auto line = example.read_line(500ms);
        if (!line) continue;
        ++lines;
        const auto t = nlohmann::json::parse(*line);
        for (const char* key : {"schema", "info_hash", "name", "files", "total_size", "version", "peer", "discovered_at"})
            CHECK_MESSAGE(t.contains(key), key);
        names.insert(t.at("name").get<std::string>());
    }
    swarm.stop();
    CHECK(example.stop() == 0); // SIGTERM: a clean shutdown
    std::filesystem::remove_all(workdir);
    CHECK(names.size() == 4);
    CHECK(lines == names.size()); // each torrent printed once
}
