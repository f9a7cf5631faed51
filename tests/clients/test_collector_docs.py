"""docs/collector.md shows tested code: its Android snippet is CollectorSender.send (which the
end-to-end test runs), its web snippet clients/typescript/examples/report.js (which the browser test
runs), and its option table names the command's options with their defaults."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "collector.md").read_text(encoding="utf-8")


def test_the_snippets_are_the_tested_code():
    sender = (ROOT / "clients" / "java" / "src" / "test" / "java" / "ldp_marginals" / "client" /
              "CollectorSender.java").read_text(encoding="utf-8")
    java = re.search(r"// \[collector-snippet\]\n(.*?)    // \[/collector-snippet\]", sender, re.S).group(1)
    assert re.findall(r"```java\n(.*?)```", DOC, re.S) == [java]
    assert re.findall(r"```js\n(.*?)```", DOC, re.S) == [
        (ROOT / "clients" / "typescript" / "examples" / "report.js").read_text(encoding="utf-8")]


def test_the_option_table_gives_the_commands_defaults():
    from ldp_marginals.pipelines.cli import build_parser
    _, subs = build_parser()
    defaults = {a.option_strings[0]: a.default for a in subs["collect"]._actions if a.option_strings}
    table = DOC.split("| option | default | what |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| (`[^|]*`) \| ([^|]*) \|", table, re.M)
    assert rows
    for names, shown in rows:
        options = re.findall(r"`(--[a-z-]+)", names)
        values = [v.strip() for v in re.split(r", (?=\S)", shown)]   # "86,400, 1,000,000": two numbers
        assert len(values) == len(options), names
        for option, value in zip(options, values):
            default = defaults[option]
            if value.startswith("`$") or value == "1 MiB":   # the keys' variable; 1 << 20
                continue
            assert float(value.replace(",", "")) == float(default), (option, value, default)
