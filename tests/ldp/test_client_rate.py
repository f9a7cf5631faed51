"""The declared rate at the client (docs/client.md section 3, "The declared rate"): with
``reports_per_day: R`` a device makes at most R reports per UTC day of their event time, in any order of
event times, across a persisted and restored rate state; a report past the rate is refused
(``rate_exceeded``) and draws no coin; the server's config accepts exactly the rates a client does."""
import json
import random

import pytest

from ldp_marginals.ldp.client import (BAD_CONFIG, BAD_STATE, MAX_REPORTS_PER_DAY, RATE_EXCEEDED, ClientSpec,
                                      DeviceClient, Refusal)
from ldp_marginals.ldp.coins import HmacDrbg
from ldp_marginals.schemas.collection import DeviceUnit

DAY = 86_400_000
CONFIG = {"collection": "c", "features": [{"name": "a", "type": "boolean"}],
          "window": {"type": "fixed", "size_seconds": 3600}, "token": True,
          "channels": [{"p": 0.5, "q": 0.75, "permanent": {"p": 0.25, "q": 0.75}}]}
SECRET = bytes(range(32))


class CountingCoins:
    """A seeded generator that records every request: a refused report must make none."""

    def __init__(self):
        self.drbg, self.requests = HmacDrbg(bytes(32)), 0

    def generate(self, n: int) -> bytes:
        self.requests += 1
        return self.drbg.generate(n)


def attempts(seed: int, n: int = 400, days: int = 6):
    """Event times of ``n`` report attempts spread over ``days`` UTC days, in a random (not time) order,
    with times near the days' edges (their first and last milliseconds) over-represented."""
    rng = random.Random(seed)
    base = 20_454 * DAY
    edges = (0, 1, DAY - 1, DAY - 2)
    return [base + rng.randrange(days) * DAY + (rng.choice(edges) if rng.random() < 0.3 else rng.randrange(DAY))
            for _ in range(n)]


def made_and_refused(client, times) -> list:
    out = []
    for t in times:
        try:
            client.report({"a": True}, t)
            out.append(True)
        except Refusal as err:
            assert err.code == RATE_EXCEEDED, err
            out.append(False)
    return out


@pytest.mark.parametrize("rate", [1, 3, 17])
def test_a_device_makes_at_most_the_rate_per_utc_day_and_the_first_ones_of_each_day(rate):
    times = attempts(rate)
    coins = CountingCoins()
    client = DeviceClient(ClientSpec.from_json(dict(CONFIG, reports_per_day=rate)), SECRET, coins)
    made = made_and_refused(client, times)
    seen = {}
    for t, ok in zip(times, made):   # brute force: the first `rate` attempts of each UTC day are made
        day = t // DAY
        seen[day] = seen.get(day, 0) + 1
        assert ok == (seen[day] <= rate), (t, day, seen[day])
    assert coins.requests == sum(made)                                   # a refused report drew no coin
    assert client.rate_state() == {str(d): min(n, rate) for d, n in sorted(seen.items())}
    assert max(seen.values()) > rate and sum(made) < len(times)          # the sequence does exceed the rate


def test_without_a_rate_every_report_is_made_and_counted():
    times = attempts(5, n=60)
    client = DeviceClient(ClientSpec.from_json(CONFIG), SECRET, HmacDrbg(bytes(32)))
    assert all(made_and_refused(client, times))
    assert sum(client.rate_state().values()) == len(times)


def test_a_restored_rate_state_gives_what_one_client_gives():
    """The app persists the state (as JSON text) between reports and makes a new client from it: the
    same reports are made and refused as by one client that was never restarted."""
    spec = ClientSpec.from_json(dict(CONFIG, reports_per_day=2))
    times = attempts(11, n=200)
    one = made_and_refused(DeviceClient(spec, SECRET, HmacDrbg(bytes(32))), times)
    rng, state, pieces = random.Random(3), None, []
    i = 0
    while i < len(times):
        j = i + rng.randint(1, 9)
        client = DeviceClient(spec, SECRET, HmacDrbg(bytes(32)), None if state is None else json.loads(state))
        pieces += made_and_refused(client, times[i:j])
        state, i = json.dumps(client.rate_state()), j
    assert pieces == one
    # a client made afresh (the state lost) would let the day's reports through again
    fresh = DeviceClient(spec, SECRET, HmacDrbg(bytes(32)))
    assert made_and_refused(fresh, times[:1]) == [True] and one.count(False) > 0


