package dhtcrawler

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestDecodeEveryEventType(t *testing.T) {
	cases := []struct {
		doc  string
		want Event
	}{
		{`{"type":"gate","schema":1,"id":7,"info_hash":"aa"}`, Gate{ID: 7, InfoHash: "aa"}},
		{`{"type":"completion","schema":1,"info_hash":"aa","outcome":"sink_failed","failure":null,"attempts":1,"peer":"1.2.3.4:1","round":2}`,
			Completion{InfoHash: "aa", Outcome: "sink_failed", Attempts: 1, Peer: "1.2.3.4:1", Round: 2}},
		{`{"type":"completion","schema":1,"info_hash":"aa","outcome":"accepted","failure":null,"attempts":1,"peer":"1.2.3.4:1","encryption":"rc4","transport":"utp","round":0}`,
			Completion{InfoHash: "aa", Outcome: "accepted", Attempts: 1, Peer: "1.2.3.4:1", Encryption: "rc4", Transport: "utp"}},
		{`{"type":"completion","schema":1,"info_hash":"aa","outcome":"fetch_failed","failure":"utp_timeout","attempts":3,"peer":null,"encryption":null,"transport":null,"round":0}`,
			Completion{InfoHash: "aa", Outcome: "fetch_failed", Failure: FailureUTPTimeout, Attempts: 3}},
		{`{"type":"retry","schema":1,"info_hash":"aa","state":"dormant","attempts":1,"failure":"encryption_failed","next_retry_at":1767312000}`,
			Retry{InfoHash: "aa", State: "dormant", Attempts: 1, Failure: FailureEncryptionFailed, NextRetryAt: time.Unix(1767312000, 0).UTC()}},
		{`{"type":"retry","schema":1,"info_hash":"aa","state":"dormant","attempts":2,"failure":"no_peers","next_retry_at":1767312000}`,
			Retry{InfoHash: "aa", State: "dormant", Attempts: 2, Failure: "no_peers", NextRetryAt: time.Unix(1767312000, 0).UTC()}},
		{`{"type":"retry","schema":1,"info_hash":"aa","state":"done","attempts":0,"failure":null,"next_retry_at":null}`,
			Retry{InfoHash: "aa", State: "done"}},
		{`{"type":"error","schema":1,"message":"boom"}`, ErrorEvent{Message: "boom"}},
		{`{"type":"observation","schema":1,"info_hash":"aa","source":"1.2.3.4:1","kind":"get_peers"}`,
			Observation{InfoHash: "aa", Source: "1.2.3.4:1", Kind: "get_peers"}},
		{`{"type":"observation","schema":1,"info_hash":"aa","source":"1.2.3.4:1","kind":"get_peers","port":null,"at":1767312000}`,
			Observation{InfoHash: "aa", Source: "1.2.3.4:1", Kind: "get_peers", At: time.Unix(1767312000, 0).UTC()}},
		{`{"type":"observation","schema":1,"info_hash":"aa","source":"1.2.3.4:6881","kind":"announce","port":51413,"at":1767312000}`,
			Observation{InfoHash: "aa", Source: "1.2.3.4:6881", Kind: "announce", Port: 51413, At: time.Unix(1767312000, 0).UTC()}},
		{`{"type":"scrape","schema":1,"info_hash":"aa","seeders":0,"leechers":0,"responders":0,"queried":0,"timed_out":true,"at":1767312000}`,
			Scrape{InfoHash: "aa", TimedOut: true, At: time.Unix(1767312000, 0).UTC()}},
		{`{"type":"scrape","schema":1,"info_hash":"aa","seeders":6,"leechers":4,"responders":8,"queried":8,"at":1767312000}`,
			Scrape{InfoHash: "aa", Seeders: 6, Leechers: 4, Responders: 8, Queried: 8, At: time.Unix(1767312000, 0).UTC()}},
	}
	for _, tc := range cases {
		ev, err := decodeEvent(tc.doc, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.doc, err)
		}
		if ev.Type() != tc.want.Type() || string(jsonOf(ev)) != tc.doc {
			t.Errorf("%s: %T %+v", tc.doc, ev, ev)
		}
		if got, want := strip(ev), fmt.Sprintf("%+v", tc.want); got != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.doc, got, want)
		}
	}
	ev, err := decodeEvent(`{"type":"torrent","schema":1,"id":8,"torrent":{"schema":1,"info_hash":"bb","name":"x","encryption":"plaintext","transport":"tcp"}}`, []byte("d4:name1:xe"))
	te, ok := ev.(*TorrentEvent)
	if err != nil || !ok || te.ID != 8 || te.Torrent.InfoHash != "bb" || string(te.Torrent.Info) != "d4:name1:xe" ||
		te.Torrent.Encryption != "plaintext" || te.Torrent.Transport != "tcp" {
		t.Errorf("torrent event: %+v, %v", ev, err)
	}
}

func TestUnknownEventTypesAreLoggedAndIgnored(t *testing.T) {
	var lines []string
	logf = func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	defer func() { logf = defaultLogf }()
	ev, err := decodeEvent(`{"type":"hologram","schema":1}`, nil)
	if ev != nil || err != nil {
		t.Fatalf("unknown type: %v, %v", ev, err)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"hologram"`) {
		t.Errorf("log lines %q", lines)
	}
	if _, err := decodeEvent(`{"type":`, nil); err == nil {
		t.Error("undecodable JSON decoded")
	}
}

func jsonOf(ev Event) []byte {
	switch e := ev.(type) {
	case Gate:
		return e.JSON
	case Completion:
		return e.JSON
	case Retry:
		return e.JSON
	case ErrorEvent:
		return e.JSON
	case Observation:
		return e.JSON
	case Scrape:
		return e.JSON
	}
	return nil
}

// strip prints an event without its JSON.
func strip(ev Event) string {
	switch e := ev.(type) {
	case Gate:
		e.JSON = nil
		return fmt.Sprintf("%+v", e)
	case Completion:
		e.JSON = nil
		return fmt.Sprintf("%+v", e)
	case Retry:
		e.JSON = nil
		return fmt.Sprintf("%+v", e)
	case ErrorEvent:
		e.JSON = nil
		return fmt.Sprintf("%+v", e)
	case Observation:
		e.JSON = nil
		return fmt.Sprintf("%+v", e)
	case Scrape:
		e.JSON = nil
		return fmt.Sprintf("%+v", e)
	}
	return ""
}
