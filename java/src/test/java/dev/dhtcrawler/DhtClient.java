package dev.dhtcrawler;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A DHT client on loopback for the tests: asks the crawler get_peers (which it reports as an
 * observation) and announces a peer to it (which starts a round: gate, fetch, completion).
 * Holds its own small bencode codec.
 */
final class DhtClient implements AutoCloseable {
    private static final InetAddress LOOPBACK = InetAddress.getLoopbackAddress();
    private final DatagramSocket socket;
    private final byte[] id = filled(0x42);
    private int transaction;

    DhtClient() throws IOException {
        socket = new DatagramSocket(new InetSocketAddress(LOOPBACK, 0));
        socket.setSoTimeout(1000);
    }

    @Override
    public void close() {
        socket.close();
    }

    /** The port this client sends from (the crawler sees it as the node's port). */
    int localPort() {
        return socket.getLocalPort();
    }

    static byte[] filled(int b) {
        byte[] out = new byte[20];
        Arrays.fill(out, (byte) b);
        return out;
    }

    static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder();
        for (byte b : bytes) sb.append(String.format("%02x", b & 0xff));
        return sb.toString();
    }

    /** The crawler's UDP port, from its stats snapshot. */
    static int portOf(Crawler crawler) {
        @SuppressWarnings("unchecked")
        List<String> endpoints = (List<String>) crawler.statsMap().get("endpoints");
        String ep = endpoints.get(0);
        return Integer.parseInt(ep.substring(ep.lastIndexOf(':') + 1));
    }

    /** Sends get_peers without waiting for the answer. */
    void sendGetPeers(int port, byte[] infoHash) throws IOException {
        send(port, query("get_peers", nextTransaction(), args(infoHash, null, 0)));
    }

    /** get_peers, then announce_peer with the token it returned: the crawler learns a peer. */
    void announce(int port, byte[] infoHash, int peerPort) throws IOException {
        Map<String, Object> reply = ask(port, "get_peers", args(infoHash, null, 0));
        @SuppressWarnings("unchecked")
        Map<String, Object> r = (Map<String, Object>) reply.get("r");
        if (r == null || !(r.get("token") instanceof byte[] token)) throw new IOException("get_peers: no token in " + reply);
        Map<String, Object> answer = ask(port, "announce_peer", args(infoHash, token, peerPort));
        if (!"r".equals(str(answer.get("y")))) throw new IOException("announce_peer refused: " + answer);
    }

    private Map<String, Object> args(byte[] infoHash, byte[] token, int port) {
        Map<String, Object> a = new TreeMap<>();
        a.put("id", id);
        a.put("info_hash", infoHash);
        if (token != null) {
            a.put("port", (long) port);
            a.put("token", token);
        }
        return a;
    }

    private byte[] nextTransaction() {
        int t = ++transaction;
        return new byte[] {(byte) (t >> 8), (byte) t};
    }

    private static byte[] query(String q, byte[] t, Map<String, Object> a) {
        Map<String, Object> m = new TreeMap<>();
        m.put("a", a);
        m.put("q", q.getBytes(StandardCharsets.US_ASCII));
        m.put("t", t);
        m.put("y", "q".getBytes(StandardCharsets.US_ASCII));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        encode(m, out);
        return out.toByteArray();
    }

    /**
     * Sends a query and returns the reply with its transaction id; the crawler's own queries to us are
     * skipped. Like a real DHT node, a query unanswered for a second is sent again (a crawler still
     * starting on a loaded machine may answer late), 5 times at most.
     */
    private Map<String, Object> ask(int port, String q, Map<String, Object> a) throws IOException {
        byte[] t = nextTransaction();
        byte[] packet = query(q, t, a);
        send(port, packet);
        byte[] buf = new byte[1500];
        for (int i = 0, sends = 1; i < 16; i++) {
            DatagramPacket p = new DatagramPacket(buf, buf.length);
            try {
                socket.receive(p);
            } catch (SocketTimeoutException e) {
                if (sends++ == 5) break;
                send(port, packet);
                continue;
            }
            Object decoded;
            try {
                decoded = new Decoder(Arrays.copyOf(p.getData(), p.getLength())).value();
            } catch (IllegalArgumentException e) {
                continue;
            }
            if (decoded instanceof Map<?, ?> m && m.get("t") instanceof byte[] rt && Arrays.equals(rt, t)) {
                String y = str(m.get("y"));
                if ("r".equals(y) || "e".equals(y)) {
                    @SuppressWarnings("unchecked")
                    Map<String, Object> reply = (Map<String, Object>) m;
                    return reply;
                }
            }
        }
        throw new IOException(q + ": no reply from 127.0.0.1:" + port);
    }

    private void send(int port, byte[] packet) throws IOException {
        socket.send(new DatagramPacket(packet, packet.length, new InetSocketAddress(LOOPBACK, port)));
    }

    private static String str(Object o) {
        return o instanceof byte[] b ? new String(b, StandardCharsets.ISO_8859_1) : null;
    }

    private static void encode(Object v, ByteArrayOutputStream out) {
        if (v instanceof byte[] b) {
            out.writeBytes((b.length + ":").getBytes(StandardCharsets.US_ASCII));
            out.writeBytes(b);
        } else if (v instanceof Long n) {
            out.writeBytes(("i" + n + "e").getBytes(StandardCharsets.US_ASCII));
        } else if (v instanceof Map<?, ?> m) {
            out.write('d');
            for (Map.Entry<?, ?> e : new TreeMap<>(m).entrySet()) {
                encode(((String) e.getKey()).getBytes(StandardCharsets.US_ASCII), out);
                encode(e.getValue(), out);
            }
            out.write('e');
        } else {
            throw new IllegalArgumentException("cannot bencode " + v);
        }
    }

    /** A bencode decoder for replies: dicts (String keys), lists, integers, byte strings. */
    private static final class Decoder {
        private final byte[] in;
        private int pos;

        Decoder(byte[] in) {
            this.in = in;
        }

        Object value() {
            if (pos >= in.length) throw new IllegalArgumentException("truncated");
            byte c = in[pos];
            if (c == 'i') {
                int end = indexOf('e', ++pos);
                long n = Long.parseLong(new String(in, pos, end - pos, StandardCharsets.US_ASCII));
                pos = end + 1;
                return n;
            }
            if (c == 'l') {
                pos++;
                List<Object> list = new ArrayList<>();
                while (peek() != 'e') list.add(value());
                pos++;
                return list;
            }
            if (c == 'd') {
                pos++;
                Map<String, Object> map = new TreeMap<>();
                while (peek() != 'e') map.put(new String((byte[]) value(), StandardCharsets.ISO_8859_1), value());
                pos++;
                return map;
            }
            int colon = indexOf(':', pos);
            int len = Integer.parseInt(new String(in, pos, colon - pos, StandardCharsets.US_ASCII));
            if (len < 0 || colon + 1 + len > in.length) throw new IllegalArgumentException("bad length");
            pos = colon + 1 + len;
            return Arrays.copyOfRange(in, colon + 1, pos);
        }

        private byte peek() {
            if (pos >= in.length) throw new IllegalArgumentException("truncated");
            return in[pos];
        }

        private int indexOf(char ch, int from) {
            for (int i = from; i < in.length; i++) if (in[i] == ch) return i;
            throw new IllegalArgumentException("truncated");
        }
    }
}
