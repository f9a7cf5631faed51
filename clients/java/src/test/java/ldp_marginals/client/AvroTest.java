package ldp_marginals.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.junit.jupiter.api.Test;

/**
 * The hand-written NoisyReport writer against Apache Avro's (test scope only) with the repository's
 * schema file, on seeded random records the vectors do not reach: long strings (lengths of several
 * varint bytes), astral-plane characters, up to 200 dimensions (counts of two varint bytes), event times
 * across the whole range, every bit length from 1 to 300 bytes, with and without a token.
 */
class AvroTest {
    private static final Schema SCHEMA = schema();

    private static Schema schema() {
        return new Schema.Parser().parse(Vectors.read(Vectors.repository("ldp.docs").resolve("../schemas/noisy_report.avsc")));
    }

    private static String randomText(Random rng, int maxLength) {
        StringBuilder out = new StringBuilder();
        int n = rng.nextInt(maxLength + 1);
        for (int i = 0; i < n; i++) {
            switch (rng.nextInt(4)) {
                case 0: out.append((char) ('a' + rng.nextInt(26))); break;
                case 1: out.append((char) (0xa0 + rng.nextInt(0x700))); break;              // 2-byte UTF-8
                case 2: out.append((char) (0x3000 + rng.nextInt(0xa000))); break;           // 3-byte, below surrogates
                default: out.appendCodePoint(0x10000 + rng.nextInt(0xfffff)); break;         // 4-byte: a surrogate pair
            }
        }
        return out.toString();
    }

    private static byte[] apacheAvro(NoisyReport r) throws IOException {
        GenericRecord record = new GenericData.Record(SCHEMA);
        record.put("collection", r.collection());
        record.put("event_time", r.eventTime());
        record.put("bits", java.nio.ByteBuffer.wrap(r.bits()));
        record.put("dimensions", r.dimensions());   // written in its iteration order: the keys' UTF-8 order
        record.put("client", r.client());
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(out, null);
        new GenericDatumWriter<GenericRecord>(SCHEMA).write(record, encoder);
        encoder.flush();
        return out.toByteArray();
    }

    @Test
    void theWriterMatchesApacheAvroOnRandomRecords() throws IOException {
        Random rng = new Random(20260101L);
        int withDimensions = 0;
        for (int k = 0; k < 3000; k++) {
            byte[] bits = new byte[1 + rng.nextInt(k % 10 == 0 ? 300 : 20)];
            rng.nextBytes(bits);
            Map<String, String> dims = new TreeMap<>(DeviceClient::compareUtf8);
            int n = k % 50 == 0 ? 200 : rng.nextInt(6);
            while (dims.size() < n) {
                dims.put(1 + randomText(rng, 8), randomText(rng, 8));
            }
            withDimensions += dims.isEmpty() ? 0 : 1;
            long t = k % 3 == 0 ? rng.nextInt(200) : (long) (rng.nextDouble() * DeviceClient.MAX_EVENT_MS);
            String token = rng.nextBoolean() ? null : DeviceSecret.base64Url(bits.length >= 16 ? bits : new byte[16], 16);
            NoisyReport r = new NoisyReport(1 + randomText(rng, k % 7 == 0 ? 300 : 12), t, bits, dims, token);
            byte[] ours = r.toAvro();
            assertArrayEquals(apacheAvro(r), ours, "record " + k);
            GenericRecord back = new GenericDatumReader<GenericRecord>(SCHEMA).read(null,
                    DecoderFactory.get().binaryDecoder(ours, null));
            assertEquals(t, back.get("event_time"));
            assertEquals(r.collection(), back.get("collection").toString());
        }
        assertTrue(withDimensions > 1000);
    }

    /** Expected bytes from the specification's rule (zigzag, 7-bit groups low first), as written out by hand
     *  in tests/ldp/test_client_vectors.py's spec_avro. */
    @Test
    void longsAreZigzagVarints() {
        long[] values = {0, 1, -1, 63, 64, -64, -65, 8191, 8192, Long.MAX_VALUE, Long.MIN_VALUE, DeviceClient.MAX_EVENT_MS};
        String[] expected = {"00", "02", "01", "7e", "8001", "7f", "8101", "fe7f", "808001",
                "feffffffffffffffff01", "ffffffffffffffffff01", "80e09ecce5ee01"};
        for (int i = 0; i < values.length; i++) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            NoisyReport.writeLong(out, values[i]);
            assertEquals(expected[i], Vectors.hex(out.toByteArray()), "long " + values[i]);
        }
    }
}
