package dev.dhtcrawler;

/**
 * Receives info hashes seen without a peer. Runs on the delivery thread; when the application falls
 * behind, observations are dropped and counted.
 */
@FunctionalInterface
public interface ObservationHandler {
    void onObservation(Observation observation);
}
