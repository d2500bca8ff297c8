package dev.dhtcrawler;

/**
 * Receives runtime errors of the crawler, and the exceptions thrown by the other handlers. Runs on
 * the delivery thread; an exception thrown here is dropped.
 */
@FunctionalInterface
public interface ErrorHandler {
    void onError(String message);
}
