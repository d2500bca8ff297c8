package dhtcrawler

import (
	"encoding/json"
	"time"
)

// Torrent is one verified torrent, decoded from the torrent JSON form
// (docs/torrent-json.md), with that document and the raw info dict kept as received.
// Fields the form gains later are in JSON only.
type Torrent struct {
	Schema      int    `json:"schema"`
	InfoHash    string `json:"info_hash"`    // the DHT key it was found under, 40 lower-case hex
	InfoHashV1  string `json:"info_hash_v1"` // "" for a v2-only torrent (null in JSON)
	InfoHashV2  string `json:"info_hash_v2"` // "" for a v1-only torrent (null in JSON)
	Version     string `json:"version"`      // "v1", "v2" or "hybrid"
	Name        string `json:"name"`
	TotalSize   int64  `json:"total_size"`
	NumFiles    int    `json:"num_files"`
	PieceLength int64  `json:"piece_length"`
	Private     bool   `json:"private"`
	Files       []File `json:"files"`
	// Peer served the metadata: "1.2.3.4:6881" or "[2001:db8::1]:6881".
	Peer string `json:"peer"`
	// DiscoveredAt is when the metadata was verified (UTC, whole seconds).
	DiscoveredAt time.Time `json:"discovered_at"`
	// Encryption ("plaintext" or "rc4") and Transport ("tcp" or "utp"): the stream that
	// served the metadata.
	Encryption string `json:"encryption"`
	Transport  string `json:"transport"`

	// JSON is the torrent JSON document exactly as the library produced it.
	JSON json.RawMessage `json:"-"`
	// Info is the raw bencoded info dict exactly as received; its SHA-1 (v1) or
	// SHA-256 (v2) is the info hash.
	Info []byte `json:"-"`
}

// File is one payload file; padding files are excluded.
type File struct {
	Path string `json:"path"` // relative to the torrent root, elements joined with '/'
	Size int64  `json:"size"`
}

// decodeTorrent copies everything it keeps: the C buffers die when the callback returns.
func decodeTorrent(doc string, info []byte) (*Torrent, error) {
	t := &Torrent{}
	if err := json.Unmarshal([]byte(doc), t); err != nil {
		return nil, err
	}
	t.JSON = json.RawMessage(doc)
	t.Info = info
	return t, nil
}

// Stats is the runtime snapshot (docs/metrics.md); Raw holds the whole document, with
// any field added later.
type Stats struct {
	Schema              int      `json:"schema"`
	NodeID              string   `json:"node_id"`
	Endpoints           []string `json:"endpoints"`
	NodePoolSize        uint64   `json:"node_pool_size"`
	NodePoolCapacity    uint64   `json:"node_pool_capacity"`
	ResponsiveNodes     uint64   `json:"responsive_nodes"`
	InFlight            uint64   `json:"in_flight"`
	MetadataQueueDepth  uint64   `json:"metadata_queue_depth"`
	MetadataQueueMax    uint64   `json:"metadata_queue_max"`
	HashIngressDepth    uint64   `json:"hash_ingress_depth"`
	HashIngressCapacity uint64   `json:"hash_ingress_capacity"`
	MetadataInFlight    uint64   `json:"metadata_in_flight"`
	MetadataPressure    float64  `json:"metadata_pressure"`
	QueryRate           float64  `json:"query_rate"`
	Normalized          []string `json:"normalized"`

	Raw json.RawMessage `json:"-"`
}
