package dev.dhtcrawler;

/**
 * Receives the answers to {@link Crawler#requestScrape(String)}. Runs on the delivery thread; when
 * the application falls behind, answers are dropped and counted.
 */
@FunctionalInterface
public interface ScrapeHandler {
    void onScrape(Scrape scrape);
}
