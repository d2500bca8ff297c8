package dhtcrawler_test

// Loopback stand-ins the contract tests need: a DHT client that announces a peer to the
// crawler (the bencode it needs, with limits), and a peer that accepts and never answers,
// so fetches stay in flight.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dhtcrawler/dhtcrawler/go/dhtcrawler"
)

// loopbackOptions never reaches the real DHT: no bootstrap, loopback only, the default
// budgets. Peer sessions are plaintext TCP, what the tests' peers speak: the default (uTP
// first, MSE) would wait out a silent SYN before each fetch.
func loopbackOptions() map[string]any {
	return map[string]any{
		"port":                    0,
		"bind_v4":                 "127.0.0.1",
		"allow_private_addresses": true,
		"crawl": map[string]any{
			"bootstrap": map[string]any{"sources": []string{}},
		},
		"metadata": map[string]any{"timeout_secs": 2, "gate_timeout_millis": 2000,
			"transports": "tcp", "encryption": "prefer_plaintext"},
	}
}

// running creates a crawler and runs it until the test ends.
func running(t *testing.T, options map[string]any, settings ...dhtcrawler.Setting) *dhtcrawler.Crawler {
	t.Helper()
	c, err := dhtcrawler.New(options, settings...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		c.Close()
	})
	return c
}

func udpPort(t *testing.T, c *dhtcrawler.Crawler) int {
	t.Helper()
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Endpoints) == 0 {
		t.Fatal("no endpoint in the stats")
	}
	ep := s.Endpoints[0]
	port, err := strconv.Atoi(ep[strings.LastIndexByte(ep, ':')+1:])
	if err != nil {
		t.Fatalf("endpoint %q: %v", ep, err)
	}
	return port
}

// ---- bencode, just enough for KRPC replies ------------------------------------------------

func benc(v any) []byte {
	var b bytes.Buffer
	bencTo(&b, v)
	return b.Bytes()
}

func bencTo(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case int:
		fmt.Fprintf(b, "i%de", x)
	case string:
		fmt.Fprintf(b, "%d:%s", len(x), x)
	case []byte:
		fmt.Fprintf(b, "%d:", len(x))
		b.Write(x)
	case map[string]any: // keys must be sorted; callers pass few keys, sorted here
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		for i := range keys {
			for j := i + 1; j < len(keys); j++ {
				if keys[j] < keys[i] {
					keys[i], keys[j] = keys[j], keys[i]
				}
			}
		}
		b.WriteByte('d')
		for _, k := range keys {
			bencTo(b, k)
			bencTo(b, x[k])
		}
		b.WriteByte('e')
	default:
		panic(fmt.Sprintf("bencode: %T", v))
	}
}

var errBencode = errors.New("bad bencode")

// unbenc decodes one value (strings, integers, lists, dicts) at most 32 levels deep.
func unbenc(data []byte) (any, error) {
	v, rest, err := unbencAt(data, 0)
	if err == nil && len(rest) != 0 {
		err = errBencode
	}
	return v, err
}

func unbencAt(d []byte, depth int) (any, []byte, error) {
	if len(d) == 0 || depth > 32 {
		return nil, nil, errBencode
	}
	switch {
	case d[0] == 'i':
		end := bytes.IndexByte(d, 'e')
		if end < 0 {
			return nil, nil, errBencode
		}
		n, err := strconv.ParseInt(string(d[1:end]), 10, 64)
		return n, d[end+1:], err
	case d[0] == 'l' || d[0] == 'd':
		isDict := d[0] == 'd'
		d = d[1:]
		var list []any
		for len(d) > 0 && d[0] != 'e' {
			var v any
			var err error
			if v, d, err = unbencAt(d, depth+1); err != nil {
				return nil, nil, err
			}
			list = append(list, v)
		}
		if len(d) == 0 {
			return nil, nil, errBencode
		}
		if !isDict {
			return list, d[1:], nil
		}
		if len(list)%2 != 0 {
			return nil, nil, errBencode
		}
		m := map[string]any{}
		for i := 0; i < len(list); i += 2 {
			k, ok := list[i].(string)
			if !ok {
				return nil, nil, errBencode
			}
			m[k] = list[i+1]
		}
		return m, d[1:], nil
	case d[0] >= '0' && d[0] <= '9':
		colon := bytes.IndexByte(d, ':')
		if colon < 0 {
			return nil, nil, errBencode
		}
		n, err := strconv.Atoi(string(d[:colon]))
		if err != nil || n < 0 || n > len(d)-colon-1 {
			return nil, nil, errBencode
		}
		return string(d[colon+1 : colon+1+n]), d[colon+1+n:], nil
	}
	return nil, nil, errBencode
}

// ---- a DHT client on loopback ---------------------------------------------------------------

