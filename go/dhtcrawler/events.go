package dhtcrawler

import (
	"encoding/json"
	"fmt"
	"log"
	"time"
)

// Answer is what the application made of a torrent (dhtc_answer), returned by the
// WithAnswer function or given to Crawler.Answer; for a polled gate, AnswerAccept fetches
// the hash and AnswerReject skips it.
type Answer int

const (
	// AnswerReject: not wanted. The round completes "delivery_rejected"; the hash is done.
	AnswerReject = Answer(answerReject)
	// AnswerAccept: stored. The round completes "accepted"; the hash is done.
	AnswerAccept = Answer(answerAccept)
	// AnswerRetry: wanted, but it could not be stored now (a sink failed). The round
	// completes "sink_failed", the hash is not recorded done and is fetched again (on the
	// retry store's short schedule, or at its next announce without a store).
	AnswerRetry = Answer(answerRetry)
)

func (a Answer) String() string {
	switch a {
	case AnswerReject:
		return "reject"
	case AnswerAccept:
		return "accept"
	case AnswerRetry:
		return "retry"
	}
	return fmt.Sprintf("Answer(%d)", int(a))
}

// Event is one polled event (Crawler.Poll): a Gate, a *TorrentEvent, a Completion, a
// Retry, an ErrorEvent or an Observation. Switch on its type.
type Event interface {
	// Type is the event's "type" ("gate", "torrent", "completion", "retry", "error",
	// "observation").
	Type() string
}

// Gate asks whether a hash should be fetched (polling only). Answer it with
// Crawler.Answer(g.ID, AnswerAccept) or AnswerReject; unanswered, it takes
// metadata.gate_default after metadata.gate_timeout_millis.
type Gate struct {
	ID       uint64          `json:"id"`
	InfoHash string          `json:"info_hash"`
	JSON     json.RawMessage `json:"-"`
}

// TorrentEvent is a verified torrent (polling only). Answer it with Crawler.Answer(e.ID,
// AnswerAccept), AnswerReject or AnswerRetry; unanswered, it is answered AnswerRetry after
// metadata.gate_timeout_millis (it was not stored, so it is fetched again).
type TorrentEvent struct {
	ID      uint64
	Torrent *Torrent
	JSON    json.RawMessage // the whole event envelope
}

// Completion ends one gated round of a hash (docs/events.md).
type Completion struct {
	InfoHash string `json:"info_hash"`
	// Outcome: "accepted", "fetch_failed", "delivery_rejected", "sink_failed" (the torrent
	// was answered AnswerRetry: not recorded done, fetched again) or "cancelled".
	Outcome string `json:"outcome"`
	// Failure is the class of the last attempt for "fetch_failed" (one of the Failure*
	// constants, or a class a later library adds); "" otherwise.
	Failure  string `json:"failure"`
	Attempts int    `json:"attempts"`
	Peer     string `json:"peer"`
	// Encryption ("plaintext" or "rc4") and Transport ("tcp" or "utp") name the stream
	// that served the metadata, with Peer; "" without a peer.
	Encryption string `json:"encryption"`
	Transport  string `json:"transport"`
	// Round counts the failed rounds before this one (with a retry store; 0 without).
	Round int `json:"round"`
	// JSON is the whole event envelope.
	JSON json.RawMessage `json:"-"`
}

// The failure classes of Completion.Failure and Retry.Failure (docs/events.md).
const (
	FailureConnectRefused     = "connect_refused"
	FailureConnectTimeout     = "connect_timeout"
	FailureHandshakeFailed    = "handshake_failed"
	FailureNoExtensionSupport = "no_extension_support"
	FailureNoMetadataSupport  = "no_metadata_support"
	FailureRejected           = "rejected"
	FailureTimeout            = "timeout"
	FailureSizeLimit          = "size_limit"
	FailureHashMismatch       = "hash_mismatch"
	FailureParseError         = "parse_error"
	FailureNoPeers            = "no_peers"
	FailureProtocolError      = "protocol_error"
	FailureDisconnected       = "disconnected"
	FailureSinkFailed         = "sink_failed"
	FailureCancelled          = "cancelled"
	// FailureEncryptionFailed: the MSE/PE exchange failed (no common method, no VC, the
	// peer closed it, RC4 unavailable).
	FailureEncryptionFailed = "encryption_failed"
	// FailureUTPTimeout: the peer went silent on uTP (SYN or data unanswered).
	FailureUTPTimeout = "utp_timeout"
)

// Retry is what the retry store made of a round, after it committed it (only with a
// retry store; docs/events.md).
type Retry struct {
	InfoHash string `json:"info_hash"`
	// State: "dormant" (the round failed; due again at NextRetryAt) or "done" (delivered,
	// never fetched again).
	State string `json:"state"`
	// Attempts counts the failed rounds so far; 0 for "done".
	Attempts int `json:"attempts"`
	// Failure is the class that failed the round ("" for "done").
	Failure string `json:"failure"`
	// NextRetryAt is when a dormant hash is due again (whole seconds, UTC); zero for "done".
	NextRetryAt time.Time       `json:"-"`
	JSON        json.RawMessage `json:"-"`
}

