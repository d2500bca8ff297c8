// Crawls the DHT and prints every torrent as one JSON line; statistics go to stderr at the end.
//
//   mvn -q -f java/pom.xml dependency:build-classpath -DincludeScope=runtime -Dmdep.outputFile=$PWD/java/target/cp.txt
//   java -cp java/target/dhtcrawler-0.1.0.jar:$(cat java/target/cp.txt) examples/java/Crawl.java \
//        [--seconds N] [--port P] [--bootstrap host:port]... [--allow-private]
//
// With --bootstrap the given routers replace the default ones (a lab network: add
// --allow-private for private or loopback addresses).
import dev.dhtcrawler.Crawler;
import dev.dhtcrawler.Options;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

public class Crawl {
    public static void main(String[] args) throws Exception {
        long seconds = 60;
        Options.Builder options = Options.builder();
        List<String> bootstrap = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--seconds" -> seconds = Long.parseLong(args[++i]);
                case "--port" -> options.port(Integer.parseInt(args[++i]));
                case "--bootstrap" -> bootstrap.add(args[++i]);
                case "--allow-private" -> options.allowPrivateAddresses(true);
                default -> {
                    System.err.println("usage: Crawl [--seconds N] [--port P] [--bootstrap host:port]... [--allow-private]");
                    System.exit(2);
                }
            }
        }
        if (!bootstrap.isEmpty()) options.bootstrap(bootstrap);

        try (Crawler crawler = new Crawler(options.build())) {
            crawler.onTorrent(torrent -> System.out.println(torrent.json()));
            crawler.onError(message -> System.err.println("error: " + message));
            crawler.start();
            crawler.awaitShutdown(Duration.ofSeconds(seconds)); // or until something calls shutdown()
            crawler.shutdown();
            System.err.println(crawler.observability());
        }
    }
}
