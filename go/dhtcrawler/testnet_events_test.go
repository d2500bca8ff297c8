package dhtcrawler_test

// The loopback test network with a SQLite retry store and the third answer: a torrent
// answered AnswerRetry completes "sink_failed" and is not recorded done; completions and
// retry events each come decoded as their own type. And the crawl of the network polled.

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dhtcrawler/dhtcrawler/go/dhtcrawler"
)

func testnetOptions(bootstrap string) map[string]any {
	options := loopbackOptions()
	options["crawl"] = map[string]any{"bootstrap": map[string]any{"sources": []string{bootstrap}, "interval_secs": 5}}
	return options
}

// servedBy: the encryption and transport of a fetch are ones the library names.
func servedBy(encryption, transport string) bool {
	return (encryption == "plaintext" || encryption == "rc4") && (transport == "tcp" || transport == "utp")
}

func TestTestnetAnswerRetryWithARetryStore(t *testing.T) {
	bootstrap, _ := startTestnet(t, 8)
	options := testnetOptions(bootstrap)
	options["retry"] = map[string]any{"store": map[string]any{"kind": "sqlite",
		"path": filepath.Join(t.TempDir(), "retry.sqlite")}}

	var mu sync.Mutex
	answered := map[string][]dhtcrawler.Answer{} // per hash, in order
	completions := map[string][]string{}
	retries := map[string][]string{}
	var bad []string
	c, err := dhtcrawler.New(options,
		dhtcrawler.WithAnswer(func(tr *dhtcrawler.Torrent) dhtcrawler.Answer {
			mu.Lock()
			defer mu.Unlock()
			a := dhtcrawler.AnswerAccept
			if len(answered[tr.InfoHash]) == 0 {
				a = dhtcrawler.AnswerRetry // the first time: "a sink failed"
			}
			answered[tr.InfoHash] = append(answered[tr.InfoHash], a)
			if !servedBy(tr.Encryption, tr.Transport) {
				bad = append(bad, string(tr.JSON))
			}
			return a
		}),
		dhtcrawler.WithCompletion(func(e dhtcrawler.Completion) {
			mu.Lock()
			defer mu.Unlock()
			if !outcomes[e.Outcome] || envelopeType(t, e.JSON) != "completion" {
				bad = append(bad, string(e.JSON))
			}
			// A fetched torrent's completion names the stream that served it, typed.
			fetched := e.Outcome == "accepted" || e.Outcome == "sink_failed" || e.Outcome == "delivery_rejected"
			if fetched && !servedBy(e.Encryption, e.Transport) {
				bad = append(bad, string(e.JSON))
			}
			completions[e.InfoHash] = append(completions[e.InfoHash], e.Outcome)
		}),
		dhtcrawler.WithRetry(func(e dhtcrawler.Retry) {
			mu.Lock()
			defer mu.Unlock()
			if (e.State != "dormant" && e.State != "done") || envelopeType(t, e.JSON) != "retry" {
				bad = append(bad, string(e.JSON))
			}
			retries[e.InfoHash] = append(retries[e.InfoHash], e.State)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	go func() { // the Torrents channel must be read
		for range c.Torrents() {
		}
	}()

	sinkFailed := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for h, a := range answered {
			if a[0] == dhtcrawler.AnswerRetry {
				for _, o := range completions[h] {
					if o == "sink_failed" {
						n++
						break
					}
				}
			}
		}
		return n
	}
	completedRetries := func() int { // torrents answered AnswerRetry that completed at all
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for h, a := range answered {
			if a[0] == dhtcrawler.AnswerRetry && len(completions[h]) > 0 {
				n++
			}
		}
		return n
	}
	// Bounded: up to 60 s for three torrents answered AnswerRetry to complete.
	eventually(6000, func() bool { return completedRetries() >= 3 })
	time.Sleep(time.Second) // their retry events follow the completions
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := sinkFailed(); n < 3 {
		t.Errorf("%d torrents answered AnswerRetry completed sink_failed, want 3", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) != 0 {
		t.Errorf("mis-decoded events: %q", bad)
	}
	refetched := 0
	for h, a := range answered {
		if len(a) > 1 {
			refetched++
		}
		got := completions[h]
		if len(got) == 0 || got[0] != "sink_failed" {
			t.Errorf("%s answered %v completed %v (want sink_failed first)", h, a, got)
		}
		for _, state := range retries[h][:min(len(retries[h]), 1)] {
			if state == "done" {
				t.Errorf("%s answered AnswerRetry first, but the store recorded it done: %v", h, retries[h])
			}
		}
	}
	// A hybrid torrent found under both keys is offered once; its round under the other key
	// completes "accepted" only when the torrent was accepted. Answered AnswerRetry, it
	// was stored nowhere, so neither key may count as delivered.
	for h, got := range completions {
		if len(answered[h]) == 0 && len(got) > 0 && got[0] == "accepted" && len(answered) > 0 {
			t.Errorf("%s completed %v without being offered, while every first answer was AnswerRetry "+
				"(the other key of a hybrid torrent answered AnswerRetry?); retry events %v", h, got, retries[h])
		}
	}
	t.Logf("%d torrents answered, %d of them fetched again; completions %v; retry events %v",
		len(answered), refetched, completions, retries)
}

// The test network crawled by polling: torrents come as *TorrentEvent with their info
// dict; answered AnswerAccept they complete "accepted", the one answered AnswerRetry
// "sink_failed".
func TestTestnetPolled(t *testing.T) {
	bootstrap, _ := startTestnet(t, 8)
	c, err := dhtcrawler.New(testnetOptions(bootstrap), dhtcrawler.WithPolling())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()

	schema := torrentSchema(t)
	accepted := map[string]bool{}
	completed := map[string]string{}
	retried, retriedOutcome := "", "" // the first torrent is answered AnswerRetry
	deadline, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	for len(accepted) < 3 || len(completed) < len(accepted) || retriedOutcome == "" {
		ev, err := c.Poll(deadline)
		if err != nil {
			t.Fatalf("Poll: %v (%d accepted, completions %v)", err, len(accepted), completed)
		}
		switch e := ev.(type) {
		case dhtcrawler.Gate:
			if err := c.Answer(e.ID, dhtcrawler.AnswerAccept); err != nil {
				t.Errorf("Answer(gate %d): %v", e.ID, err)
			}
		case *dhtcrawler.TorrentEvent:
			tr := e.Torrent
			if err := validateJSON(schema, tr.JSON); err != nil {
				t.Errorf("%s: %v", tr.InfoHash, err)
			}
			if sum := sha1.Sum(tr.Info); tr.InfoHashV1 != "" && hex.EncodeToString(sum[:]) != tr.InfoHashV1 {
				t.Errorf("%s: the info dict is not the torrent's", tr.InfoHash)
			}
			answer := dhtcrawler.AnswerAccept
			if retried == "" || retried == tr.InfoHash {
				retried, answer = tr.InfoHash, dhtcrawler.AnswerRetry
			}
			if err := c.Answer(e.ID, answer); err != nil {
				t.Errorf("Answer(torrent %d): %v", e.ID, err)
			}
			if answer == dhtcrawler.AnswerAccept {
				accepted[tr.InfoHash] = true
			}
		case dhtcrawler.Completion:
			if accepted[e.InfoHash] {
				completed[e.InfoHash] = e.Outcome
			} else if e.InfoHash == retried && retriedOutcome == "" {
				retriedOutcome = e.Outcome
			}
		}
	}
	if retriedOutcome != "sink_failed" {
		t.Errorf("the torrent answered AnswerRetry completed %q, want sink_failed", retriedOutcome)
	}
	for h, o := range completed {
		if o != "accepted" {
			t.Errorf("%s accepted, completed %q", h, o)
		}
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	for { // drain to the end
		if _, err := c.Poll(deadline); err != nil {
			if !errors.Is(err, dhtcrawler.ErrState) {
				t.Errorf("Poll after Shutdown: %v", err)
			}
			break
		}
	}
}
