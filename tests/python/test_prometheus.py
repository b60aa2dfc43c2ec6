"""pnmem.PrometheusCollector (python/pnmem/_prometheus.py): pnmem_metrics_text through prometheus_client.

What a registry exposes must be pnmem's own text: the same HELP and TYPE lines in the same order, and
the same samples (name, labels, value) line for line. prometheus_client writes values as Go floats
(2.5e+010) and labels sorted by name, so sample lines are compared parsed, not as strings. The tests
that need prometheus_client skip without it (apt-get install python3-prometheus-client); the ones
about its absence run either way."""
import re
import subprocess
import sys

import pnmem
import pytest
from conftest import child_env

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


LOAD_AND_LEDGER_GAUGES = {"pnmem_queued_requests", "pnmem_running_requests", "pnmem_kv_cache_usage_ratio",
                          "pnmem_slot_capacity", "pnmem_ledger_processes", "pnmem_ledger_pending_bytes",
                          "pnmem_ledger_credited_bytes", "pnmem_ledger_die_pending_bytes",
                          "pnmem_ledger_die_retiring_bytes"}


@pytest.fixture()
def prom():
    return pytest.importorskip("prometheus_client")


def parse_line(line: str):
    """A comment line as it is; a sample line as (name, labels, value)."""
    if line.startswith("#"):
        return line
    m = SAMPLE.match(line)
    assert m, f"not a sample line: {line!r}"
    labels = m.group(2) or ""
    pairs = LABEL.findall(labels)
    assert "".join(f'{k}="{v}",' for k, v in pairs).rstrip(",") == labels.rstrip(","), line
    return (m.group(1), dict(pairs), float(m.group(3)))


def parse_text(text: str) -> list:
    return [parse_line(line) for line in text.splitlines() if line.strip()]


def exposed(prom, collector) -> str:
    registry = prom.CollectorRegistry()
    registry.register(collector)
    return prom.generate_latest(registry).decode("utf-8")


def test_round_trip_is_pnmem_text_line_for_line(prom, roomy_die, monkeypatch):
    pnmem.admit(10, pnmem.Model.reference())  # a counter that is not 0
    text = pnmem.metrics_text()
    # Both sides from one reading: the live gauges (snapshot age, available bytes) move between calls.
    monkeypatch.setattr("pnmem._prometheus.metrics_text", lambda what: text if what == "all" else pytest.fail(what))
    ours = parse_text(text)
    theirs = parse_text(exposed(prom, pnmem.PrometheusCollector()))
    assert len(theirs) == len(ours)
    for n, (want, got) in enumerate(zip(ours, theirs)):
        assert got == want, f"line {n + 1}: pnmem {want!r}, prometheus_client {got!r}"
    # What makes the comparison worth having: counters (their _total), labels (several, and a die's).
    assert "# TYPE pnmem_admissions_total counter" in ours
    assert ("pnmem_die_free_bytes", {"die": "0"}, float(16 << 30)) in ours
    assert any(isinstance(s, tuple) and s[0] == "pnmem_provenance_info" and len(s[1]) == 3 for s in ours)
    assert any(isinstance(s, tuple) and s[0] == "pnmem_admissions_total" and s[2] >= 1 for s in ours)


def test_live_collect_matches_metrics_text(prom, roomy_die):
    got = parse_text(exposed(prom, pnmem.PrometheusCollector()))
    want = parse_text(pnmem.metrics_text())
    assert len(got) == len(want)
    kind = ""
    for g, w in zip(got, want):
        if isinstance(w, str):
            assert g == w
            if w.startswith("# TYPE "):
                kind = w.split()[3]
        else:
            assert g[:2] == w[:2]           # the same sample: name and labels
            if kind == "counter":           # counters stand still with no call between; gauges are live
                assert g[2] == w[2], g


