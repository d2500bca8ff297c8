package dhtcrawler_test

// A crawl of the loopback test network (dhtcrawler-testnet): a clear majority of its
// torrents must arrive, each once, valid against docs/torrent.schema.json, equal to the network's truth, with
// the hashes of the raw info dict it came with.

import (
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dhtcrawler/dhtcrawler/go/dhtcrawler"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const testnetEnv = "DHTCRAWLER_TESTNET"

// startTestnet runs the network and returns its bootstrap endpoint and truth file. It is
// stopped (SIGTERM, then killed) when the test ends, and stops by itself after duration.
func startTestnet(t *testing.T, torrents int) (bootstrap, truthPath string) {
	t.Helper()
	program := os.Getenv(testnetEnv)
	if program == "" {
		t.Fatalf("%s is not set: point it at the dhtcrawler-testnet program "+
			"(built in <build>/tools/testnet/ by CMake)", testnetEnv)
	}
	truthPath = filepath.Join(t.TempDir(), "truth.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, program, "--nodes", "40", "--seeders", "4", "--torrents",
		itoa(torrents), "--range", "127.0.93.0/24", "--seed", "9", "--duration", "120", "--reannounce", "30",
		"--truth", truthPath, "--misbehave", "0", "--quiet")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("%s=%s: %v", testnetEnv, program, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cancel() // kills it
			<-done
		}
		cancel()
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if line := lines.Text(); strings.HasPrefix(line, "BOOTSTRAP ") {
			ep := strings.TrimPrefix(line, "BOOTSTRAP ")
			go func() { // keep the pipe drained
				for lines.Scan() {
				}
			}()
			return strings.TrimSpace(ep), truthPath
		}
	}
	t.Fatalf("%s ended without printing BOOTSTRAP", program)
	return "", ""
}

func itoa(n int) string { return strconv.Itoa(n) }

type truthTorrent struct {
	form        map[string]any // the parser's JSON form
	announceKey map[string]bool
	seeders     map[string]bool
}

func readTruth(t *testing.T, path string) []truthTorrent {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal(doc, &list); err != nil {
		t.Fatalf("truth file: %v", err)
	}
	out := make([]truthTorrent, 0, len(list))
	for _, m := range list {
		tt := truthTorrent{form: m, announceKey: map[string]bool{}, seeders: map[string]bool{}}
		for _, k := range m["announce_keys"].([]any) {
			tt.announceKey[k.(string)] = true
		}
		for _, s := range m["seeders"].([]any) {
			tt.seeders[s.(string)] = true
		}
		for _, k := range []string{"announce_keys", "seeders", "seeder_policies", "seeder_behaviours", "first_served_at",
			"holders", "holders_shared_ip", "info_hash"} {
			delete(m, k)
		}
		out = append(out, tt)
	}
	return out
}

