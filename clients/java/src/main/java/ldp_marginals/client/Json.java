package ldp_marginals.client;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A strict reader of JSON text (RFC 8259) for the client config: objects become {@code Map<String, Object>}
 * (insertion order; a repeated key keeps its last value, as Python's and JavaScript's readers do),
 * arrays {@code List<Object>}, strings {@code String}, {@code true}/{@code false} {@code Boolean},
 * {@code null} Java null, and numbers {@code Long} when written as an integer that fits (no fraction, no
 * exponent), {@code BigInteger} when a larger integer, and {@code Double} otherwise (so that, as in the
 * Python reference, {@code 1.0} is not an integer). Hand-written (about 200 lines) so that the library
 * needs nothing beyond the JDK on Android; anything not JSON (NaN, a trailing comma, a comment) is an
 * {@link IllegalArgumentException} with the offset.
 */
final class Json {
    private final String text;
    private int at;

    private Json(String text) {
        this.text = text;
    }

    static Object parse(String text) {
        if (text == null) {
            throw new IllegalArgumentException("JSON text must not be null");
        }
        Json reader = new Json(text);
        reader.skipSpace();
        Object value = reader.value(0);
        reader.skipSpace();
        if (reader.at != text.length()) {
            throw reader.error("unexpected text after the value");
        }
        return value;
    }

    private static final int MAX_DEPTH = 64;

    private Object value(int depth) {
        if (depth > MAX_DEPTH) {
            throw error("nesting deeper than " + MAX_DEPTH);
        }
        if (at >= text.length()) {
            throw error("a value is missing");
        }
        char c = text.charAt(at);
        switch (c) {
            case '{':
                return object(depth);
            case '[':
                return array(depth);
            case '"':
                return string();
            case 't':
                literal("true");
                return Boolean.TRUE;
            case 'f':
                literal("false");
                return Boolean.FALSE;
            case 'n':
                literal("null");
                return null;
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw error("unexpected character");
        }
    }

    private Map<String, Object> object(int depth) {
        Map<String, Object> out = new LinkedHashMap<>();
        at++;
        skipSpace();
        if (peek() == '}') {
            at++;
            return Collections.unmodifiableMap(out);
        }
        while (true) {
            skipSpace();
            if (peek() != '"') {
                throw error("an object key must be a string");
            }
            String key = string();
            skipSpace();
            expect(':');
            skipSpace();
            out.put(key, value(depth + 1));
            skipSpace();
            char c = next();
            if (c == '}') {
                return Collections.unmodifiableMap(out);
            }
            if (c != ',') {
                throw error("expected ',' or '}'");
            }
        }
    }

    private List<Object> array(int depth) {
        List<Object> out = new ArrayList<>();
        at++;
        skipSpace();
        if (peek() == ']') {
            at++;
            return Collections.unmodifiableList(out);
        }
        while (true) {
            skipSpace();
            out.add(value(depth + 1));
            skipSpace();
            char c = next();
            if (c == ']') {
                return Collections.unmodifiableList(out);
            }
            if (c != ',') {
                throw error("expected ',' or ']'");
            }
        }
    }

    private String string() {
        at++;   // the opening quote
        StringBuilder out = new StringBuilder();
        while (true) {
            char c = next();
            if (c == '"') {
                return out.toString();
            }
            if (c < 0x20) {
                throw error("a control character in a string must be escaped");
            }
            if (c != '\\') {
                out.append(c);
                continue;
            }
            char e = next();
            switch (e) {
                case '"': out.append('"'); break;
                case '\\': out.append('\\'); break;
                case '/': out.append('/'); break;
                case 'b': out.append('\b'); break;
                case 'f': out.append('\f'); break;
                case 'n': out.append('\n'); break;
                case 'r': out.append('\r'); break;
                case 't': out.append('\t'); break;
                case 'u':
                    if (at + 4 > text.length()) {
                        throw error("a \\u escape needs 4 hex digits");
                    }
                    int code = 0;
                    for (int k = 0; k < 4; k++) {
                        int d = Character.digit(text.charAt(at++), 16);
                        if (d < 0) {
                            throw error("a \\u escape needs 4 hex digits");
                        }
                        code = code * 16 + d;
                    }
                    out.append((char) code);   // a lone surrogate stays one: the config's checks refuse it
                    break;
                default:
                    throw error("unknown escape");
            }
        }
    }

    private Object number() {
        int start = at;
        boolean integer = true;
        if (peek() == '-') {
            at++;
        }
        if (peek() == '0') {
            at++;
        } else if (isDigit(peek())) {
            digits();
        } else {
            throw error("a number needs a digit");
        }
        if (peek() == '.') {
            integer = false;
            at++;
            if (!isDigit(peek())) {
                throw error("a fraction needs a digit");
            }
            digits();
        }
        if (peek() == 'e' || peek() == 'E') {
            integer = false;
            at++;
            if (peek() == '+' || peek() == '-') {
                at++;
            }
            if (!isDigit(peek())) {
                throw error("an exponent needs a digit");
            }
            digits();
        }
        String literal = text.substring(start, at);
        if (integer) {
            BigInteger big = new BigInteger(literal);
            return big.bitLength() < 64 ? (Object) big.longValue() : big;
        }
        return Double.parseDouble(literal);   // correctly rounded, as every JSON reader of the vectors
    }

    private void digits() {
        while (isDigit(peek())) {
            at++;
        }
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    private void literal(String word) {
        if (!text.startsWith(word, at)) {
            throw error("unexpected word");
        }
        at += word.length();
    }

    private void skipSpace() {
        while (at < text.length()) {
            char c = text.charAt(at);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            at++;
        }
    }

    private char peek() {
        return at < text.length() ? text.charAt(at) : '\0';
    }

    private char next() {
        if (at >= text.length()) {
            throw error("the text ends early");
        }
        return text.charAt(at++);
    }

    private void expect(char c) {
        if (next() != c) {
            at--;
            throw error("expected '" + c + "'");
        }
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("not JSON: " + what + " at offset " + at);
    }
}
