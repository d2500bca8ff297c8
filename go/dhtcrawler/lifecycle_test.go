package dhtcrawler_test

// Lifecycle under stress, for each retry store (none, SQLite, PostgreSQL when DHTC_TEST_PG
// names one): shut down from the host goroutine, from another goroutine, from a callback,
// from a signal handler's goroutine, from two goroutines at once, racing Close, and Close
// right after Run returned. Every wait is bounded; afterwards no goroutine and no file
// descriptor is left, and no callback runs once Close has returned.

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dhtcrawler/dhtcrawler/go/dhtcrawler"
)

const pgEnv = "DHTC_TEST_PG"

// storeKinds are the retry stores the lifecycle tests run with; a nil options value means
// the store is not available here (the test says why and skips).
func storeKinds(t *testing.T) map[string]func(t *testing.T) (map[string]any, string) {
	return map[string]func(t *testing.T) (map[string]any, string){
		"none": func(*testing.T) (map[string]any, string) { return nil, "" },
		"sqlite": func(t *testing.T) (map[string]any, string) {
			path := filepath.Join(t.TempDir(), "retry.sqlite")
			return map[string]any{"store": map[string]any{"kind": "sqlite", "path": path}}, ""
		},
		"postgresql": func(*testing.T) (map[string]any, string) {
			uri := os.Getenv(pgEnv)
			if uri == "" {
				return nil, pgEnv + " is not set (a postgresql:// URI; tests/pg/start_pg.sh prints one): " +
					"no PostgreSQL lifecycle test"
			}
			return map[string]any{"store": map[string]any{"kind": "postgresql", "conninfo": uri}}, ""
		},
	}
}

func fdCount() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(entries)
}

// fdTargets names the open descriptors, for a failure message.
func fdTargets() []string {
	entries, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		out = append(out, e.Name()+"="+target+socketEnds(target))
	}
	return out
}

// socketEnds finds a "socket:[inode]" in /proc/self/net/{tcp,udp}: " tcp local->remote st".
func socketEnds(target string) string {
	inode := strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")
	if inode == target {
		return ""
	}
	for _, table := range []string{"tcp", "udp", "tcp6", "udp6"} {
		doc, _ := os.ReadFile("/proc/self/net/" + table)
		for _, line := range strings.Split(string(doc), "\n") {
			f := strings.Fields(line)
			if len(f) > 9 && f[9] == inode {
				return " " + table + " " + f[1] + "->" + f[2] + " st" + f[3]
			}
		}
	}
	return ""
}

// bounded runs fn and fails the test when it has not returned within d.
func bounded(t *testing.T, what string, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		t.Fatalf("%s did not return within %s; goroutines:\n%s", what, d, buf[:runtime.Stack(buf, true)])
	}
}

// hashBase keeps the hashes of every round distinct, also across runs sharing a
// PostgreSQL store.
var hashBase atomic.Int64

func init() { hashBase.Store(time.Now().UnixNano() % 1_000_000_000 * 1000) }

var stoppers = []string{"host", "goroutine", "callback", "signal", "two-goroutines", "racing-close",
	"close-after-run"}

func TestLifecycleStress(t *testing.T) {
	for kind, store := range storeKinds(t) {
		kind, store := kind, store
		t.Run(kind, func(t *testing.T) {
			retry, skip := store(t)
			if kind == "postgresql" && retry == nil {
				t.Skip(skip)
			}
			for _, how := range stoppers {
				how := how
				t.Run(how, func(t *testing.T) {
					for round := 0; round < 3; round++ {
						lifecycleRound(t, retry, how)
					}
				})
			}
		})
	}
}

