package dhtcrawler

// The Go ends of the C trampolines (trampolines.c). They run on the library's delivery
// thread. Each recovers every panic — from user code, from decoding, from a stale handle —
// so nothing unwinds into C; a recovered panic counts as a rejection where a decision is
// due and is reported to the error function.

/*
#include <stdint.h>
#include <stddef.h>
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"syscall"
	"unsafe"
)

// crawlerOf resolves the handle and marks this thread as inside a callback; the returned
// function clears the mark. A handle that is no longer valid yields nil.
func crawlerOf(h C.uintptr_t) (c *Crawler, leave func()) {
	defer func() {
		if recover() != nil { // cgo.Handle.Value panics on a deleted handle
			c, leave = nil, func() {}
		}
	}()
	c, _ = cgo.Handle(h).Value().(*Crawler)
	if c == nil {
		return nil, func() {}
	}
	c.callbackOn.Store(int64(syscall.Gettid()))
	return c, func() { c.callbackOn.Store(0) }
}

// report counts a recovered panic and passes it to the error function.
func (c *Crawler) report(where string, p any) {
	c.panics.Add(1)
	if c.onError == nil {
		return
	}
	defer func() { _ = recover() }() // the error function itself panicking is dropped
	c.onError(fmt.Sprintf("%s callback panicked: %v", where, p))
}

//export goDhtcGate
func goDhtcGate(h C.uintptr_t, infoHash *C.char) (accept C.int) {
	defer func() {
		if p := recover(); p != nil {
			accept = 0
		}
	}()
	c, leave := crawlerOf(h)
	defer leave()
	if c == nil || c.gate == nil {
		return 1
	}
	hash := C.GoString(infoHash)
	defer func() {
		if p := recover(); p != nil {
			c.report("gate", p)
			accept = 0
		}
	}()
	return cbool(c.gate(hash))
}

//export goDhtcTorrent
func goDhtcTorrent(h C.uintptr_t, doc *C.char, info *C.char, infoLen C.size_t) (answer C.int) {
	defer func() {
		if p := recover(); p != nil {
			answer = C.int(answerReject)
		}
	}()
	c, leave := crawlerOf(h)
	defer leave()
	if c == nil {
		return C.int(answerReject)
	}
	defer func() {
		if p := recover(); p != nil {
			c.report("torrent", p)
			answer = C.int(answerReject)
		}
	}()
	t, err := decodeTorrent(C.GoString(doc), C.GoBytes(unsafe.Pointer(info), C.int(infoLen)))
	if err != nil {
		panic(fmt.Sprintf("undecodable torrent JSON: %v", err))
	}
	a := AnswerAccept
	if c.answer != nil {
		a = c.answer(t)
	}
	switch a {
	case AnswerReject, AnswerRetry:
		return C.int(a)
	case AnswerAccept:
	default:
		panic(fmt.Sprintf("answer %d is not AnswerAccept, AnswerReject or AnswerRetry", int(a)))
	}
	if !c.deliver(t) {
		return C.int(answerRetry) // wanted, but not taken: fetched again
	}
	return C.int(answerAccept)
}

// deliver puts t in the channel, waiting for the reader while the crawler runs (that wait
// is the back-pressure); after Shutdown it gives up when the channel is full (the torrent
// is then answered AnswerRetry: it was not taken, so it is fetched again).
func (c *Crawler) deliver(t *Torrent) bool {
	select {
	case c.torrents <- t:
		return true
	default:
	}
	select {
	case c.torrents <- t:
		return true
	case <-c.stopping:
		return false
	}
}

const (
	eventCompletion  = 1 // GOC_EVENT_COMPLETION in trampolines.h
	eventError       = 2
	eventObservation = 3
	eventRetry       = 4
	eventScrape      = 5
)

// goDhtcEvent decodes by the envelope's "type", not by the callback it came through, so an
// event always reaches the function of its own type; one of an unknown type is logged and
// dropped, one without a function here is dropped.
//
//export goDhtcEvent
func goDhtcEvent(h C.uintptr_t, kind C.int, doc *C.char) {
	defer func() { _ = recover() }()
	c, leave := crawlerOf(h)
	defer leave()
	if c == nil {
		return
	}
	raw := C.GoString(doc)
	where := map[C.int]string{eventCompletion: "completion", eventError: "error", eventObservation: "observation",
		eventRetry: "retry", eventScrape: "scrape"}[kind]
	defer func() {
		if p := recover(); p != nil {
			c.report(where, p)
		}
	}()
	ev, err := decodeEvent(raw, nil)
	if err != nil {
		panic(err.Error())
	}
	switch e := ev.(type) {
	case Completion:
		if c.onCompletion != nil {
			c.onCompletion(e)
		}
	case Retry:
		if c.onRetry != nil {
			c.onRetry(e)
		}
	case Observation:
		if c.onObservation != nil {
			c.onObservation(e)
		}
	case Scrape:
		if c.onScrape != nil {
			c.onScrape(e)
		}
	case ErrorEvent:
		if c.onError != nil {
			c.onError(e.Message)
		}
	}
}
