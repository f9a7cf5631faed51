"""Dead-letter reasons and counter names have one owner, ``schemas/dead_letters.py``: no other module
of the package or the benchmarks spells one as a string literal (each imports the owner's name), so
a reason cannot be renamed in one place and left behind in another."""
import ast
from pathlib import Path

from ldp_marginals.schemas import dead_letters

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("ldp", "schemas", "transforms", "pipelines", "benchmarks")
OWNER = "schemas/dead_letters.py"
# the same words naming another contract: (module, literal) -> what it names there
OTHER_CONTRACTS = {("transforms/publication/engine.py", "late"): "a pane's timing (early, on_time, late, closed)"}


def literals_outside_the_owner() -> set:
    """``(module, literal)`` for every string constant (f-strings' parts included) outside the owner
    that is a reason, a counter name, or starts with the reasons' counter prefix; and every
    ``Metrics.counter`` given a literal name."""
    names = set(dead_letters.REASONS) | set(dead_letters.COUNTERS)
    found = set()
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = str(path.relative_to(ROOT))
            if module == OWNER:
                continue
            for node in ast.walk(ast.parse(path.read_text(), module)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                        node.value in names or node.value.startswith(dead_letters.DEAD_LETTER_PREFIX)):
                    found.add((module, node.value))
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "counter" and len(node.args) > 1
                        and isinstance(node.args[1], ast.Constant)):
                    found.add((module, node.args[1].value))
    return found


def test_no_module_spells_a_reason_or_a_counter_name_but_the_owner():
    assert literals_outside_the_owner() == set(OTHER_CONTRACTS)


def test_every_reason_and_counter_is_named_once_in_the_owner():
    """Each reason and counter has its own constant, and the owner's table uses them."""
    constants = {v for k, v in vars(dead_letters).items() if k.isupper() and isinstance(v, str)}
    assert set(dead_letters.REASONS) <= constants and set(dead_letters.COUNTERS) <= constants
    assert len(set(dead_letters.COUNTERS)) == len(dead_letters.COUNTERS)
    assert dead_letters.counter_name(dead_letters.LATE) == "dead_letter.late"
