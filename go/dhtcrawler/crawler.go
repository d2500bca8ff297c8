// Package dhtcrawler crawls the BitTorrent DHT and fetches torrent metadata, through the
// C ABI of libdhtcrawler (dhtcrawler.h), linked with cgo via pkg-config.
//
// A crawler is made by New, runs in Run until its context is cancelled or Shutdown is
// called, delivers verified torrents on the Torrents channel, and is released by Close:
//
//	c, err := dhtcrawler.New(map[string]any{"port": 6881})
//	if err != nil { ... }
//	defer c.Close()
//	go func() {
//		for t := range c.Torrents() {
//			fmt.Println(t.InfoHash, t.Name)
//		}
//	}()
//	err = c.Run(ctx)
//
// Threads: the library calls back on its own delivery thread, one call at a time, in
// order. Gate, answer and event functions run there and should return quickly; they may
// call Shutdown, Stats, Observability and Metrics, but Close returns a DHTC_ERR_STATE
// error there. A panic in any of them is recovered, reported to the error function, and
// counts as a rejection where the function decides; it never unwinds into C.
//
// Instead of callbacks a host may pull every event itself: New(options, WithPolling()),
// then Poll in a loop while Run runs, answering Gate and TorrentEvent events with Answer.
//
// Lifecycle: Shutdown only requests the stop and returns at once (from any goroutine, a
// callback or a signal handler, any number of times); Run returns as soon as it was
// requested. Callbacks (the cancelled rounds' completions) may still run until Close
// returns; Close waits for them, frees the library's side, and after it returns nothing of
// the library runs.
package dhtcrawler

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

/*
#include "dhtcrawler.h"
*/
import "C"

// Version is the library's version, "MAJOR.MINOR.PATCH".
func Version() string { return libVersion() }

// DefaultOptions is the options document with every key at its default (docs/options.md).
func DefaultOptions() (string, error) { return cDefaultOptions() }

// Setting configures a crawler at New; callbacks cannot change once it exists.
type Setting func(*settings)

type settings struct {
	gate          func(infoHash string) bool
	answer        func(t *Torrent) Answer
	onCompletion  func(Completion)
	onRetry       func(Retry)
	onError       func(message string)
	onObservation func(Observation)
	onScrape      func(Scrape)
	buffer        int
	polling       bool
}

// WithGate sets the fetch gate: called before a hash first goes to peers (40 lower-case
// hex); false skips the hash (no torrent, no completion). Without it every hash is fetched.
func WithGate(fn func(infoHash string) bool) Setting { return func(s *settings) { s.gate = fn } }

// WithAccept sets the acknowledgement: called for every verified torrent before it enters
// the Torrents channel; false rejects it (its completion says "delivery_rejected") and it
// is not sent. Without it (and without WithAnswer) every torrent is accepted. It is
// WithAnswer with true = AnswerAccept, false = AnswerReject; the later of the two wins.
func WithAccept(fn func(t *Torrent) bool) Setting {
	return func(s *settings) {
		s.answer = func(t *Torrent) Answer {
			if fn(t) {
				return AnswerAccept
			}
			return AnswerReject
		}
	}
}

// WithAnswer sets the acknowledgement with all three answers: called for every verified
// torrent before it enters the Torrents channel. AnswerAccept sends it there (the round
// completes "accepted"); AnswerReject drops it ("delivery_rejected", the hash is done);
// AnswerRetry drops it for now ("sink_failed": the hash is not recorded done and is fetched
// again). A panic, or any other value, counts as AnswerReject. Replaces WithAccept.
func WithAnswer(fn func(t *Torrent) Answer) Setting { return func(s *settings) { s.answer = fn } }

// WithCompletion receives one completion per gated round.
func WithCompletion(fn func(Completion)) Setting { return func(s *settings) { s.onCompletion = fn } }

// WithRetry receives what the retry store made of each round (only with a retry store,
// retry.store.kind in docs/options.md), after the store committed it.
func WithRetry(fn func(Retry)) Setting { return func(s *settings) { s.onRetry = fn } }

// WithPolling switches event delivery to Poll: no callback is used, so it cannot be
// combined with WithGate, WithAccept, WithAnswer, WithCompletion, WithRetry, WithErrors or
// WithObservations, and the Torrents channel stays empty.
func WithPolling() Setting { return func(s *settings) { s.polling = true } }

