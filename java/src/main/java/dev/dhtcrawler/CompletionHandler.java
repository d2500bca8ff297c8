package dev.dhtcrawler;

/**
 * Receives the one completion of every round that passed the gate. Runs on the delivery thread.
 */
@FunctionalInterface
public interface CompletionHandler {
    void onCompletion(Completion completion);
}
