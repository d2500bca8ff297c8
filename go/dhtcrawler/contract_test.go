package dhtcrawler_test

// The C contract tests (tests/capi/test_capi.cpp) as a Go host sees them.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dhtcrawler/dhtcrawler/go/dhtcrawler"
)

func TestVersion(t *testing.T) {
	if v := dhtcrawler.Version(); strings.Count(v, ".") != 2 {
		t.Fatalf("version %q", v)
	}
}

func TestBadOptionsNameTheKey(t *testing.T) {
	cases := []struct {
		options any
		want    error
		mention string
	}{
		{"{not json", dhtcrawler.ErrInvalidJSON, "invalid JSON"},
		{map[string]any{"metadata": map[string]any{"timout_secs": 4}}, dhtcrawler.ErrInvalidOption, "metadata.timout_secs"},
		{map[string]any{"crawl": map[string]any{"rate_limit": map[string]any{"burst": "many"}}},
			dhtcrawler.ErrInvalidOption, "crawl.rate_limit.burst"},
		{`{"netmode":"ipv5"}`, dhtcrawler.ErrInvalidOption, "netmode"},
		{[]byte(`{"port":70000}`), dhtcrawler.ErrInvalidOption, "port"},
		{json.RawMessage(`[1]`), dhtcrawler.ErrInvalidOption, ""},
	}
	for _, tc := range cases {
		c, err := dhtcrawler.New(tc.options)
		if c != nil {
			c.Close()
			t.Errorf("%v: created", tc.options)
			continue
		}
		var e *dhtcrawler.Error
		if !errors.Is(err, tc.want) || !errors.As(err, &e) {
			t.Errorf("%v: got %v, want %v", tc.options, err, tc.want)
			continue
		}
		if e.Message == "" || !strings.Contains(e.Message, tc.mention) || !strings.Contains(err.Error(), e.Name) {
			t.Errorf("%v: message %q does not mention %q", tc.options, e.Message, tc.mention)
		}
	}
	if _, err := dhtcrawler.New(map[string]any{"x": make(chan int)}); err == nil {
		t.Error("options that are not JSON were accepted")
	}
}