// WithErrors receives the library's runtime errors and the panics recovered from this
// crawler's callbacks.
func WithErrors(fn func(message string)) Setting { return func(s *settings) { s.onError = fn } }

// WithObservations receives the hashes the DHT side saw: looked up, sampled, or announced
// (with the announcing node and port); the library drops (and counts) them when this
// function falls behind.
func WithObservations(fn func(Observation)) Setting {
	return func(s *settings) { s.onObservation = fn }
}

// WithScrapes receives the answers to RequestScrape; the library drops (and counts) them
// when this function falls behind.
func WithScrapes(fn func(Scrape)) Setting { return func(s *settings) { s.onScrape = fn } }

// WithTorrentBuffer sets the capacity of the Torrents channel (default 64, at least 0).
func WithTorrentBuffer(n int) Setting {
	return func(s *settings) {
		if n >= 0 {
			s.buffer = n
		}
	}
}

// Crawler is one crawler. Its methods are safe for concurrent use.
type Crawler struct {
	settings
	handle   cgo.Handle
	torrents chan *Torrent

	// mu guards ptr against Close: other goroutines read under RLock, Close frees under
	// Lock. A callback never takes it: the library keeps ptr valid for a callback's whole
	// run (destroy waits for it), and taking it there would deadlock against Close.
	mu         sync.RWMutex
	ptr        *C.dhtc_crawler
	closed     bool
	runDone    chan struct{}
	lifecycle  sync.Mutex    // orders the library's start and shutdown calls
	stopping   chan struct{} // closed by the first Shutdown; unblocks a torrent send
	stopOnce   sync.Once
	callbackOn atomic.Int64 // OS thread id of the callback now running, 0 when none
	panics     atomic.Uint64
}

// New validates the options and binds the sockets; nothing runs until Run.
//
// options is the JSON options document (docs/options.md): nil for all defaults, a string,
// []byte or json.RawMessage holding JSON, or any value encoding/json turns into an object
// (a map[string]any, a struct with json tags). Unknown keys and wrong types fail with an
// *Error whose status is DHTC_ERR_INVALID_OPTION and whose message names the key's path.
func New(options any, opts ...Setting) (*Crawler, error) {
	if libABI() != headerABI() {
		return nil, fmt.Errorf("dhtcrawler: library ABI %d, this package was built for %d", libABI(), headerABI())
	}
	doc, err := optionsJSON(options)
	if err != nil {
		return nil, err
	}
	c := &Crawler{settings: settings{buffer: 64}, stopping: make(chan struct{})}
	for _, o := range opts {
		o(&c.settings)
	}
	if c.polling && (c.gate != nil || c.answer != nil || c.onCompletion != nil || c.onRetry != nil ||
		c.onError != nil || c.onObservation != nil || c.onScrape != nil) {
		return nil, &Error{Status: statusInvalidArgument, Name: statusName(statusInvalidArgument),
			Message: "WithPolling excludes callbacks (WithGate, WithAccept, WithAnswer, WithCompletion, " +
				"WithRetry, WithErrors, WithObservations, WithScrapes)"}
	}
	c.torrents = make(chan *Torrent, c.buffer)
	if c.ptr, err = cCreate(doc); err != nil {
		return nil, err
	}
	if c.polling {
		err = cEnablePolling(c.ptr)
	} else {
		c.handle = cgo.NewHandle(c)
		err = cRegister(c.ptr, c.handle, c.gate != nil, c.onCompletion != nil, c.onRetry != nil,
			c.onError != nil, c.onObservation != nil, c.onScrape != nil)
	}
	if err != nil {
		_ = cDestroy(c.ptr)
		if c.handle != 0 {
			c.handle.Delete()
		}
		return nil, err
	}
	return c, nil
}

// HeaderVersion is the version of the dhtcrawler.h this package was compiled against
// (DHTC_VERSION_STRING); Version is the library's.
func HeaderVersion() string { return headerVersion() }

func optionsJSON(options any) (string, error) {
	switch o := options.(type) {
	case nil:
		return "", nil
	case string:
		return o, nil
	case []byte:
		return string(o), nil
	case json.RawMessage:
		return string(o), nil
	}
	b, err := json.Marshal(options)
	if err != nil {
		return "", fmt.Errorf("dhtcrawler: options: %w", err)
	}
	return string(b), nil
}

