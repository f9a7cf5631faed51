package ldp_marginals.client;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.Map;

/**
 * One report as the job reads it: the {@code NoisyReport} record of {@code schemas/noisy_report.avsc}.
 * {@link #toAvro()} writes its Avro binary encoding, the bytes a device sends (alone as one message, or
 * as one record of an Avro object container in a batch). The writer is hand-written for this one fixed
 * schema (docs/client.md, section 3) rather than taken from Apache Avro, which would add about 2.5 MB
 * of jars (Avro and Jackson) to an app for some 40 lines; the tests check it against Apache Avro.
 *
 * <p>{@link #toString()} names the collection and the event time only: the bits and the device token
 * are what the report protects and links, and are never to be logged.
 */
public final class NoisyReport {
    private final String collection;
    private final long eventTime;
    private final byte[] bits;
    private final Map<String, String> dimensions;   // sorted by the keys' UTF-8 bytes
    private final String client;                    // the device token, or null

    NoisyReport(String collection, long eventTime, byte[] bits, Map<String, String> dimensions, String client) {
        this.collection = collection;
        this.eventTime = eventTime;
        this.bits = bits;
        this.dimensions = Collections.unmodifiableMap(dimensions);
        this.client = client;
    }

    public String collection() {
        return collection;
    }

    /** The event time in milliseconds since 1970 UTC. */
    public long eventTime() {
        return eventTime;
    }

    /** The packed randomized bits (a copy): bit {@code i} is {@code (bits[i / 8] >> (i % 8)) & 1}. */
    public byte[] bits() {
        return bits.clone();
    }

    /** The dimensions, in the order they are written (their keys' UTF-8 bytes). */
    public Map<String, String> dimensions() {
        return dimensions;
    }

    /** The device token of the event's slice, or null when the collection does not use one. */
    public String client() {
        return client;
    }

    /** The Avro binary encoding of the record: the report's bytes. */
    public byte[] toAvro() {
        ByteArrayOutputStream out = new ByteArrayOutputStream(64 + bits.length);
        writeBytes(out, collection.getBytes(StandardCharsets.UTF_8));
        writeLong(out, eventTime);
        writeBytes(out, bits);
        if (!dimensions.isEmpty()) {
            writeLong(out, dimensions.size());   // one block of all entries
            for (Map.Entry<String, String> e : dimensions.entrySet()) {
                writeBytes(out, e.getKey().getBytes(StandardCharsets.UTF_8));
                writeBytes(out, e.getValue().getBytes(StandardCharsets.UTF_8));
            }
        }
        writeLong(out, 0);                       // the end of the map
        if (client == null) {
            writeLong(out, 0);                   // union branch 0: null
        } else {
            writeLong(out, 1);                   // union branch 1: string
            writeBytes(out, client.getBytes(StandardCharsets.UTF_8));
        }
        return out.toByteArray();
    }

    /** Avro's long: zigzag, then base-128 varint, low group first. */
    static void writeLong(ByteArrayOutputStream out, long n) {
        long z = (n << 1) ^ (n >> 63);
        while ((z & ~0x7FL) != 0) {
            out.write((int) ((z & 0x7F) | 0x80));
            z >>>= 7;
        }
        out.write((int) z);
    }

    private static void writeBytes(ByteArrayOutputStream out, byte[] data) {
        writeLong(out, data.length);
        out.write(data, 0, data.length);
    }

    @Override
    public String toString() {
        return "NoisyReport(collection=" + collection + ", event_time=" + eventTime + ", " + bits.length
                + " bytes of bits and the token not shown)";
    }
}
