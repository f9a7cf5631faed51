package ldp_marginals.client;

/**
 * The client refuses a config, a secret or one report's input: {@link #code()} is one of the codes of
 * docs/client.md, the same in every client; the message says which field is wrong. A refused report
 * draws no coins. Messages never carry a feature's value (the value a device is protecting), so logging
 * a refusal is safe; they may name config fields, dimension keys and the event time, which are public.
 */
public final class Refusal extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    /** The refusal codes of docs/client.md. */
    public enum Code {
        BAD_CONFIG("bad_config"),
        BAD_SECRET("bad_secret"),
        MISSING_FEATURE("missing_feature"),
        UNKNOWN_FEATURE("unknown_feature"),
        BAD_VALUE("bad_value"),
        OUT_OF_RANGE("out_of_range"),
        BAD_EVENT_TIME("bad_event_time"),
        BAD_DIMENSIONS("bad_dimensions"),
        /** A report past the collection's {@code reports_per_day} on its event's UTC day. */
        RATE_EXCEEDED("rate_exceeded"),
        /** A rate state the app restores that is not one ({@link DeviceClient#rateState()}). */
        BAD_STATE("bad_state");

        private final String wire;

        Code(String wire) {
            this.wire = wire;
        }

        /** The code as the specification and the test vectors write it ({@code "bad_config"}, ...). */
        public String wire() {
            return wire;
        }
    }

    private final Code code;

    Refusal(Code code, String message) {
        super(code.wire() + ": " + message);
        this.code = code;
    }

    public Code code() {
        return code;
    }
}