// Torrents delivers every accepted torrent. It is closed by Close, after the last callback.
//
// Buffering: the channel holds WithTorrentBuffer torrents (default 64). When it is full the
// library's delivery thread waits for the reader, so a slow reader slows delivery and the
// library's bounded queues apply their back-pressure (fetches wait; observations are
// dropped and counted). Nothing is dropped silently: a torrent is acknowledged to the
// library only once it is in the channel. After Shutdown a torrent that finds the channel
// full is answered AnswerRetry instead (its completion says "sink_failed"; it was not
// taken, so it is fetched again).
func (c *Crawler) Torrents() <-chan *Torrent { return c.torrents }

// Run starts the crawler and blocks until it is shut down: by ctx being cancelled, by
// Shutdown (from any goroutine or a callback), or by Close. It returns nil then (also when
// the crawler was shut down before Run), or the library's error when the crawler could not
// run. Run works once per crawler; a second call returns a DHTC_ERR_STATE error.
func (c *Crawler) Run(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return ErrClosed
	case c.runDone != nil:
		c.mu.Unlock()
		return stateError("Run was already called")
	}
	c.runDone = make(chan struct{})
	ptr := c.ptr
	c.mu.Unlock()

	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case <-ctx.Done():
			_ = c.Shutdown()
		case <-c.runDone:
		}
	}()
	// Close waits for runDone before it frees ptr, so ptr stays valid here. Start and
	// shutdown never overlap (lifecycle): a crawler shut down before it started stays
	// unstarted, and Run returns at once.
	c.lifecycle.Lock()
	var err error
	started := !c.stopRequested()
	if started {
		err = cStart(ptr)
	}
	c.lifecycle.Unlock()
	if started && err == nil {
		err = cWait(ptr)
	}
	close(c.runDone) // no lock here: Close holds mu while it waits for this
	<-watcherDone
	return err
}

// Shutdown stops crawling and fetching and makes Run return. It only requests the stop and
// returns without waiting for a running callback (Close waits for that). Idempotent, callable
// from any goroutine, from a signal handler's goroutine and from inside a callback, also
// concurrently with itself and with Close (it then may return ErrClosed); a shut-down
// crawler cannot run again.
func (c *Crawler) Shutdown() error {
	c.stopOnce.Do(func() { close(c.stopping) })
	return c.withPtr(func(p *C.dhtc_crawler) error {
		// lifecycle keeps a start from overlapping a shutdown. A callback runs after
		// start, so it needs no lock, and must not take it: a library whose shutdown
		// waits for callbacks would deadlock against a Shutdown on another goroutine.
		if !c.inCallback() {
			c.lifecycle.Lock()
			defer c.lifecycle.Unlock()
		}
		return cShutdown(p)
	})
}

func (c *Crawler) stopRequested() bool {
	select {
	case <-c.stopping:
		return true
	default:
		return false
	}
}

// Close shuts the crawler down, waits for Run to return and for a callback that is
// running, frees the library's side (dhtc_crawler_destroy) and closes the Torrents
// channel. After it returns no callback runs and nothing of the library runs. Idempotent;
// concurrent calls wait for the first. Inside a callback it shuts down and returns a
// DHTC_ERR_STATE error: close from the host's goroutine after the callback returned.
func (c *Crawler) Close() error { return c.close(cDestroy) }

// CloseTimeout is Close waiting at most d for a callback that is still running
// (dhtc_crawler_destroy_timeout). When the callback has not returned by then it returns an
// error matching ErrTimeout: the crawler is shut down but not closed (Stats still work);
// call Close or CloseTimeout again later.
func (c *Crawler) CloseTimeout(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return c.close(func(p *C.dhtc_crawler) error { return cDestroyTimeout(p, d.Milliseconds()) })
}

