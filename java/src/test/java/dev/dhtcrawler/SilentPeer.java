package dev.dhtcrawler;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;

/** A BitTorrent peer on loopback that accepts connections and never says a word: fetches to it stay in flight. */
final class SilentPeer implements AutoCloseable {
    private final ServerSocket server;
    private final List<Socket> held = new ArrayList<>();
    private final Thread acceptor;

    SilentPeer() throws IOException {
        server = new ServerSocket();
        server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
        acceptor = new Thread(this::accept, "silent-peer");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    int port() {
        return server.getLocalPort();
    }

    /** The connections it holds open (file descriptors of this process). */
    int held() {
        synchronized (held) {
            return held.size();
        }
    }

    private void accept() {
        while (!server.isClosed()) {
            try {
                Socket s = server.accept();
                synchronized (held) {
                    if (held.size() >= 256) held.remove(0).close(); // bounded
                    held.add(s);
                }
            } catch (IOException e) {
                return;
            }
        }
    }

    @Override
    public void close() throws IOException {
        server.close();
        synchronized (held) {
            for (Socket s : held) s.close();
            held.clear();
        }
    }
}
