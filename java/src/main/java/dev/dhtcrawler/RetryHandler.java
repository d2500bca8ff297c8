package dev.dhtcrawler;

/**
 * Receives what the retry store made of each round (only with a retry store), after it committed
 * it. Runs on the delivery thread; an exception is reported to the error handler.
 */
@FunctionalInterface
public interface RetryHandler {
    void onRetry(Retry retry);
}
