#!/usr/bin/env bash
# check_contrib: the monitoring files in contrib/ are sound, and every metric they use is one
# honed exports.
#
#   check_contrib.sh [METRICS_FILE]
#
#   (a) contrib/prometheus: `promtool check rules alerts.yml`, `promtool test rules
#       alerts_test.yml` (each alert fires on a troubled series and stays quiet on a healthy one),
#       `promtool check config prometheus.yml`.
#   (b) contrib/grafana/hone.json: valid JSON, a dashboard with panels, every query on the
#       ${DS_PROMETHEUS} data source variable, the DS_PROMETHEUS and instance variables, unique
#       panel ids, and every PromQL expression parses (promtool, with Grafana's $variables
#       replaced by sample values).
#   (c) Every metric name the dashboard's and alerts.yml's expressions use (histogram series
#       _bucket/_sum/_count counted as their histogram; `up` is Prometheus's own) appears as a
#       `# TYPE NAME TYPE` line of METRICS_FILE: the output of `honectl metrics` (or of
#       GET /metrics) from a running honed. Fails naming each missing one. A honed started without
#       a remote tier exports no hone_remote_* metrics: dump one with [store.remote] urls set
#       (tests/contrib/dump_metrics.sh does). Without METRICS_FILE, (c) only lists the names.
#
# Exit 0: all passed; 1: something failed; 77 (skipped): promtool (Debian package prometheus),
# python3 or its yaml module (python3-yaml) is missing and nothing that could run failed.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
prom="$root/contrib/prometheus"
dashboard="$root/contrib/grafana/hone.json"
metrics=${1:-}

failed=0
skipped=0
fail() {
  echo "FAIL: $*"
  failed=1
}
skip() {
  echo "SKIP: $*"
  skipped=1
}

if [[ -n $metrics && ! -r $metrics ]]; then
  echo "FAIL: cannot read the metrics file $metrics"
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/check_contrib.XXXXXX")
trap 'rm -rf "$work"' EXIT

have_promtool=1
command -v promtool >/dev/null || have_promtool=0

# ---------------------------------------------------------------------------------------- (a)
echo "== (a) Prometheus rules, their unit tests and the example configuration"
if ((have_promtool)); then
  promtool check rules "$prom/alerts.yml" || fail "promtool check rules alerts.yml"
  promtool test rules "$prom/alerts_test.yml" || fail "promtool test rules alerts_test.yml"
  promtool check config "$prom/prometheus.yml" || fail "promtool check config prometheus.yml"
else
  skip "promtool not found (Debian package prometheus): rules, tests and config not checked"
fi

# ------------------------------------------------------------------------------- (b) and (c)
if ! command -v python3 >/dev/null; then
  skip "python3 not found: the dashboard and the metric names not checked"
elif ! python3 -c 'import yaml' 2>/dev/null; then
  skip "python3's yaml module not found (Debian package python3-yaml): the dashboard and the metric names not checked"
else
  python3 - "$dashboard" "$prom/alerts.yml" "$work" "$metrics" "$have_promtool" <<'PY' || failed=1
import json
import os
import re
import subprocess
import sys

import yaml

dashboard_path, alerts_path, work, metrics_path, have_promtool = sys.argv[1:6]
problems = []


def problem(msg):
    problems.append(msg)
    print("FAIL: " + msg)


# --- (b) the dashboard ------------------------------------------------------------------------
print("== (b) the Grafana dashboard " + dashboard_path)
try:
    with open(dashboard_path, encoding="utf-8") as f:
        dash = json.load(f)
except (OSError, ValueError) as e:
    print("FAIL: %s is not valid JSON: %s" % (dashboard_path, e))
    sys.exit(1)

if not isinstance(dash, dict):
    problem("the dashboard is not a JSON object")
    sys.exit(1)
if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 36:
    problem("schemaVersion missing or below 36: %r" % dash.get("schemaVersion"))

variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
ds = variables.get("DS_PROMETHEUS")
if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
    problem("no templating variable DS_PROMETHEUS of type datasource (query prometheus)")
if "instance" not in variables:
    problem("no templating variable instance")


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


panels = list(all_panels(dash.get("panels", [])))
if not [p for p in panels if p.get("type") != "row"]:
    problem("the dashboard has no panels")

