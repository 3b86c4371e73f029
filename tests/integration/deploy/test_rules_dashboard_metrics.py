"""Alerts, recording rules and the dashboard speak about metrics that exist.

A real ``hwagent run`` is scraped once; every PromQL expression in the rules
and the dashboard must parse (promtool) and may only name metric families that
scrape has, and docs/metrics.md must describe exactly the families served.
Renaming a metric without updating its alert, panel and doc row fails here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "deploy" / "prometheus" / "hwagent.rules.yml"
RULES_TEST = REPO / "deploy" / "prometheus" / "hwagent.rules.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "hwagent.json"
GENERATOR = REPO / "deploy" / "grafana" / "dashboard.py"
METRICS_DOC = REPO / "docs" / "metrics.md"
HWAGENT = Path(sys.executable).parent / "hwagent"

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")
#: PromQL words that look like metric names but are not
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or",
                "unless", "le", "inf"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def scrape(tmp_path_factory) -> str:
    """/metrics of a real daemon on embedded defaults, once its components are up; the advisor,
    off by default, is turned on so that its families are served too (the daemon imports no
    component that is off)."""
    root = tmp_path_factory.mktemp("root")
    config = tmp_path_factory.mktemp("config") / "hwagent.toml"
    config.write_text("[advisor]\nenabled = true\n")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFY_SOCKET")}
    proc = subprocess.Popen(
        [str(HWAGENT), "run", "--config", str(config), "--root-dir", str(root),
         "--metrics-address", f"127.0.0.1:{port}",
         "--mode", "standalone",
         # a lock dir of its own: daemons of other suites on this machine claim every CPU too
         "--lock-dir", str(tmp_path_factory.mktemp("locks"))],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        text = ""
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                time.sleep(0.3)
                continue
            # probes may attach after READY: wait until every component has published its families
            if all(f in text for f in ("hwagent_pressure_probe_attached", "hwagent_device_plugin_endpoints",
                                       "hwagent_advisor_target_seconds", "hwagent_memory_total_bytes")):
                break
            time.sleep(0.3)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert text, "no scrape"
        return text
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def families(text: str) -> dict[str, str]:
    """family name -> type, from the # TYPE lines."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            out[name] = kind
    return out


def sample_labels(text: str) -> dict[str, set[str]]:
    """family -> label names seen on its samples (histogram suffixes folded, le dropped)."""
    fams = families(text)
    out: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        name, rest = line.split("{", 1)
        labels = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', rest.rsplit("}", 1)[0]))
        fam = _family_of(name, fams)
        out.setdefault(fam, set()).update(labels - {"le"})
    return out


def _family_of(name: str, fams: dict[str, str]) -> str:
    if name in fams:
        return name
    for suffix in ("_bucket", "_sum", "_count", "_total", "_created", "_info"):
        if name.endswith(suffix) and name[: -len(suffix)] in fams:
            return name[: -len(suffix)]
    return name


