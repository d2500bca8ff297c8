package dhtcrawler_test

// Events by type: with a retry store, completions and retry events each reach their own
// function, decoded as their own type; and the polling API.

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dhtcrawler/dhtcrawler/go/dhtcrawler"
)

// refusedPort is a loopback TCP port nobody listens on: a fetch from it fails at once
// (connect_refused).
func refusedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func envelopeType(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		t.Errorf("undecodable envelope %s: %v", raw, err)
	}
	return head.Type
}

var outcomes = map[string]bool{"accepted": true, "fetch_failed": true, "delivery_rejected": true,
	"sink_failed": true, "cancelled": true}

// A SQLite retry store with the completion and the retry function: every failed round
// gives a completion (fetch_failed, never an empty outcome) and then a Retry (dormant),
// each through its own function; no retry event is decoded as a completion.
func TestRetryStoreEventsArriveByType(t *testing.T) {
	options := loopbackOptions()
	options["retry"] = map[string]any{"store": map[string]any{"kind": "sqlite",
		"path": filepath.Join(t.TempDir(), "retry.sqlite")}}
	var mu sync.Mutex
	var completions []dhtcrawler.Completion
	var retries []dhtcrawler.Retry
	c, err := dhtcrawler.New(options,
		dhtcrawler.WithCompletion(func(e dhtcrawler.Completion) {
			mu.Lock()
			completions = append(completions, e)
			mu.Unlock()
		}),
		dhtcrawler.WithRetry(func(e dhtcrawler.Retry) {
			mu.Lock()
			retries = append(retries, e)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	client := newAnnouncer(t)
	port, refused := udpPort(t, c), refusedPort(t)
	const hashes = 5
	want := map[string]bool{}
	for i := 0; i < hashes; i++ {
		h := hashOf(int(hashBase.Add(1)))
		want[hexOf(h)] = true
		if err := client.announce(port, h, refused); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() (int, int) { mu.Lock(); defer mu.Unlock(); return len(completions), len(retries) }
	if !eventually(1500, func() bool { n, r := counts(); return n >= hashes && r >= hashes }) {
		n, r := counts()
		t.Errorf("%d completions and %d retry events for %d failed rounds", n, r, hashes)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range completions {
		if typ := envelopeType(t, e.JSON); typ != "completion" || !outcomes[e.Outcome] {
			t.Errorf("completion function got a %q event, outcome %q: %s", typ, e.Outcome, e.JSON)
		}
		if want[e.InfoHash] && e.Outcome != "fetch_failed" {
			t.Errorf("a round from a refused port completed %q: %s", e.Outcome, e.JSON)
		}
	}
	for _, e := range retries {
		if typ := envelopeType(t, e.JSON); typ != "retry" {
			t.Errorf("retry function got a %q event: %s", typ, e.JSON)
		}
		switch e.State {
		case "dormant":
			if e.Failure == "" || e.Attempts < 1 || e.NextRetryAt.Before(time.Now().Add(-time.Minute)) {
				t.Errorf("dormant retry event: %+v", e)
			}
		case "done":
		default:
			t.Errorf("retry event in state %q: %s", e.State, e.JSON)
		}
		if want[e.InfoHash] && e.State != "dormant" {
			t.Errorf("a failed round left %q: %s", e.State, e.JSON)
		}
	}
}

// An announce reaches WithObservations as an observation of kind "announce": the node
// that announced, the port it named and when.
func TestAnnounceObservation(t *testing.T) {
	observations := make(chan dhtcrawler.Observation, 64)
	c := running(t, loopbackOptions(), dhtcrawler.WithObservations(func(o dhtcrawler.Observation) {
		select {
		case observations <- o:
		default:
		}
	}))
	node := newAnnouncer(t)
	hash := hashOf(int(hashBase.Add(1)))
	before := time.Now().Truncate(time.Second)
	if err := node.announceFromHere(udpPort(t, c), hash, 51413); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case o := <-observations:
			if o.Kind != "announce" {
				continue
			}
			if o.InfoHash != hexOf(hash) || o.Source != node.conn.LocalAddr().String() || o.Port != 51413 ||
				o.At.Before(before) || o.At.After(time.Now()) {
				t.Errorf("announce observation %+v (node %s)", o, node.conn.LocalAddr())
			}
			return
		case <-deadline:
			t.Fatal("no announce observation")
		}
	}
}

// Polling: gates are answered (one fetched, one skipped), observations come, an unknown id
// is not found, and after Shutdown the remaining events (the cancelled completion) are
// polled before the end.
func TestPolling(t *testing.T) {
	if _, err := dhtcrawler.New(loopbackOptions(), dhtcrawler.WithPolling(),
		dhtcrawler.WithGate(func(string) bool { return true })); !errors.Is(err, dhtcrawler.ErrInvalidArgument) {
		t.Fatalf("polling with a callback: %v", err)
	}
	notPolling, err := dhtcrawler.New(loopbackOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notPolling.Poll(context.Background()); !errors.Is(err, dhtcrawler.ErrState) {
		t.Errorf("Poll without WithPolling: %v", err)
	}
	notPolling.Close()

	c, err := dhtcrawler.New(loopbackOptions(), dhtcrawler.WithPolling())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()

	short, stop := context.WithTimeout(context.Background(), 150*time.Millisecond)
	if ev, err := c.Poll(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Poll with nothing to poll: %v, %v", ev, err)
	}
	stop()

	peer := newSilentPeer(t)
	client := newAnnouncer(t)
	port := udpPort(t, c)
	fetched, skipped := hashOf(int(hashBase.Add(1))), hashOf(int(hashBase.Add(1)))
	go func() {
		_ = client.announce(port, fetched, peer.port())
		_ = client.announce(port, skipped, peer.port())
	}()
	gates := map[string]bool{}
	observed := false
	deadline, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	for len(gates) < 2 || !observed {
		ev, err := c.Poll(deadline)
		if err != nil {
			t.Fatalf("Poll: %v (gates %v, observed %v)", err, gates, observed)
		}
		switch e := ev.(type) {
		case dhtcrawler.Gate:
			answer := dhtcrawler.AnswerAccept
			if e.InfoHash == hexOf(skipped) {
				answer = dhtcrawler.AnswerReject
			}
			if err := c.Answer(e.ID, answer); err != nil {
				t.Fatalf("Answer(%d): %v", e.ID, err)
			}
			if err := c.Answer(e.ID, answer); !errors.Is(err, dhtcrawler.ErrNotFound) {
				t.Errorf("second Answer(%d): %v", e.ID, err)
			}
			gates[e.InfoHash] = true
		case dhtcrawler.Observation:
			observed = true
		case dhtcrawler.Completion, dhtcrawler.ErrorEvent, dhtcrawler.Retry:
			t.Logf("%s event: %s", e.Type(), e)
		default:
			t.Fatalf("unexpected %T event %+v", ev, ev)
		}
	}
	if err := c.Answer(1<<62, dhtcrawler.AnswerAccept); !errors.Is(err, dhtcrawler.ErrNotFound) {
		t.Errorf("Answer of an unknown id: %v", err)
	}
	eventually(300, func() bool { peer.mu.Lock(); defer peer.mu.Unlock(); return len(peer.conns) > 0 })
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	bounded(t, "Run", 10*time.Second, func() {
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var cancelled []string
	for {
		ev, err := c.Poll(deadline)
		if errors.Is(err, dhtcrawler.ErrState) {
			break
		}
		if err != nil {
			t.Fatalf("Poll after Shutdown: %v", err)
		}
		t.Logf("after Shutdown: a %s event", ev.Type())
		if e, ok := ev.(dhtcrawler.Completion); ok {
			if e.Outcome == "" || envelopeType(t, e.JSON) != "completion" {
				t.Errorf("completion %s", e.JSON)
			}
			cancelled = append(cancelled, e.InfoHash+" "+e.Outcome)
		}
	}
	// The fetch from the silent peer is cancelled, unless its timeout came first.
	if len(cancelled) != 1 || (cancelled[0] != hexOf(fetched)+" cancelled" && cancelled[0] != hexOf(fetched)+" fetch_failed") {
		t.Errorf("completions after Shutdown: %v (want the fetched hash's, cancelled)", cancelled)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Poll(context.Background()); !errors.Is(err, dhtcrawler.ErrClosed) {
		t.Errorf("Poll after Close: %v", err)
	}
}