def test_the_refusal_names_the_rate_not_the_values_and_counts_nothing():
    client = DeviceClient(ClientSpec.from_json(dict(CONFIG, reports_per_day=1)), SECRET, HmacDrbg(bytes(32)),
                          {"20454": 1})
    with pytest.raises(Refusal, match=r"rate_exceeded: .*reports_per_day=1\) on day 20454"):
        client.report({"a": True}, 20_454 * DAY + 5)
    assert client.rate_state() == {"20454": 1}
    with pytest.raises(Refusal, match=r"bad_state: .*got key '01'"):
        DeviceClient(client.spec, SECRET, HmacDrbg(bytes(32)), {"01": 1})
    with pytest.raises(Refusal) as err:
        DeviceClient(client.spec, SECRET, HmacDrbg(bytes(32)), {"20454": 12345678901})
    assert err.value.code == BAD_STATE and "12345678901" not in str(err.value)   # a count is never echoed


def test_the_spec_round_trips_its_rate():
    spec = ClientSpec.from_json(dict(CONFIG, reports_per_day=24))
    assert spec.reports_per_day == 24 and spec.to_json()["reports_per_day"] == 24
    assert ClientSpec.from_json(spec.to_json()) == spec
    assert "reports_per_day" not in ClientSpec.from_json(CONFIG).to_json()


@pytest.mark.parametrize("rate", [1, 2, 24, MAX_REPORTS_PER_DAY, 0, -1, 0.5, 1.5, 24.0, MAX_REPORTS_PER_DAY + 1, True,
                                  "2"])
def test_the_servers_config_accepts_exactly_the_rates_a_client_does(rate):
    """The job states epsilons per day and month from privacy.reports_per_day; the clients enforce the
    same number, so neither may accept a rate the other refuses (a fractional rate is refused by both)."""
    try:
        ClientSpec.from_json(dict(CONFIG, reports_per_day=rate))
        client_ok = True
    except Refusal as err:
        assert err.code == BAD_CONFIG
        client_ok = False
    try:
        DeviceUnit(reports_per_day=rate)
        server_ok = True
    except ValueError:
        server_ok = False
    assert client_ok == server_ok == (rate in (1, 2, 24, MAX_REPORTS_PER_DAY) and not isinstance(rate, (bool, float)))


def test_every_client_and_the_specification_list_the_same_refusal_codes():
    """The codes are the contract (docs/client.md section 3): the JVM enum, the TypeScript constants and
    the specification's list name exactly the reference's, the two rate codes included."""
    import re
    from pathlib import Path

    from ldp_marginals.ldp.client import CODES
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "client.md").read_text(encoding="utf-8")
    listed = re.search(r"\*\*Refusal codes\*\*: (.*?)Messages are free", doc, re.S).group(1)
    java = (root / "clients/java/src/main/java/ldp_marginals/client/Refusal.java").read_text(encoding="utf-8")
    ts = (root / "clients/typescript/src/refusal.ts").read_text(encoding="utf-8")
    assert {RATE_EXCEEDED, BAD_STATE} <= set(CODES)
    assert set(re.findall(r"`([a-z_]+)`", listed)) == set(CODES)
    assert set(re.findall(r'^\s+[A-Z_]+\("([a-z_]+)"\)', java, re.M)) == set(CODES)
    assert set(re.findall(r'^export const [A-Z_]+ = "([a-z_]+)";', ts, re.M)) == set(CODES)
