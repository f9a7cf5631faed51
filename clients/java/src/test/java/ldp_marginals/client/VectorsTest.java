package ldp_marginals.client;

import static ldp_marginals.client.Vectors.hex;
import static ldp_marginals.client.Vectors.unhex;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The JVM client against the shared test vectors (clients/test-vectors/*.json, written by the Python
 * reference client): the same drawn coins, true bits, permanent bits, packed bits, device token and Avro
 * bytes on every positive vector, the same refusal code on every negative one, and the specification's
 * building blocks (HMAC_DRBG against NIST's known answers, units(t), decisions, framed messages).
 */
class VectorsTest {
    private static final Map<String, Object> COINS = Vectors.load("coins.json");

    @Test
    @SuppressWarnings("unchecked")
    void hmacDrbgGivesNistsKnownAnswersAndTheVectorsStream() {
        List<Map<String, Object>> nist = (List<Map<String, Object>>) COINS.get("hmac_drbg_nist");
        assertEquals(2, nist.size());
        for (Map<String, Object> c : nist) {
            HmacDrbg drbg = new HmacDrbg(unhex((String) c.get("entropy")), unhex((String) c.get("nonce")),
                    unhex((String) c.get("personalization")));
            byte[] last = null;
            for (Object n : (List<Object>) c.get("requests")) {
                last = drbg.generate(((Number) n).intValue());
            }
            assertEquals(c.get("last"), hex(last));
        }
        Map<String, Object> ours = (Map<String, Object>) COINS.get("hmac_drbg");
        HmacDrbg drbg = new HmacDrbg(unhex((String) ours.get("entropy")));
        List<String> got = new ArrayList<>();
        for (Object n : (List<Object>) ours.get("requests")) {
            got.add(hex(drbg.generate(((Number) n).intValue())));
        }
        assertEquals(ours.get("outputs"), got);
        // one request of 8 bytes is not two of 4: the state is updated after every request
        List<String> outputs = (List<String>) ours.get("outputs");
        assertNotEquals(outputs.get(0) + outputs.get(1), hex(new HmacDrbg(unhex((String) ours.get("entropy"))).generate(8)));
    }

    @Test
    @SuppressWarnings("unchecked")
    void unitsDecisionsAndFramesFollowTheRule() {
        List<Map<String, Object>> units = (List<Map<String, Object>>) COINS.get("units");
        assertTrue(units.size() >= 16);
        for (Map<String, Object> u : units) {
            double t = ((Number) u.get("probability")).doubleValue();
            assertEquals(((Number) u.get("units")).longValue(), Coins.units(t), "units(" + t + ")");
        }
        for (Map<String, Object> d : (List<Map<String, Object>>) COINS.get("decisions")) {
            double t = ((Number) d.get("probability")).doubleValue();
            assertEquals(((Number) d.get("decision")).intValue(), Coins.decide(unhex((String) d.get("coin")), 0, t),
                    d.get("coin") + " at " + t);
        }
        for (Map<String, Object> f : (List<Map<String, Object>>) COINS.get("frames")) {
            List<String> parts = (List<String>) f.get("parts");
            assertEquals(f.get("hex"), hex(DeviceSecret.frame(parts.toArray(new String[0]))));
        }
        assertThrows(IllegalArgumentException.class, () -> Coins.units(1.5));
    }

    @TestFactory
    Stream<DynamicTest> positiveVectorsAreReproducedByteForByte() {
        List<Map<String, Object>> cases = Vectors.cases("reports.json");
        assertTrue(cases.size() >= 5);
        return cases.stream().map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> reproduce(c)));
    }

    @SuppressWarnings("unchecked")
    private static void reproduce(Map<String, Object> c) {
        ClientSpec spec = ClientSpec.fromObject(c.get("config"));
        // a case with a rate state starts from it (the app restores it) and ends with rate_state_after
        DeviceClient client = DeviceClient.restored(spec, DeviceSecret.of(unhex((String) c.get("secret"))),
                new HmacDrbg(unhex((String) c.get("seed"))), c.get("rate_state"));
        List<Map<String, Object>> reports = (List<Map<String, Object>>) c.get("reports");
        assertTrue(!reports.isEmpty());
        for (Map<String, Object> item : reports) {
            Map<String, Object> expect = (Map<String, Object>) item.get("expect");
            Map<String, Object> values = (Map<String, Object>) item.get("values");
            Map<String, Object> dims = (Map<String, Object>) item.get("dimensions");
            long eventMs = ((Number) item.get("event_ms")).longValue();
            if (expect.containsKey("refusal")) {
                Refusal r = assertThrows(Refusal.class, () -> client.trace(values, eventMs, dims));
                assertEquals(expect.get("refusal"), r.code().wire());
                continue;
            }
            DeviceClient.Trace trace = client.trace(values, eventMs, dims);
            Map<String, Object> got = new LinkedHashMap<>();
            got.put("coins", hex(trace.coins));
            List<Long> encoded = new ArrayList<>();
            for (int x : trace.encoded) {
                encoded.add((long) x);
            }
            got.put("encoded", encoded);
            List<Long> permanent = new ArrayList<>();
            for (Integer b : trace.permanent) {
                permanent.add(b == null ? null : (long) b);
            }
            got.put("permanent", permanent);
            got.put("bits", hex(trace.report.bits()));
            got.put("client", trace.report.client());
            got.put("avro", hex(trace.report.toAvro()));
            assertEquals(expect, got, item.toString());
        }
        assertEquals(c.containsKey("rate_state"), c.containsKey("rate_state_after"));
        if (c.containsKey("rate_state_after")) {
            assertEquals(c.get("rate_state_after"), Json.parse(client.rateState()));
            // the text the app persists restores the same state
            DeviceClient again = new DeviceClient(spec, DeviceSecret.of(unhex((String) c.get("secret"))),
                    new HmacDrbg(new byte[32]), client.rateState());
            assertEquals(client.rateState(), again.rateState());
        }
    }

    @TestFactory
    Stream<DynamicTest> negativeVectorsAreRefusedWithTheirCode() {
        List<Map<String, Object>> cases = Vectors.cases("refusals.json");
        assertTrue(cases.size() >= 20);
        return cases.stream().map(c -> DynamicTest.dynamicTest((String) c.get("name"), () -> {
            Refusal r = assertThrows(Refusal.class, () -> attempt(c));
            assertEquals(c.get("refusal"), r.code().wire(), r.getMessage());
        }));
    }

    /** What an app does with the case: read the config, make the client, make the report (the event time
     *  as JSON gives it: a Long through the long overload, anything else through the Number one). */
    @SuppressWarnings("unchecked")
    private static void attempt(Map<String, Object> c) {
        DeviceClient client = DeviceClient.restored(ClientSpec.fromObject(c.get("config")),
                DeviceSecret.of(unhex((String) c.get("secret"))), new HmacDrbg(new byte[32]), c.get("rate_state"));
        Map<String, Object> input = (Map<String, Object>) c.get("input");
        if (input == null) {
            return;
        }
        Map<String, Object> values = (Map<String, Object>) input.get("values");
        Map<String, Object> dims = (Map<String, Object>) input.get("dimensions");
        Object t = input.get("event_ms");
        if (t instanceof Long) {
            client.report(values, (long) (Long) t, dims);
        } else {
            client.report(values, (Number) t, dims);
        }
    }

    @Test
    void bothEventTimeOverloadsMakeTheSameReport() {
        Map<String, Object> c = Vectors.cases("reports.json").get(1);
        @SuppressWarnings("unchecked")
        Map<String, Object> item = ((List<Map<String, Object>>) c.get("reports")).get(0);
        byte[][] out = new byte[2][];
        for (int k = 0; k < 2; k++) {
            DeviceClient client = new DeviceClient(ClientSpec.fromObject(c.get("config")),
                    DeviceSecret.of(unhex((String) c.get("secret"))), new HmacDrbg(unhex((String) c.get("seed"))));
            @SuppressWarnings("unchecked")
            Map<String, Object> values = (Map<String, Object>) item.get("values");
            long t = (Long) item.get("event_ms");
            out[k] = (k == 0 ? client.report(values, t) : client.report(values, (Number) Long.valueOf(t), Map.of())).toAvro();
        }
        assertArrayEquals(out[0], out[1]);
    }
}