func TestCrawlTheLoopbackTestnet(t *testing.T) {
	bootstrap, truthPath := startTestnet(t, 8)
	truth := readTruth(t, truthPath)
	if len(truth) != 8 {
		t.Fatalf("truth holds %d torrents", len(truth))
	}
	schema := torrentSchema(t)

	options := loopbackOptions()
	options["bind_v4"] = "127.0.0.1"
	options["crawl"] = map[string]any{"bootstrap": map[string]any{"sources": []string{bootstrap}, "interval_secs": 5}}
	var mu sync.Mutex
	completions := map[string][]string{}
	var panicked string // the hash whose acknowledgement panicked
	var errorsSeen []string
	c, err := dhtcrawler.New(options,
		dhtcrawler.WithTorrentBuffer(1), // a small buffer: delivery waits for the reader
		dhtcrawler.WithAccept(func(tr *dhtcrawler.Torrent) bool {
			mu.Lock()
			first := panicked == ""
			if first {
				panicked = tr.InfoHash
			}
			mu.Unlock()
			if first {
				panic("accept boom")
			}
			return true
		}),
		dhtcrawler.WithCompletion(func(e dhtcrawler.Completion) {
			mu.Lock()
			completions[e.InfoHash] = append(completions[e.InfoHash], e.Outcome)
			mu.Unlock()
		}),
		dhtcrawler.WithErrors(func(m string) {
			mu.Lock()
			errorsSeen = append(errorsSeen, m)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()

	received := map[string]*dhtcrawler.Torrent{}
	covered := func() int { // truth torrents received, the panicked one counted as seen
		n := 0
		mu.Lock()
		defer mu.Unlock()
		for _, tt := range truth {
			for k := range tt.announceKey {
				if received[k] != nil || k == panicked {
					n++
					break
				}
			}
		}
		return n
	}
	// Wait for a clear majority (as tests/testnet/test_testnet_crawl.cpp does: a torrent announced
	// before the crawler joined is found only by sampling or a re-announce), then 20 ticks
	// more, in which a duplicate delivery would show. Bounded: at most 900 ticks of 100 ms;
	// the network stops by itself after 120 s.
	wanted := (len(truth)*6 + 9) / 10
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i, extra := 0, 0; i < 900 && extra < 20; {
		select {
		case tr := <-c.Torrents():
			if received[tr.InfoHash] != nil {
				t.Errorf("%s delivered twice", tr.InfoHash)
			}
			received[tr.InfoHash] = tr
			checkTorrent(t, schema, truth, tr)
		case <-tick.C:
			i++
			if covered() >= wanted {
				extra++
			}
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	stats, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for tr := range c.Torrents() { // what was still buffered
		received[tr.InfoHash] = tr
		checkTorrent(t, schema, truth, tr)
	}
	got := covered()
	t.Logf("%d of %d torrents arrived", got, len(truth))
	if got < wanted {
		t.Errorf("%d of %d torrents arrived, wanted %d (stats %s)", got, len(truth), wanted, stats.Raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if panicked == "" {
		t.Fatal("no torrent reached the acknowledgement")
	}
	if outcomes := completions[panicked]; len(outcomes) == 0 || outcomes[0] != "delivery_rejected" {
		t.Errorf("the torrent whose acknowledgement panicked completed %v", outcomes)
	}
	found := false
	for _, m := range errorsSeen {
		found = found || strings.Contains(m, "torrent callback panicked: accept boom")
	}
	if !found || c.CallbackPanics() != 1 {
		t.Errorf("panic reports %v, %d counted", errorsSeen, c.CallbackPanics())
	}
	for h := range received {
		if outcomes := completions[h]; len(outcomes) == 0 || outcomes[len(outcomes)-1] != "accepted" {
			t.Errorf("%s delivered, completions %v", h, outcomes)
		}
	}
}

func checkTorrent(t *testing.T, schema *jsonschema.Schema, truth []truthTorrent, tr *dhtcrawler.Torrent) {
	t.Helper()
	if err := validateJSON(schema, tr.JSON); err != nil {
		t.Errorf("%s: %v in %s", tr.InfoHash, err, tr.JSON)
	}
	if tr.InfoHashV1 != "" {
		if sum := sha1.Sum(tr.Info); hex.EncodeToString(sum[:]) != tr.InfoHashV1 {
			t.Errorf("%s: SHA-1 of the info dict is not info_hash_v1", tr.InfoHash)
		}
	}
	if tr.InfoHashV2 != "" {
		if sum := sha256.Sum256(tr.Info); hex.EncodeToString(sum[:]) != tr.InfoHashV2 {
			t.Errorf("%s: SHA-256 of the info dict is not info_hash_v2", tr.InfoHash)
		}
	}
	var form map[string]any
	if err := json.Unmarshal(tr.JSON, &form); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"peer", "discovered_at", "encryption", "transport", "info_hash"} {
		delete(form, k)
	}
	for _, tt := range truth {
		if !tt.announceKey[tr.InfoHash] {
			continue
		}
		if !reflect.DeepEqual(form, tt.form) {
			t.Errorf("%s differs from the truth:\n got %v\nwant %v", tr.InfoHash, form, tt.form)
		}
		if !tt.seeders[tr.Peer] {
			t.Errorf("%s came from %s, not one of its seeders", tr.InfoHash, tr.Peer)
		}
		if tr.DiscoveredAt.IsZero() || tr.Name == "" || len(tr.Files) != tr.NumFiles {
			t.Errorf("%s: typed fields %+v", tr.InfoHash, tr)
		}
		return
	}
	t.Errorf("%s is not a torrent of the test network", tr.InfoHash)
}