// announcer is a DHT node on 127.0.0.1. Its announces each come from a node of their own
// (another port of 127.0.0.1, the address the announced peer is taken from), so tests that
// announce several hashes at once stay within the crawler's default per-node budget, as the
// many nodes announcing on the real DHT do.
type announcer struct {
	conn *net.UDPConn
	seq  int
}

func newAnnouncer(t *testing.T) *announcer {
	t.Helper()
	a, err := openAnnouncer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.conn.Close() })
	return a
}

func openAnnouncer() (*announcer, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	return &announcer{conn: conn}, nil
}

var clientID = strings.Repeat("\x42", 20)

func (a *announcer) query(port int, method string, args map[string]any) (string, []byte) {
	a.seq++
	tid := fmt.Sprintf("t%d", a.seq)
	args["id"] = clientID
	packet := benc(map[string]any{"t": tid, "y": "q", "q": method, "a": args})
	_, _ = a.conn.WriteToUDP(packet, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	return tid, packet
}

// ask sends a query and returns the reply's "r" dict. The crawler may query us as well
// (we are a node to it): datagrams that are not the reply are skipped. Like a real node, a
// query unanswered for a second is sent again, 5 times at most: a crawler still starting on a
// loaded machine may answer late.
func (a *announcer) ask(port int, method string, args map[string]any) (map[string]any, error) {
	tid, packet := a.query(port, method, args)
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	buf := make([]byte, 1500)
	for i, sends := 0, 1; i < 16; i++ {
		_ = a.conn.SetReadDeadline(time.Now().Add(time.Second))
		n, _, err := a.conn.ReadFromUDP(buf)
		var timeout net.Error
		if errors.As(err, &timeout) && timeout.Timeout() && sends < 5 {
			sends++
			_, _ = a.conn.WriteToUDP(packet, to)
			continue
		}
		if err != nil {
			return nil, err
		}
		v, err := unbenc(buf[:n])
		m, ok := v.(map[string]any)
		if err != nil || !ok || m["t"] != tid {
			continue
		}
		if m["y"] != "r" {
			return nil, fmt.Errorf("%s: error reply %v", method, m["e"])
		}
		r, _ := m["r"].(map[string]any)
		return r, nil
	}
	return nil, fmt.Errorf("%s: no reply", method)
}

// announce tells the crawler, from a node of its own, that a peer on peerPort has infoHash
// (20 raw bytes).
func (a *announcer) announce(port int, infoHash string, peerPort int) error {
	node, err := openAnnouncer()
	if err != nil {
		return err
	}
	defer node.conn.Close()
	return node.announceFromHere(port, infoHash, peerPort)
}

func (a *announcer) announceFromHere(port int, infoHash string, peerPort int) error {
	token, err := a.token(port, infoHash)
	if err != nil {
		return err
	}
	_, err = a.ask(port, "announce_peer", map[string]any{
		"info_hash": infoHash, "port": peerPort, "token": token, "implied_port": 0})
	return err
}

// token asks for the write token an announce of infoHash carries.
func (a *announcer) token(port int, infoHash string) (string, error) {
	r, err := a.ask(port, "get_peers", map[string]any{"info_hash": infoHash})
	if err != nil {
		return "", err
	}
	token, ok := r["token"].(string)
	if !ok {
		return "", errors.New("get_peers reply without a token")
	}
	return token, nil
}

// announceUnanswered announces as announce does, without waiting for the reply to the
// announce itself: for a crawler that stops in the gate the announce reaches, and so may
// never reply (waiting out announce's five resends took 5 s).
func (a *announcer) announceUnanswered(port int, infoHash string, peerPort int) error {
	token, err := a.token(port, infoHash)
	if err != nil {
		return err
	}
	a.query(port, "announce_peer", map[string]any{"info_hash": infoHash, "port": peerPort, "token": token, "implied_port": 0})
	return nil
}

// getPeers sends a get_peers without waiting: the crawler sees it as an observation.
func (a *announcer) getPeers(port int, infoHash string) {
	a.query(port, "get_peers", map[string]any{"info_hash": infoHash})
}

func hashOf(i int) string { return fmt.Sprintf("%020d", i) }

func hexOf(raw string) string { return fmt.Sprintf("%x", raw) }

// ---- a peer that accepts and never answers ---------------------------------------------------

type silentPeer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newSilentPeer(t *testing.T) *silentPeer {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentPeer{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, conn)
			silentConnsHeld.Add(1)
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
			silentConnsHeld.Add(-1)
		}
		p.mu.Unlock()
	})
	return p
}

// silentConnsHeld counts the connections every silent peer holds open: descriptors of
// the test, not of a crawler (a crawler with a shared retry store may fetch a hash of an
// earlier round from that round's peer).
var silentConnsHeld atomic.Int64

func (p *silentPeer) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func threadCount() int {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return -1
	}
	return len(entries)
}

// eventually polls cond every 10 ms up to n times; tests bound their waits by counts.
func eventually(n int, cond func() bool) bool {
	for i := 0; i < n; i++ {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}
