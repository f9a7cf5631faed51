package ldp_marginals.client;

import java.util.List;

/** One feature of a collection's layout: boolean (one bit), categorical (one bit per value, one-hot, in
 *  the listed order) or numeric in {@code [low, high]} (one bit). Checked by {@link ClientSpec}. */
final class Feature {
    enum Kind { BOOLEAN, CATEGORICAL, NUMERIC }

    final String name;
    final Kind kind;
    final List<String> values;   // categorical only, else empty
    final double low;
    final double high;
    final int firstBit;

    Feature(String name, Kind kind, List<String> values, double low, double high, int firstBit) {
        this.name = name;
        this.kind = kind;
        this.values = values;
        this.low = low;
        this.high = high;
        this.firstBit = firstBit;
    }

    int bits() {
        return kind == Kind.CATEGORICAL ? values.size() : 1;
    }
}