// ErrorEvent is a runtime error of the library (polling; callbacks get the message).
type ErrorEvent struct {
	Message string          `json:"message"`
	JSON    json.RawMessage `json:"-"`
}

// Observation is a hash the DHT side saw (docs/events.md): looked up ("get_peers"),
// sampled ("bep51_sample") or announced ("announce", at most announce_observations_per_sec).
type Observation struct {
	InfoHash string `json:"info_hash"`
	Source   string `json:"source"` // the node, "ip:port", that queried us or sent the sample
	Kind     string `json:"kind"`   // "get_peers", "bep51_sample" or "announce"
	// Port is the port an announce named (the peer is Source's IP at it); 0 for other kinds.
	Port uint16          `json:"-"`
	At   time.Time       `json:"-"` // when the crawler saw it (whole seconds, UTC)
	JSON json.RawMessage `json:"-"`
}

// Scrape is the answer to Crawler.RequestScrape (BEP-33): the swarm's seeders and leechers
// estimated from the bloom filters of the nodes closest to the hash, Responders of which
// described the swarm (0: nobody knew it, the estimates mean unknown) out of Queried.
// TimedOut: crawl.scrape.timeout_secs ended it (no node to ask, or answers missing).
type Scrape struct {
	InfoHash   string          `json:"info_hash"`
	Seeders    uint64          `json:"seeders"`
	Leechers   uint64          `json:"leechers"`
	Responders uint32          `json:"responders"`
	Queried    uint32          `json:"queried"`
	TimedOut   bool            `json:"timed_out"`
	At         time.Time       `json:"-"` // when the scrape ended
	JSON       json.RawMessage `json:"-"`
}

func (Gate) Type() string          { return "gate" }
func (*TorrentEvent) Type() string { return "torrent" }
func (Completion) Type() string    { return "completion" }
func (Retry) Type() string         { return "retry" }
func (ErrorEvent) Type() string    { return "error" }
func (Observation) Type() string   { return "observation" }
func (Scrape) Type() string        { return "scrape" }

// logf reports what the package ignores (an event type it does not know); a variable so
// tests can watch it.
var logf = defaultLogf

func defaultLogf(format string, args ...any) { log.Printf(format, args...) }

// decodeEvent decodes an event envelope by its "type". An unknown type yields (nil, nil)
// and a log line: the library may add types, and a host ignores those it does not know.
// info is the raw info dict of a polled torrent.
func decodeEvent(doc string, info []byte) (Event, error) {
	raw := json.RawMessage(doc)
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("dhtcrawler: undecodable event JSON: %w", err)
	}
	var ev Event
	var err error
	switch head.Type {
	case "gate":
		e := Gate{JSON: raw}
		err = json.Unmarshal(raw, &e)
		ev = e
	case "torrent":
		var env struct {
			ID      uint64          `json:"id"`
			Torrent json.RawMessage `json:"torrent"`
		}
		if err = json.Unmarshal(raw, &env); err == nil {
			var t *Torrent
			if t, err = decodeTorrent(string(env.Torrent), info); err == nil {
				ev = &TorrentEvent{ID: env.ID, Torrent: t, JSON: raw}
			}
		}
	case "completion":
		e := Completion{JSON: raw}
		err = json.Unmarshal(raw, &e)
		ev = e
	case "retry":
		var e Retry
		e, err = decodeRetry(raw)
		ev = e
	case "error":
		e := ErrorEvent{JSON: raw}
		err = json.Unmarshal(raw, &e)
		ev = e
	case "observation":
		var e struct {
			Observation
			Port *uint16 `json:"port"`
			At   int64   `json:"at"`
		}
		err = json.Unmarshal(raw, &e)
		o := e.Observation
		if e.Port != nil {
			o.Port = *e.Port
		}
		if e.At != 0 {
			o.At = time.Unix(e.At, 0).UTC()
		}
		o.JSON = raw
		ev = o
	case "scrape":
		var e struct {
			Scrape
			At int64 `json:"at"`
		}
		err = json.Unmarshal(raw, &e)
		s := e.Scrape
		s.At, s.JSON = time.Unix(e.At, 0).UTC(), raw
		ev = s
	default:
		logf("dhtcrawler: ignoring an event of unknown type %q", head.Type)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dhtcrawler: undecodable %s event: %w", head.Type, err)
	}
	return ev, nil
}

func decodeRetry(raw json.RawMessage) (Retry, error) {
	var e struct {
		Retry
		Next *int64 `json:"next_retry_at"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return Retry{}, err
	}
	r := e.Retry
	if e.Next != nil {
		r.NextRetryAt = time.Unix(*e.Next, 0).UTC()
	}
	r.JSON = raw
	return r, nil
}