def test_families_and_counter_names(prom, roomy_die):
    families = {f.name: f for f in pnmem.PrometheusCollector().collect()}
    # prometheus_client's own naming: a counter family without _total, its samples with it.
    admissions = families["pnmem_admissions"]
    assert admissions.type == "counter" and "pnmem_admissions_total" not in families
    assert {s.name for s in admissions.samples} == {"pnmem_admissions_total"}
    assert {"verdict": "admit", "reason": "fits"} in [s.labels for s in admissions.samples]
    assert families["pnmem_level"].type == "gauge" and families["pnmem_level"].documentation.startswith("Pressure")
    assert not [f for f in families.values() if f.type == "untyped"]  # every sample in its family


def test_counters_only(prom, watcher):
    c = pnmem.PrometheusCollector("counters")
    assert c.what == "counters" and repr(c) == "pnmem.PrometheusCollector(what='counters')"
    families = list(c.collect())
    # Counters, and the gauges "counters" carries by design: the engine's load (set_fleet_load, the gates)
    # and the box ledger's, once the process joined one (test_box_ledger.py); nothing of the snapshot's.
    assert families and any(f.type == "counter" for f in families)
    assert {f.name for f in families if f.type != "counter"} <= LOAD_AND_LEDGER_GAUGES
    assert "pnmem_level" not in {f.name for f in families}
    box = list(pnmem.PrometheusCollector("box").collect())
    assert box and all(f.type != "counter" for f in box)
    assert {f.name for f in families}.isdisjoint({f.name for f in box})


def test_bad_what_is_refused(prom):
    for bad in ("everything", "", "ALL", None, 3):
        with pytest.raises(pnmem.ArgumentError, match="box, counters, all") as e:
            pnmem.PrometheusCollector(bad)
        assert e.value.function == "pnmem_metrics_text"
    with pytest.raises(pnmem.ArgumentError):
        pnmem.register_prometheus(prom.CollectorRegistry(), what="boxes")


def test_describe_names_the_families_once(prom, watcher):
    registry = prom.CollectorRegistry()
    c = pnmem.register_prometheus(registry)
    assert {"pnmem_level", "pnmem_admissions"} <= {f.name for f in c.describe()}
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(pnmem.PrometheusCollector())   # the same families twice: refused, not served twice
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(pnmem.PrometheusCollector("counters"))
    # A scrape's name[] filter finds pnmem's families through the names describe gave.
    only = prom.generate_latest(registry.restricted_registry(["pnmem_level"])).decode()
    assert "\npnmem_level " in "\n" + only
    registry.unregister(c)
    assert prom.generate_latest(registry) == b""


def test_register_prometheus_default_registry(prom, watcher):
    c = pnmem.register_prometheus()
    try:
        assert isinstance(c, pnmem.PrometheusCollector)
        text = prom.generate_latest().decode()
        assert "\npnmem_level " in text and "# TYPE pnmem_admissions_total counter\n" in text
    finally:
        prom.REGISTRY.unregister(c)
    assert "pnmem_level" not in prom.generate_latest().decode()


def test_without_prometheus_client_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # what `import prometheus_client` fails on
    for make in (pnmem.PrometheusCollector, pnmem.register_prometheus):
        with pytest.raises(pnmem.PrometheusClientMissing) as e:
            make()
        assert isinstance(e.value, ImportError) and isinstance(e.value, pnmem.Error)
        assert e.value.name == "prometheus_client"
        msg = str(e.value)
        assert "prometheus_client" in msg and "python3-prometheus-client" in msg and "pip install prometheus-client" in msg
    assert pnmem.metrics_text("counters")  # pnmem itself is unaffected


def test_import_pnmem_needs_no_prometheus_client(tmp_path):
    code = ("import sys; sys.modules['prometheus_client'] = None\n"
            "import pnmem\n"
            "assert pnmem.metrics_text('box')\n"
            "try:\n"
            "    pnmem.PrometheusCollector()\n"
            "except ImportError as e:\n"
            "    print('refused:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_env(),
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("refused: pnmem.PrometheusCollector needs prometheus_client"), r.stdout
    # And a plain import does not load it, installed or not.
    r = subprocess.run([sys.executable, "-c", "import sys, pnmem; print('prometheus_client' in sys.modules)"],
                       capture_output=True, text=True, timeout=60, env=child_env(), cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stdout + r.stderr
