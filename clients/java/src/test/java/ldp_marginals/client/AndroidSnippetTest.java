package ldp_marginals.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.security.KeyStore;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.crypto.SecretKey;
import javax.crypto.spec.SecretKeySpec;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.DecoderFactory;
import org.junit.jupiter.api.Test;

/**
 * The Android snippet of docs/clients.md is this file's {@link #firstReport} between its markers, run
 * here with the JDK's keystore standing in for the Android Keystore (the same java.security.KeyStore
 * API; a hardware key is only used through javax.crypto.Mac, as here), on the config example of
 * docs/client.md.
 */
class AndroidSnippetTest {
    static byte[] firstReport(SecretKey key, String configJson) {
        // [android-snippet]
        ClientSpec spec = ClientSpec.fromJson(configJson);   // the collection's client config, from your server
        DeviceClient client = DeviceClient.create(spec, DeviceSecret.of(key));   // coins from SecureRandom

        Map<String, Object> values = new HashMap<>();        // every feature of the collection, true values
        values.put("dark_mode", true);
        values.put("os", "linux");
        values.put("minutes", 37.5);
        NoisyReport report = client.report(values, System.currentTimeMillis(),
                Collections.singletonMap("app_version", "4.2.0"));   // public dimensions only
        byte[] body = report.toAvro();   // send as is; never log it, the secret or report.client()
        // [/android-snippet]
        return body;
    }

    private static String docs(String name) {
        return Vectors.read(Vectors.repository("ldp.docs").resolve(name));
    }

    @Test
    void theSnippetMakesAReportWithTheKeystoresKey() throws Exception {
        byte[] raw = DeviceSecret.generate();
        KeyStore keyStore = KeyStore.getInstance("PKCS12");   // on Android: KeyStore.getInstance("AndroidKeyStore")
        keyStore.load(null, null);
        char[] password = "test".toCharArray();
        keyStore.setEntry("ldp-marginals", new KeyStore.SecretKeyEntry(new SecretKeySpec(raw, "HmacSHA256")),
                new KeyStore.PasswordProtection(password));
        SecretKey key = (SecretKey) keyStore.getKey("ldp-marginals", password);

        Matcher json = Pattern.compile("```json\n(.*?)```", Pattern.DOTALL).matcher(docs("client.md"));
        assertTrue(json.find(), "docs/client.md has its config example");
        long before = System.currentTimeMillis();
        byte[] body = firstReport(key, json.group(1));

        Schema schema = new Schema.Parser().parse(docs("../schemas/noisy_report.avsc"));
        GenericRecord record = new GenericDatumReader<GenericRecord>(schema).read(null,
                DecoderFactory.get().binaryDecoder(body, null));
        assertEquals("app_usage", record.get("collection").toString());
        long t = (Long) record.get("event_time");
        assertTrue(t >= before && t <= System.currentTimeMillis());
        assertEquals(1, ((ByteBuffer) record.get("bits")).remaining());   // 5 bits
        assertEquals("{app_version=4.2.0}", record.get("dimensions").toString());
        // the keystore's key and the raw secret are the same device: the same token for the hour
        String token = DeviceSecret.of(raw).token("app_usage", t - t % 3_600_000L);
        assertEquals(token, record.get("client").toString());
    }

    @Test
    void docsShowTheTestedSnippet() {
        String source = Vectors.read(Vectors.repository("ldp.docs")
                .resolve("../clients/java/src/test/java/ldp_marginals/client/AndroidSnippetTest.java"));
        Matcher m = Pattern.compile("// \\[android-snippet\\]\n(.*?)\n\\s*// \\[/android-snippet\\]", Pattern.DOTALL)
                .matcher(source);
        assertTrue(m.find());
        StringBuilder snippet = new StringBuilder();
        for (String line : m.group(1).split("\n", -1)) {
            snippet.append(line.length() >= 8 ? line.substring(8) : line.trim()).append('\n');
        }
        String page = docs("clients.md");
        assertTrue(page.contains("```java\n" + snippet + "```"), "docs/clients.md must show, verbatim:\n" + snippet);
    }
}
