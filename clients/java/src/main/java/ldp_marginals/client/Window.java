package ldp_marginals.client;

/** A collection's event-time windows, as far as a device needs them: the slice of an event time
 *  (docs/client.md, section 5): {@code t - (t mod period)}, the period being the window's size when
 *  fixed and its period when sliding; 0 for the global window. */
final class Window {
    final String type;
    final long periodMs;   // 0 for the global window

    Window(String type, long periodMs) {
        this.type = type;
        this.periodMs = periodMs;
    }

    long sliceOf(long eventMs) {   // eventMs >= 0 (checked by the client)
        return periodMs == 0 ? 0 : eventMs - eventMs % periodMs;
    }
}