DS_UID = "${DS_PROMETHEUS}"
exprs = []  # (where, expr)
ids = {}
for p in panels:
    title = p.get("title", "?")
    if "id" in p:
        if p["id"] in ids:
            problem("panels %r and %r share id %r" % (ids[p["id"]], title, p["id"]))
        ids[p["id"]] = title
    if "gridPos" not in p:
        problem("panel %r has no gridPos" % title)
    if p.get("type") == "row":
        continue
    targets = p.get("targets") or []
    if not targets:
        problem("panel %r has no queries" % title)
    for t in targets:
        uid = (t.get("datasource") or p.get("datasource") or {}).get("uid")
        if uid != DS_UID:
            problem("panel %r: a query's data source is %r, not %s" % (title, uid, DS_UID))
        if not t.get("expr", "").strip():
            problem("panel %r: a query without an expression" % title)
        else:
            exprs.append(("panel %r" % title, t["expr"]))

for a in dash.get("annotations", {}).get("list", []):
    if a.get("expr"):
        exprs.append(("annotation %r" % a.get("name"), a["expr"]))

for name, v in variables.items():
    if v.get("type") != "query":
        continue
    q = v.get("query")
    q = q.get("query", "") if isinstance(q, dict) else (q or "")
    m = re.fullmatch(r"\s*label_values\((.*),\s*[A-Za-z_]\w*\s*\)\s*", q)
    if m:
        exprs.append(("variable %r" % name, m.group(1)))
    elif re.fullmatch(r"\s*label_values\(\s*[A-Za-z_]\w*\s*\)\s*", q):
        pass
    elif q.strip():
        exprs.append(("variable %r" % name, q))

print("%d panels, %d expressions" % (len([p for p in panels if p.get("type") != "row"]), len(exprs)))

# Every expression parses: hand them to promtool as recording rules, Grafana's variables
# replaced by values of the kind Grafana substitutes.
GRAFANA_VARS = [
    (r"\$__rate_interval|\$\{__rate_interval\}", "1m"),
    (r"\$__interval|\$\{__interval\}", "1m"),
    (r"\$__range|\$\{__range\}", "1h"),
    (r"\$instance|\$\{instance(:[a-z]+)?\}", ".*"),
]


def substitute(expr):
    for pattern, value in GRAFANA_VARS:
        expr = re.sub(pattern, value, expr)
    return expr


leftover = [(w, e) for w, e in exprs if "$" in substitute(e)]
for w, e in leftover:
    problem("%s uses a variable this check does not know: %s" % (w, e))
rules = {"groups": [{"name": "dashboard", "rules": [
    {"record": "dashboard:expr_%d" % i, "expr": substitute(e)} for i, (w, e) in enumerate(exprs)]}]}
with open(work + "/dashboard_rules.yml", "w") as f:
    yaml.safe_dump(rules, f, sort_keys=False)