func (c *Crawler) close(destroy func(*C.dhtc_crawler) error) error {
	_ = c.Shutdown()
	if c.inCallback() {
		return stateError("Close inside a callback; call Shutdown there and Close afterwards")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if c.runDone != nil {
		<-c.runDone // Run needs no lock to return
	}
	if err := destroy(c.ptr); err != nil {
		return err // the crawler stays valid; nothing was freed
	}
	c.closed = true // ptr stays as it was; nothing reads it once closed
	if c.handle != 0 {
		c.handle.Delete()
	}
	close(c.torrents)
	return nil
}

// pollSlice bounds one wait inside the library, so Poll sees its context and Close never
// waits long for a Poll in progress.
const pollSlice = 100 * time.Millisecond

// Poll takes the next event (WithPolling only), waiting until one comes or ctx is done
// (then it returns ctx's error). Events are Gate, *TorrentEvent, Completion, Retry,
// ErrorEvent and Observation; answer Gate and TorrentEvent with Answer. An event of a type
// this package does not know is skipped with a log line. After Shutdown it returns the
// events still waiting (the cancelled completions among them), then an error matching
// ErrState; after Close, ErrClosed. Safe from several goroutines.
func (c *Crawler) Poll(ctx context.Context) (Event, error) {
	if !c.polling {
		return nil, stateError("Poll needs WithPolling")
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wait := pollSlice
		if deadline, ok := ctx.Deadline(); ok {
			if left := time.Until(deadline); left < wait {
				wait = left
			}
		}
		if wait < 0 {
			wait = 0
		}
		var doc string
		var info []byte
		err := c.withPtr(func(p *C.dhtc_crawler) error {
			var err error
			doc, info, err = cPoll(p, wait.Milliseconds())
			return err
		})
		if errors.Is(err, ErrTimeout) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ev, err := decodeEvent(doc, info)
		if err != nil {
			return nil, err
		}
		if ev != nil {
			return ev, nil
		}
	}
}

// Answer answers a polled Gate (AnswerAccept: fetch it; AnswerReject: skip it) or
// TorrentEvent (AnswerAccept, AnswerReject or AnswerRetry) by its ID. An error matching
// ErrNotFound when it was answered already or its time ran out. Any goroutine.
// RequestScrape asks for a BEP-33 scrape of a torrent (40 hex characters; a v2 hash
// truncated to 20 bytes): its estimate comes as one Scrape event (WithScrapes, or Poll)
// within seconds, and at the latest crawl.scrape.timeout_secs after the request (TimedOut:
// no node to ask, or answers missing). A hash already waiting is not scraped twice. Any
// goroutine, also inside callbacks; an Error with ErrState after shutdown or when the
// request queue is full.
func (c *Crawler) RequestScrape(infoHash string) error {
	raw, err := hex.DecodeString(infoHash)
	if err != nil || len(raw) != 20 {
		return &Error{Status: statusInvalidArgument, Name: statusName(statusInvalidArgument),
			Message: "RequestScrape: the info hash must be 40 hex characters"}
	}
	var h [20]byte
	copy(h[:], raw)
	return c.withPtr(func(p *C.dhtc_crawler) error { return cRequestScrape(p, h) })
}

func (c *Crawler) Answer(id uint64, answer Answer) error {
	return c.withPtr(func(p *C.dhtc_crawler) error { return cAnswer(p, id, int(answer)) })
}

// Stats is the runtime snapshot (docs/metrics.md).
func (c *Crawler) Stats() (Stats, error) {
	var s Stats
	doc, err := c.snapshot(snapshotStats)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		return s, fmt.Errorf("dhtcrawler: stats: %w", err)
	}
	s.Raw = json.RawMessage(doc)
	return s, nil
}

// Observability is every counter, every drop and the histograms, as JSON (docs/metrics.md).
func (c *Crawler) Observability() (json.RawMessage, error) {
	doc, err := c.snapshot(snapshotObservability)
	return json.RawMessage(doc), err
}

// Metrics is the same as Prometheus text exposition (version 0.0.4).
func (c *Crawler) Metrics() (string, error) { return c.snapshot(snapshotMetrics) }

// CallbackPanics counts the panics recovered from this crawler's callbacks.
func (c *Crawler) CallbackPanics() uint64 { return c.panics.Load() }

func (c *Crawler) snapshot(which snapshotKind) (string, error) {
	var doc string
	err := c.withPtr(func(p *C.dhtc_crawler) error {
		var err error
		doc, err = cSnapshot(p, which)
		return err
	})
	return doc, err
}

// withPtr runs fn with the live crawler pointer, or returns ErrClosed.
func (c *Crawler) withPtr(fn func(*C.dhtc_crawler) error) error {
	if c.inCallback() {
		return fn(c.ptr) // valid for the whole callback; see mu
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	return fn(c.ptr)
}

// inCallback tells whether the caller is one of this crawler's callbacks. The callback's
// goroutine is locked to the library's delivery thread for the call, and no other
// goroutine ever runs on that thread, so the thread id identifies it.
func (c *Crawler) inCallback() bool {
	id := c.callbackOn.Load()
	return id != 0 && id == int64(syscall.Gettid())
}