def exprs_of_rules() -> list[str]:
    doc = yaml.safe_load(RULES.read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def exprs_of_dashboard() -> list[str]:
    def walk(panels):
        for p in panels:
            yield from (t["expr"] for t in p.get("targets", []))
            yield from walk(p.get("panels", []))

    return list(walk(json.loads(DASHBOARD.read_text())["panels"]))


def grafana_to_promql(expr: str) -> str:
    """Grafana's variables replaced by values a real query would have."""
    return expr.replace("$__rate_interval", "5m").replace("$instance", ".*")


def metric_names(expr: str) -> set[str]:
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values are not names
    expr = re.sub(r"\{[^}]*\}", "{}", expr)  # nor are label names
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()", expr))
    return {n for n in names if (n.startswith("hwagent") or n.startswith("process_") or n == "up")}


def recorded() -> set[str]:
    doc = yaml.safe_load(RULES.read_text())
    return {r["record"] for g in doc["groups"] for r in g["rules"] if "record" in r}


@needs_promtool
def test_rules_check_and_unit_tests_pass():
    r = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([PROMTOOL, "test", "rules", str(RULES_TEST)], capture_output=True, text=True, timeout=120,
                       cwd=RULES_TEST.parent)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_alert_has_a_runbook_section_and_a_unit_test():
    doc = yaml.safe_load(RULES.read_text())
    alerts = [r for g in doc["groups"] for r in g["rules"] if "alert" in r]
    tested = set(re.findall(r"alertname: (\w+)", RULES_TEST.read_text()))
    runbooks = (REPO / "docs" / "runbooks.md").read_text()
    for a in alerts:
        assert {"summary", "description", "runbook_url"} <= set(a["annotations"]), a["alert"]
        anchor = a["annotations"]["runbook_url"].rsplit("#", 1)[1]
        assert f"## {a['alert']}" in runbooks and anchor == a["alert"].lower(), a["alert"]
        assert a["alert"] in tested, f"{a['alert']} has no promtool unit test"


def test_dashboard_is_what_the_generator_writes():
    r = subprocess.run([sys.executable, str(GENERATOR)], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(r.stdout) == json.loads(DASHBOARD.read_text()), "run: python deploy/grafana/dashboard.py > deploy/grafana/hwagent.json"


@needs_promtool
def test_every_dashboard_expression_parses(tmp_path):
    exprs = exprs_of_dashboard()
    assert len(exprs) >= 20
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": grafana_to_promql(e)} for i, e in enumerate(exprs)]}]}
    f = tmp_path / "dashboard.rules.yml"
    f.write_text(yaml.safe_dump(rules))
    r = subprocess.run([PROMTOOL, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_rules_and_dashboard_name_only_served_metrics(scrape):
    served = set(families(scrape)) | {"up"} | recorded()
    fams = families(scrape)
    missing = {}
    for where, exprs in (("rules", exprs_of_rules()), ("dashboard", exprs_of_dashboard())):
        for e in exprs:
            for n in metric_names(grafana_to_promql(e)):
                if _family_of(n, fams) not in served:
                    missing.setdefault(where, set()).add(n)
    assert not missing, missing


@needs_promtool
def test_promtool_check_metrics_is_clean(scrape):
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=scrape, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr


def test_no_created_series_and_help_on_every_family(scrape):
    assert "_created" not in scrape
    helped = {line.split(" ")[2] for line in scrape.splitlines() if line.startswith("# HELP ")}
    assert set(families(scrape)) <= helped


def documented() -> dict[str, tuple[str, set[str]]]:
    out = {}
    for line in METRICS_DOC.read_text().splitlines():
        m = re.match(r"\| `(hwagent_[a-z0-9_]+)` \| (\w+) \|\s*([^|]*?)\s*\|", line)
        if m:
            labels = {x.strip() for x in m.group(3).split(",") if x.strip()}
            out[m.group(1)] = (m.group(2), labels)
    return out


def test_docs_metrics_table_is_the_scrape(scrape):
    fams = {n: t for n, t in families(scrape).items() if n.startswith("hwagent_")}
    docs = documented()
    assert sorted(set(fams) - set(docs)) == [], "served but not in docs/metrics.md"
    assert sorted(set(docs) - set(fams)) == [], "in docs/metrics.md but not served"
    wrong_type = {n: (docs[n][0], t) for n, t in fams.items() if docs[n][0] != t}
    assert not wrong_type, wrong_type
    seen = sample_labels(scrape)
    undocumented = {n: seen[n] - docs[n][1] for n in fams if n in seen and seen[n] - docs[n][1]}
    assert not undocumented, undocumented


def test_one_label_name_per_concept(scrape):
    seen = set().union(*sample_labels(scrape).values())
    doc_labels = set().union(*(labels for _, labels in documented().values()))
    for old in ("resource_name", "node", "qos_level"):
        assert old not in seen | doc_labels, old
