package ldp_marginals.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.avro.Schema;
import org.apache.avro.file.DataFileWriter;
import org.apache.avro.generic.GenericDatumWriter;

/**
 * Devices made by this client posting their reports to the collector (`ldp-marginals collect`), as
 * docs/collector.md tells an Android app to: {@link #send} is the page's snippet, between its
 * markers. {@link #main} is the end-to-end test's devices (tests/cluster/test_collector_end_to_end.py):
 * one report each, made with the specification's seeded generator, the first ones sent one by one,
 * the rest in batches of 100 (Avro containers written with Apache Avro's {@code appendEncoded}).
 */
public final class CollectorSender {
    private CollectorSender() {
    }

    // [collector-snippet]
    /** POSTs one request's body (a report's bytes, or a container of reports) until the collector
     *  answers 200; a retry keeps the request's Idempotency-Key, so it is never counted twice. */
    static String send(URL collector, String appKey, byte[] body) throws IOException, InterruptedException {
        String requestId = UUID.randomUUID().toString();   // one per request, kept with it while it is queued
        for (int attempt = 1; ; attempt++) {
            HttpURLConnection http = (HttpURLConnection) collector.openConnection();
            http.setRequestMethod("POST");
            http.setDoOutput(true);
            http.setConnectTimeout(10_000);
            http.setReadTimeout(30_000);
            http.setRequestProperty("Authorization", "Bearer " + appKey);   // the app's key, never logged
            http.setRequestProperty("Idempotency-Key", requestId);
            http.setRequestProperty("Content-Type", "application/octet-stream");
            int status;
            try {
                try (OutputStream out = http.getOutputStream()) {
                    out.write(body);
                }
                status = http.getResponseCode();
            } catch (IOException noAnswer) {
                status = -1;   // no answer: the same request again
            }
            if (status == 200) {
                return read(http.getInputStream());   // {"accepted": n, "refused": [...]}
            }
            if (status != -1 && status != 429 && status != 503) {
                // 4xx: the request itself is wrong (key, body): retrying cannot help; log the status only
                throw new IOException("the collector refused the request: HTTP " + status);
            }
            Thread.sleep(Math.min(60_000L, 500L << Math.min(attempt, 7)));   // back off, then retry
        }
    }
    // [/collector-snippet]

    private static String read(InputStream in) throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        byte[] chunk = new byte[4096];
        for (int n; (n = in.read(chunk)) > 0; ) {
            buf.write(chunk, 0, n);
        }
        in.close();
        return new String(buf.toByteArray(), StandardCharsets.UTF_8);
    }

    /** Reports as one Avro object container (a batch), from their bytes as the client writes them. */
    static byte[] container(Schema schema, List<byte[]> reports) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (DataFileWriter<Object> writer = new DataFileWriter<>(new GenericDatumWriter<>(schema))) {
            writer.create(schema, out);
            for (byte[] report : reports) {
                writer.appendEncoded(ByteBuffer.wrap(report));
            }
        }
        return out.toByteArray();
    }

    private static byte[] hex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    /**
     * Arguments: the collector's URL, a file holding the app key, the client config (JSON), the
     * NoisyReport schema, the devices (one a line, {@code secret-hex seed-hex event-ms values-json}),
     * and how many of them post their report alone (the others in batches of 100). Prints the reports
     * the collector accepted.
     */
    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        URL collector = new URL(args[0]);
        String appKey = new String(Files.readAllBytes(Paths.get(args[1])), StandardCharsets.UTF_8).trim();
        ClientSpec spec = ClientSpec.fromJson(new String(Files.readAllBytes(Paths.get(args[2])), StandardCharsets.UTF_8));
        Schema schema = new Schema.Parser().parse(Paths.get(args[3]).toFile());
        List<byte[]> reports = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(args[4]), StandardCharsets.UTF_8)) {
            String[] f = line.split(" ", 4);
            DeviceClient client = new DeviceClient(spec, DeviceSecret.of(hex(f[0])), new HmacDrbg(hex(f[1])));
            Map<String, Object> values = (Map<String, Object>) Json.parse(f[3]);
            reports.add(client.report(values, Long.parseLong(f[2]), Collections.<String, Object>emptyMap()).toAvro());
        }
        int half = Math.min(reports.size(), Integer.parseInt(args[5]));
        long accepted = 0;
        for (byte[] report : reports.subList(0, half)) {
            accepted += accepted(send(collector, appKey, report));
        }
        for (int i = half; i < reports.size(); i += 100) {
            byte[] batch = container(schema, reports.subList(i, Math.min(reports.size(), i + 100)));
            accepted += accepted(send(collector, appKey, batch));
        }
        System.out.println("accepted " + accepted);
    }

    @SuppressWarnings("unchecked")
    private static long accepted(String answer) {
        return ((Number) ((Map<String, Object>) Json.parse(answer)).get("accepted")).longValue();
    }
}
