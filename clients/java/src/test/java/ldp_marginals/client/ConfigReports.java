package ldp_marginals.client;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.Map;

/**
 * Reports made from a client config exactly as {@code ldp-marginals client-config} wrote it, of any kind
 * (per-bit {@code channels}, {@code hadamard}, {@code subset}): tests/clients/test_client_config_clients.py
 * compares their bytes with the Python reference client's. Arguments: the client config (JSON) and the
 * devices (one a line, {@code secret-hex seed-hex event-ms values-json}); prints each report's Avro bytes
 * in hex, one a line (test data of seeded devices, never a real device's report).
 */
public final class ConfigReports {
    private ConfigReports() {
    }

    private static byte[] hex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    private static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) {
            out.append(String.format("%02x", b & 0xff));
        }
        return out.toString();
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        String config = new String(Files.readAllBytes(Paths.get(args[0])), StandardCharsets.UTF_8);
        Map<String, Object> json = (Map<String, Object>) Json.parse(config);
        for (String line : Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8)) {
            String[] f = line.split(" ", 4);
            DeviceSecret secret = DeviceSecret.of(hex(f[0]));
            HmacDrbg coins = new HmacDrbg(hex(f[1]));
            ReportingClient<?, ?> client;
            if (json.containsKey("hadamard")) {
                client = new HadamardDeviceClient(HadamardSpec.fromJson(config), secret, coins);
            } else if (json.containsKey("subset")) {
                client = new SubsetDeviceClient(SubsetSpec.fromJson(config), secret, coins);
            } else {
                client = new DeviceClient(ClientSpec.fromJson(config), secret, coins);
            }
            Map<String, Object> values = (Map<String, Object>) Json.parse(f[3]);
            NoisyReport report = client.report(values, Long.parseLong(f[2]), Collections.<String, Object>emptyMap());
            System.out.println(hex(report.toAvro()));
        }
    }
}