func lifecycleRound(t *testing.T, retry map[string]any, how string) {
	peer := newSilentPeer(t)
	client := newAnnouncer(t)
	var sigs chan os.Signal
	if how == "signal" { // before the baseline: os/signal keeps one goroutine for good
		sigs = make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGUSR1)
		defer signal.Stop(sigs)
	}
	runtime.GC()
	goroutinesBefore, fdsBefore, fdsAtStart := runtime.NumGoroutine(), fdCount(), fdTargets()
	heldBefore := silentConnsHeld.Load()

	options := loopbackOptions()
	if retry != nil {
		options["retry"] = retry
	}
	var c *dhtcrawler.Crawler
	var closed, late, calls, gates atomic.Int64
	var stopInGate atomic.Bool
	mark := func() {
		calls.Add(1)
		if closed.Load() != 0 {
			late.Add(1)
		}
	}
	c, err := dhtcrawler.New(options,
		dhtcrawler.WithGate(func(string) bool {
			mark()
			gates.Add(1)
			if stopInGate.Load() {
				if err := c.Shutdown(); err != nil {
					t.Errorf("Shutdown in the gate: %v", err)
				}
			}
			return true
		}),
		dhtcrawler.WithCompletion(func(e dhtcrawler.Completion) {
			mark()
			if e.Outcome == "" {
				t.Errorf("a completion without an outcome: %s", e.JSON)
			}
		}),
		dhtcrawler.WithRetry(func(dhtcrawler.Retry) { mark() }),
		dhtcrawler.WithObservations(func(dhtcrawler.Observation) { mark() }),
		dhtcrawler.WithErrors(func(string) { mark() }))
	if err != nil {
		t.Fatal(err)
	}
	port := udpPort(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	closedAfterRun := make(chan error, 1)
	go func() {
		err := c.Run(ctx)
		if how == "close-after-run" {
			closedAfterRun <- c.Close()
		}
		ran <- err
	}()

	// Fetches in flight (the silent peer never answers) and observations.
	base := int(hashBase.Add(100))
	for i := 0; i < 4; i++ {
		if err := client.announce(port, hashOf(base+i), peer.port()); err != nil {
			// What the crawler counted (answers refused, by whom) says why it was silent.
			stats, _ := c.Stats()
			t.Fatalf("%v; the crawler's stats: %s", err, stats.Raw)
		}
		client.getPeers(port, hashOf(base+50+i))
	}
	if !eventually(500, func() bool { return gates.Load() >= 4 }) {
		t.Fatalf("%d gates ran", gates.Load())
	}

	switch how {
	case "host":
		if err := c.Shutdown(); err != nil {
			t.Fatal(err)
		}
	case "goroutine":
		done := make(chan error)
		go func() { done <- c.Shutdown() }()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	case "callback":
		stopInGate.Store(true)
		if err := client.announceUnanswered(port, hashOf(base+10), peer.port()); err != nil { // stops in its gate
			t.Fatal(err)
		}
	case "signal":
		handled := make(chan error, 1)
		go func() {
			<-sigs
			handled <- c.Shutdown()
		}()
		if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		bounded(t, "the signal handler's Shutdown", 10*time.Second, func() {
			if err := <-handled; err != nil {
				t.Errorf("Shutdown from the signal handler: %v", err)
			}
		})
	case "two-goroutines":
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := c.Shutdown(); err != nil {
					t.Errorf("concurrent Shutdown: %v", err)
				}
			}()
		}
		close(start)
		bounded(t, "two concurrent Shutdowns", 10*time.Second, wg.Wait)
	case "racing-close":
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			if err := c.Shutdown(); err != nil && !errors.Is(err, dhtcrawler.ErrClosed) {
				t.Errorf("Shutdown racing Close: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if err := c.Close(); err != nil {
				t.Errorf("Close racing Shutdown: %v", err)
			}
		}()
		close(start)
		bounded(t, "Shutdown racing Close", 20*time.Second, wg.Wait)
	case "close-after-run":
		cancel()
	}

	bounded(t, "Run after "+how, 10*time.Second, func() {
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if how == "close-after-run" {
		if err := <-closedAfterRun; err != nil {
			t.Errorf("Close right after Run: %v", err)
		}
	}
	bounded(t, "Close", 20*time.Second, func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	closed.Store(1)
	time.Sleep(50 * time.Millisecond) // time for a callback that should not come
	if n := late.Load(); n != 0 {
		t.Errorf("%d callbacks after Close returned", n)
	}
	if calls.Load() == 0 {
		t.Error("no callback ran at all")
	}
	if _, err := c.Stats(); !errors.Is(err, dhtcrawler.ErrClosed) {
		t.Errorf("Stats after Close: %v", err)
	}

	// The silent peers keep the connections crawlers made to them; those are the test's
	// descriptors, not the crawler's.
	fdsBefore -= int(heldBefore)
	if !eventually(200, func() bool { return fdCount()-int(silentConnsHeld.Load()) <= fdsBefore }) {
		t.Errorf("%d file descriptors before, %d after (not counting the test peers' %d): before %v, after %v",
			fdsBefore, fdCount()-int(silentConnsHeld.Load()), silentConnsHeld.Load(), fdsAtStart, fdTargets())
	}
	const grace = 1 // a goroutine of the runtime's own may come and go
	if !eventually(200, func() bool { return runtime.NumGoroutine() <= goroutinesBefore+grace }) {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after:\n%s", goroutinesBefore, runtime.NumGoroutine(),
			buf[:runtime.Stack(buf, true)])
	}
}

// CloseTimeout while a callback is still running: ErrTimeout leaves the crawler shut down
// but open; a later Close closes it once the callback returned.
func TestCloseTimeoutWhileACallbackRuns(t *testing.T) {
	peer := newSilentPeer(t)
	client := newAnnouncer(t)
	inGate, released := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(released) }) }
	t.Cleanup(release) // a failed test lets the gate go, so its crawler can wind down
	c, err := dhtcrawler.New(loopbackOptions(), dhtcrawler.WithGate(func(string) bool {
		once.Do(func() { close(inGate); <-released })
		return true
	}))
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- c.Run(context.Background()) }()
	port := udpPort(t, c)
	go func() { _ = client.announce(port, hashOf(int(hashBase.Add(1))), peer.port()) }()
	select {
	case <-inGate:
	case <-time.After(10 * time.Second):
		t.Fatal("the gate did not run")
	}
	// Shutdown does not wait for the gate, and Run returns (the library's shutdown is
	// non-blocking).
	bounded(t, "Shutdown while a callback runs", 5*time.Second, func() { _ = c.Shutdown() })
	bounded(t, "Run after Shutdown while a callback runs", 5*time.Second, func() {
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	err = c.CloseTimeout(100 * time.Millisecond)
	if !errors.Is(err, dhtcrawler.ErrTimeout) {
		release()
		t.Fatalf("CloseTimeout while the gate runs: %v", err)
	}
	if _, err := c.Stats(); err != nil {
		t.Errorf("Stats after CloseTimeout timed out: %v", err)
	}
	release()
	bounded(t, "Close", 10*time.Second, func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if _, err := c.Stats(); !errors.Is(err, dhtcrawler.ErrClosed) {
		t.Errorf("Stats after Close: %v", err)
	}
}
