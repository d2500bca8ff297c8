package dhtcrawler_test

// BEP-33 through the Go binding, against real libtorrent: a torrent with 6 seeders and 4
// leechers in a DHT of libtorrent sessions (tests/lt/lt_scrape_swarm.py under Debian's
// /usr/bin/python3). The crawler is their bootstrap; RequestScrape's Scrape event must
// estimate both within one. Skipped without python3-libtorrent.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/dhtcrawler/dhtcrawler/go/dhtcrawler"
)

func near(estimate uint64, truth int) bool {
	d := int(estimate) - truth
	return d >= -1 && d <= 1
}

func TestRequestScrapeArguments(t *testing.T) {
	c, err := dhtcrawler.New(loopbackOptions(), dhtcrawler.WithScrapes(func(dhtcrawler.Scrape) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.RequestScrape("abc"); !errors.Is(err, dhtcrawler.ErrInvalidArgument) {
		t.Fatalf("a short hash: got %v", err)
	}
	if err := c.RequestScrape(fmt.Sprintf("%040x", 7)); err != nil {
		t.Fatalf("before start: %v", err)
	}
	_ = c.Shutdown()
	if err := c.RequestScrape(fmt.Sprintf("%040x", 7)); !errors.Is(err, dhtcrawler.ErrState) {
		t.Fatalf("after shutdown: got %v", err)
	}
}

// A scrape the crawler cannot start (no node known: no bootstrap) still ends, after
// crawl.scrape.timeout_secs, with zero responders and TimedOut.
func TestScrapeWithNoNodeToAskTimesOut(t *testing.T) {
	options := loopbackOptions()
	options["crawl"].(map[string]any)["scrape"] = map[string]any{"timeout_secs": 1}
	scrapes := make(chan dhtcrawler.Scrape, 4)
	c := running(t, options, dhtcrawler.WithScrapes(func(s dhtcrawler.Scrape) { scrapes <- s }))
	hash := fmt.Sprintf("%040x", 0x5c)
	if err := c.RequestScrape(hash); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-scrapes:
		if s.InfoHash != hash || !s.TimedOut || s.Responders != 0 || s.Queried != 0 || s.At.IsZero() {
			t.Errorf("scrape %+v", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the scrape never ended")
	}
}

func TestScrapeOfALibtorrentSwarm(t *testing.T) {
	const seeders, leechers = 6, 4
	if exec.Command("/usr/bin/python3", "-c", "import libtorrent").Run() != nil {
		t.Skip("/usr/bin/python3 with python3-libtorrent is not installed")
	}
	scrapes := make(chan dhtcrawler.Scrape, 64)
	c := running(t, loopbackOptions(), dhtcrawler.WithScrapes(func(s dhtcrawler.Scrape) { scrapes <- s }))
	script, _ := filepath.Abs("../../tests/lt/lt_scrape_swarm.py")
	cmd := exec.Command("/usr/bin/python3", script, "--bootstrap", fmt.Sprintf("127.0.0.1:%d", udpPort(t, c)),
		"--seeders", fmt.Sprint(seeders), "--leechers", fmt.Sprint(leechers), "--nodes", "8", "--base", "130",
		"--duration", "150", "--workdir", t.TempDir())
	stdin, _ := cmd.StdinPipe() // closed at the end: the swarm stops
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	ready := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			var ev map[string]any
			if json.Unmarshal(lines.Bytes(), &ev) == nil && ev["event"] == "ready" {
				ready <- ev["info_hash"].(string)
			}
		}
	}()
	var infoHash string
	select {
	case infoHash = <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("the libtorrent swarm did not get ready")
	}
	var last *dhtcrawler.Scrape
	request := time.After(10 * time.Second) // the announces land first
	deadline := time.After(100 * time.Second)
	for last == nil || last.Responders == 0 || !near(last.Seeders, seeders) || !near(last.Leechers, leechers) {
		select {
		case <-request:
			if err := c.RequestScrape(infoHash); err != nil {
				t.Fatal(err)
			}
			request = time.After(5 * time.Second)
		case s := <-scrapes:
			if s.InfoHash != infoHash || s.At.IsZero() {
				t.Fatalf("unexpected scrape %+v", s)
			}
			last = &s
		case <-deadline:
			t.Fatalf("no right estimate in time; last %+v", last)
		}
	}
	t.Logf("scrape: %d seeders, %d leechers, %d responders of %d queried", last.Seeders, last.Leechers,
		last.Responders, last.Queried)
}