func TestPortInUseIsABindError(t *testing.T) {
	first, err := dhtcrawler.New(loopbackOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	taken := loopbackOptions()
	taken["port"] = udpPort(t, first)
	c, err := dhtcrawler.New(taken)
	if !errors.Is(err, dhtcrawler.ErrBind) || !strings.Contains(err.Error(), "bind") {
		t.Fatalf("got %v, %v; want a bind error", c, err)
	}
}

func TestAnUnusableRetryStoreIsAStoreError(t *testing.T) {
	options := loopbackOptions()
	// A directory is no SQLite file.
	options["retry"] = map[string]any{"store": map[string]any{"kind": "sqlite", "path": t.TempDir()}}
	c, err := dhtcrawler.New(options)
	var e *dhtcrawler.Error
	if !errors.Is(err, dhtcrawler.ErrStore) || !errors.As(err, &e) || e.Name != "DHTC_ERR_STORE" || e.Message == "" {
		if c != nil {
			c.Close()
		}
		t.Fatalf("got %v, %v; want a DHTC_ERR_STORE error with a message", c, err)
	}
}

func TestDefaultOptionsAreAcceptedBack(t *testing.T) {
	doc, err := dhtcrawler.DefaultOptions()
	if err != nil {
		t.Fatal(err)
	}
	var o map[string]any
	if err := json.Unmarshal([]byte(doc), &o); err != nil {
		t.Fatal(err)
	}
	if o["port"] != 6881.0 {
		t.Errorf("default port %v", o["port"])
	}
	o["port"] = 0
	o["bind_v4"] = "127.0.0.1"
	o["crawl"].(map[string]any)["bootstrap"].(map[string]any)["sources"] = []string{}
	c, err := dhtcrawler.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// Create, run, shut down and close many times, with fetches in flight to a peer that
// never answers; every call that is not allowed any more says so, and no thread is left.
func TestLifecycleManyTimes(t *testing.T) {
	peer := newSilentPeer(t)
	client := newAnnouncer(t)
	var completions atomic.Int64
	threadsBefore := threadCount()
	const rounds = 100
	for i := 0; i < rounds; i++ {
		c, err := dhtcrawler.New(loopbackOptions(),
			dhtcrawler.WithCompletion(func(dhtcrawler.Completion) { completions.Add(1) }))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- c.Run(ctx) }()
		if err := client.announce(udpPort(t, c), hashOf(i), peer.port()); err != nil {
			t.Fatal(err)
		}
		if i%20 == 0 { // let some rounds surely reach the peer
			eventually(5, func() bool { return false })
		}
		if i%2 == 0 {
			cancel()
		} else if err := c.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := <-ran; err != nil {
			t.Fatalf("Run: %v", err)
		}
		cancel()
		if err := c.Shutdown(); err != nil { // idempotent
			t.Fatal(err)
		}
		if err := c.Run(context.Background()); !errors.Is(err, dhtcrawler.ErrState) {
			t.Fatalf("second Run: %v", err)
		}
		if _, err := c.Stats(); err != nil {
			t.Fatalf("Stats after Run: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil { // idempotent
			t.Fatal(err)
		}
		if _, err := c.Stats(); !errors.Is(err, dhtcrawler.ErrClosed) {
			t.Fatalf("Stats after Close: %v", err)
		}
		if _, open := <-c.Torrents(); open {
			t.Fatal("Torrents not closed by Close")
		}
	}
	// Go keeps its own threads, a few more after cgo calls blocked; a leak per round would
	// show as at least one thread per round.
	if grown := threadCount() - threadsBefore; grown >= rounds/4 {
		t.Errorf("%d threads more after %d rounds", grown, rounds)
	}
	if completions.Load() == 0 { // rounds that passed the gate complete as cancelled
		t.Error("no completion at all")
	}
}

func TestRunAfterCloseAndCloseWithoutRun(t *testing.T) {
	c, err := dhtcrawler.New(loopbackOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); !errors.Is(err, dhtcrawler.ErrClosed) {
		t.Fatalf("Run after Close: %v", err)
	}
	if err := c.Shutdown(); !errors.Is(err, dhtcrawler.ErrClosed) {
		t.Fatalf("Shutdown after Close: %v", err)
	}
}

// Panics in every kind of callback are recovered, reported, and count as rejections.
func TestPanickingCallbacks(t *testing.T) {
	peer := newSilentPeer(t)
	client := newAnnouncer(t)
	var mu sync.Mutex
	var reports []string
	var completions atomic.Int64
	c, err := dhtcrawler.New(loopbackOptions(),
		dhtcrawler.WithGate(func(string) bool { panic("gate boom") }),
		dhtcrawler.WithObservations(func(dhtcrawler.Observation) { panic("observation boom") }),
		dhtcrawler.WithCompletion(func(dhtcrawler.Completion) { completions.Add(1) }),
		dhtcrawler.WithErrors(func(m string) {
			mu.Lock()
			reports = append(reports, m)
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	port := udpPort(t, c)
	for i := 0; i < 3; i++ {
		if err := client.announce(port, hashOf(100+i), peer.port()); err != nil {
			t.Fatal(err)
		}
	}
	reported := func(what string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range reports {
			if strings.Contains(r, what) {
				return true
			}
		}
		return false
	}
	if !eventually(1000, func() bool { return reported("gate callback panicked: gate boom") }) {
		t.Error("the gate's panic was not reported")
	}
	if !eventually(1000, func() bool { return reported("observation callback panicked: observation boom") }) {
		t.Error("the observation's panic was not reported")
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// A gate that panicked rejected its hash: no fetch, so no completion, not even cancelled.
	if n := completions.Load(); n != 0 {
		t.Errorf("%d completions for hashes whose gate panicked", n)
	}
	if c.CallbackPanics() < 2 {
		t.Errorf("%d panics counted", c.CallbackPanics())
	}
}

// While observations and announces flood in, Close returns; after that no callback runs.
func TestNoCallbackAfterClose(t *testing.T) {
	peer := newSilentPeer(t)
	for round := 0; round < 10; round++ {
		var closed, late, calls atomic.Int64
		mark := func() {
			calls.Add(1)
			if closed.Load() != 0 {
				late.Add(1)
			}
		}
		c, err := dhtcrawler.New(loopbackOptions(),
			dhtcrawler.WithGate(func(string) bool { mark(); return true }),
			dhtcrawler.WithCompletion(func(dhtcrawler.Completion) { mark() }),
			dhtcrawler.WithObservations(func(dhtcrawler.Observation) { mark() }),
			dhtcrawler.WithErrors(func(string) { mark() }))
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = c.Run(context.Background()) }()
		port := udpPort(t, c)
		flooder := newAnnouncer(t)
		// The announces go from a socket of their own, closed with the flood: an announce
		// waiting for a reply the closed crawler cannot send ends then (it waited out five
		// resends, 5 s a round, before).
		announcer := newAnnouncer(t)
		stop := make(chan struct{})
		flooded := make(chan struct{})
		go func() {
			defer close(flooded)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%50 == 0 {
					_ = announcer.announceFromHere(port, hashOf(1000*round+i), peer.port())
				} else {
					flooder.getPeers(port, hashOf(1000*round+i))
				}
			}
		}()
		eventually(1000, func() bool { return calls.Load() >= 20 })
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		closed.Store(1)
		eventually(5, func() bool { return false }) // the flood goes on against a closed socket
		close(stop)
		flooder.conn.Close()
		announcer.conn.Close() // ends a wait for a reply that cannot come
		<-flooded
		if calls.Load() == 0 {
			t.Fatal("no callback ran at all")
		}
		if n := late.Load(); n != 0 {
			t.Fatalf("%d callbacks after Close returned", n)
		}
	}
}

// Shutdown inside a callback ends Run; Close there is refused, and works afterwards.
func TestShutdownFromACallback(t *testing.T) {
	peer := newSilentPeer(t)
	client := newAnnouncer(t)
	type inside struct{ stats, close, shutdown error }
	results := make(chan inside, 1)
	var c *dhtcrawler.Crawler
	var gates atomic.Int64
	c, err := dhtcrawler.New(loopbackOptions(), dhtcrawler.WithGate(func(string) bool {
		if gates.Add(1) == 1 {
			var r inside
			_, r.stats = c.Stats()
			r.close = c.Close()
			r.shutdown = c.Shutdown()
			results <- r
		}
		return true
	}))
	if err != nil {
		t.Fatal(err)
	}
	port := udpPort(t, c)
	go func() { _ = client.announce(port, hashOf(7), peer.port()) }()
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Run may return while the gate is still running; Close waits for it.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-results:
		if r.stats != nil || r.shutdown != nil {
			t.Errorf("inside the gate: Stats %v, Shutdown %v", r.stats, r.shutdown)
		}
		if !errors.Is(r.close, dhtcrawler.ErrState) {
			t.Errorf("Close inside the gate: %v", r.close)
		}
	default:
		t.Fatal("Run returned without the gate having run")
	}
}

func TestShutdownFromAnotherGoroutine(t *testing.T) {
	stoppers := map[string]func(c *dhtcrawler.Crawler, cancel context.CancelFunc){
		"cancel":   func(_ *dhtcrawler.Crawler, cancel context.CancelFunc) { cancel() },
		"shutdown": func(c *dhtcrawler.Crawler, _ context.CancelFunc) { _ = c.Shutdown() },
		"close":    func(c *dhtcrawler.Crawler, _ context.CancelFunc) { _ = c.Close() },
	}
	for name, stop := range stoppers {
		t.Run(name, func(t *testing.T) {
			c, err := dhtcrawler.New(loopbackOptions())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go stop(c, cancel)
			if err := c.Run(ctx); err != nil && !errors.Is(err, dhtcrawler.ErrClosed) {
				t.Fatal(err) // Close may win the race to Run: then Run says closed
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Snapshots from several goroutines while traffic flows, and while the crawler closes.
func TestSnapshotsConcurrently(t *testing.T) {
	c, err := dhtcrawler.New(loopbackOptions())
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Run(context.Background()) }()
	port := udpPort(t, c)
	var wg sync.WaitGroup
	var reads, closedReads atomic.Int64
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				s, err1 := c.Stats()
				o, err2 := c.Observability()
				m, err3 := c.Metrics()
				if errors.Is(err1, dhtcrawler.ErrClosed) || errors.Is(err2, dhtcrawler.ErrClosed) ||
					errors.Is(err3, dhtcrawler.ErrClosed) {
					closedReads.Add(1)
					return
				}
				if err1 != nil || err2 != nil || err3 != nil {
					t.Errorf("snapshots: %v %v %v", err1, err2, err3)
					return
				}
				var obs map[string]any
				if s.Schema != 1 || json.Unmarshal(o, &obs) != nil || obs["schema"] != 1.0 || !strings.Contains(m, "# TYPE") {
					t.Errorf("snapshot forms: %d %s", s.Schema, o)
					return
				}
				reads.Add(1)
			}
		}()
	}
	client := newAnnouncer(t)
	for i := 0; i < 200; i++ {
		client.getPeers(port, hashOf(5000+i))
	}
	eventually(1000, func() bool { return reads.Load() >= 50 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if reads.Load() == 0 || closedReads.Load() != 4 {
		t.Errorf("%d reads, %d readers saw the close", reads.Load(), closedReads.Load())
	}
}