if have_promtool == "1":
    run = subprocess.run(["promtool", "check", "rules", work + "/dashboard_rules.yml"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        print(run.stdout)
        for i, (w, e) in enumerate(exprs):
            print("  dashboard:expr_%d is %s: %s" % (i, w, e))
        problem("a dashboard expression does not parse (promtool check rules, above)")
    else:
        print("all %d expressions parse (promtool check rules)" % len(exprs))
else:
    print("SKIP: promtool not found: the dashboard's expressions not parsed")

# --- (c) metric names --------------------------------------------------------------------------
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
            "and", "or", "unless", "atan2", "inf", "nan"}
IGNORED = {"up"}  # Prometheus's own, per scrape target
SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr):
    """The metric names a PromQL expression selects (function and aggregation names, label
    names, keywords, numbers, durations and strings left out)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', " ", expr)  # strings
    s = re.sub(r"\{[^{}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\[\]]*\]", " ", s)  # ranges and subqueries
    s = re.sub(r"\$\{[^}]*\}|\$\w+", " ", s)  # Grafana variables
    s = re.sub(r"\boffset\s+-?\w+", " ", s)
    s = re.sub(r"@\s*[\w.()]+", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", s)
    s = re.sub(r"(?<![\w:])(0x[0-9a-fA-F]+|\d+(\.\d*)?([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)(?![\w:])", " ", s)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        if re.match(r"\s*\(", s[m.end():]):
            continue  # a function or an aggregation
        if m.group(0).lower() in KEYWORDS:
            continue
        names.add(m.group(0))
    return names - IGNORED


# The extraction must find what is there and nothing else, or (c) proves nothing.
canary = ('sum by (le, backend) (rate(a_seconds_bucket{x="y", z=~"q{1}(b_total)"}[5m:1m] '
          'offset 1h)) / on(instance) group_left(version) b_info * 0.9 > bool 1e3 '
          'and topk(10, c_total @ end()) or absent(up{job=~"hone.*"}) unless ${x} '
          'histogram_quantile(0.99, d_bucket[$__rate_interval])')
want = {"a_seconds_bucket", "b_info", "c_total", "d_bucket"}
if metric_names(canary) != want:
    problem("the metric name extraction is broken: %s gives %s, not %s"
            % (canary, sorted(metric_names(canary)), sorted(want)))

with open(alerts_path, encoding="utf-8") as f:
    alerts = yaml.safe_load(f)

# Every alert says how bad it is, what happened, and where its runbook is: a section of a page
# under docs/ that exists.
print("== (a) every alert's labels, annotations and runbook section")
docs_dir = os.path.join(os.path.dirname(os.path.abspath(alerts_path)), "..", "..")
anchors = {}


def page_anchors(page):
    if page not in anchors:
        found = set()
        try:
            with open(os.path.join(docs_dir, page), encoding="utf-8") as f:
                for line in f:
                    m = re.match(r"#{1,6}\s+(.*?)\s*$", line)
                    if m:  # GitHub's anchors: lower case, punctuation dropped, spaces to dashes
                        a = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
                        found.add(a)
        except OSError:
            found = None
        anchors[page] = found
    return anchors[page]


n_alerts = 0
for g in alerts.get("groups", []):
    for r in g.get("rules", []):
        exprs.append(("alert %r" % r.get("alert", r.get("record")), str(r.get("expr", ""))))
        if "alert" not in r:
            continue
        n_alerts += 1
        name = r["alert"]
        if r.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
            problem("alert %s: no severity label (critical, warning or info)" % name)
        ann = r.get("annotations", {})
        for key in ("summary", "description", "runbook_url"):
            if not str(ann.get(key, "")).strip():
                problem("alert %s: no %s annotation" % (name, key))
        url = str(ann.get("runbook_url", ""))
        m = re.fullmatch(r"(docs/[\w./-]+\.md)#([\w-]+)", url)
        if url and not m:
            problem("alert %s: runbook_url %r is not docs/PAGE.md#SECTION" % (name, url))
        elif m:
            found = page_anchors(m.group(1))
            if found is None:
                problem("alert %s: runbook page %s does not exist" % (name, m.group(1)))
            elif m.group(2) not in found:
                problem("alert %s: %s has no section #%s" % (name, m.group(1), m.group(2)))
if not n_alerts:
    problem("alerts.yml holds no alerts")
else:
    print("%d alerts checked" % n_alerts)

raw = {}  # name as written -> where
for w, e in exprs:
    for n in metric_names(e):
        raw.setdefault(n, []).append(w)
# A histogram is used through NAME_bucket (and NAME_sum, NAME_count): counted as NAME.
histograms = {n[: -len("_bucket")] for n in raw if n.endswith("_bucket")}
used = {}  # name -> where
for n, where in raw.items():
    base = next((n[: -len(sfx)] for sfx in SUFFIXES if n.endswith(sfx)), None)
    used.setdefault(base if base in histograms else n, []).extend(where)
if not used:
    problem("no metric names found in the dashboard and alerts.yml")

print("== (c) metric names the dashboard and alerts.yml use (%d):" % len(used))
for n in sorted(used):
    print("  " + n)


def missing_names(names, types):
    out = []
    for n in sorted(names):
        if n in histograms:
            if types.get(n) != "histogram":
                out.append(n)
            continue
        if n in types:
            continue
        base = next((n[: -len(sfx)] for sfx in SUFFIXES[1:] if n.endswith(sfx)), None)
        if base and types.get(base) in ("histogram", "summary"):
            continue  # NAME_sum or NAME_count of a histogram or summary
        out.append(n)
    return out


if metrics_path:
    types = {}
    with open(metrics_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"#\s*TYPE\s+(\S+)\s+(\S+)", line)
            if m:
                types[m.group(1)] = m.group(2)
    if not types:
        problem("%s holds no '# TYPE' lines: not the output of `honectl metrics`" % metrics_path)
    else:
        # The comparison must notice a name that is not there.
        some = sorted(n for n in used if n in types)
        if some:
            fewer = dict(types)
            del fewer[some[0]]
            if some[0] not in missing_names(used, fewer):
                problem("the comparison does not notice a missing metric (%s)" % some[0])
        missing = missing_names(used, types)
        if missing:
            problem("%d metric name(s) used but not in %s:" % (len(missing), metrics_path))
            for n in missing:
                kind = " (a histogram: _bucket, _sum, _count)" if n in histograms else ""
                print("  %s%s  (in %s)" % (n, kind, ", ".join(sorted(set(used[n])))))
        else:
            print("all %d names are in %s (%d metrics there)" % (len(used), metrics_path, len(types)))
else:
    print("(no METRICS_FILE given: the names were not compared with honed's metrics)")

sys.exit(1 if problems else 0)
PY
fi

if ((failed)); then
  echo "check_contrib: FAILED"
  exit 1
fi
if ((skipped)); then
  echo "check_contrib: skipped in part (see SKIP above)"
  exit 77
fi
echo "check_contrib: ok"
