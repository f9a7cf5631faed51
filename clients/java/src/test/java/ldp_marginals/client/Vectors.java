package ldp_marginals.client;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;

/** The shared test vectors (clients/test-vectors/, path from the build) and hex helpers. */
final class Vectors {
    private Vectors() {
    }

    static Path repository(String property) {
        String dir = System.getProperty(property);
        if (dir == null) {
            throw new IllegalStateException("system property " + property + " is not set (run the tests with Maven)");
        }
        return Paths.get(dir);
    }

    static String read(Path path) {
        try {
            return new String(Files.readAllBytes(path), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> load(String name) {
        return (Map<String, Object>) Json.parse(read(repository("ldp.vectors").resolve(name)));
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> cases(String name) {
        return (List<Map<String, Object>>) load(name).get("cases");
    }

    static byte[] unhex(String hex) {
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) {
            out.append(String.format("%02x", b & 0xff));
        }
        return out.toString();
    }
}
