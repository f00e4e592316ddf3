//! The Grafana dashboard (`deploy/grafana/autoprep.json`) against what autoprep really exports.
//!
//! The exposition is the `/metrics` body of a real [`Context`], rendered by the admin server's
//! own function, so a renamed metric or label fails here and not in somebody's Grafana. Checked:
//! every `autoprep_*` name a panel or variable queries is exported; every label a selector or a
//! `by (...)` grouping names is on that metric (or is a target label Prometheus adds when it
//! scrapes); every value an equality matcher names is one autoprep writes; the server's metrics
//! (`cassandra_*`, `scylla_*`) are the ones `deploy/README.md` documents; variables used are
//! defined; panel ids, grid positions and data sources are sound. No server needed.

use autoprep::config::Config;
use autoprep::context::Context;
use autoprep_tests::repo_root;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Labels Prometheus attaches to every scraped series (the Kubernetes pod discovery relabels
/// to `namespace` and `pod`), not autoprep.
const TARGET_LABELS: [&str; 4] = ["namespace", "pod", "instance", "job"];

/// Server metrics the dashboard may query: Cassandra's CQL MBeans as jmx_exporter's example
/// configuration names them and its process CPU as deploy/grafana's rules name it, and
/// ScyllaDB's own. Each must be documented in deploy/README.md.
const SERVER_METRICS: [&str; 11] = [
    "cassandra_cql_preparedstatementsexecuted",
    "cassandra_cql_regularstatementsexecuted",
    "cassandra_cql_preparedstatementsratio",
    "cassandra_cql_preparedstatementscount",
    "cassandra_cql_preparedstatementsevicted",
    "cassandra_process_cpu_seconds_total",
    "scylla_transport_cql_requests_count",
    "scylla_cql_prepared_cache_evictions",
    "scylla_reactor_cpu_busy_ms",
    "scylla_transport_requests_served",
    "scylla_query_processor_statements_prepared",
];

/// What the issues ask the dashboard to show, by the metric that shows it.
const REQUIRED: [&str; 19] = [
    "autoprep_queries_total",                   // rewrite ratio
    "autoprep_cache_lookups_total",             // cache hits
    "autoprep_cache_entries",                   // cache entries
    "autoprep_cache_evictions_total",           // evictions
    "autoprep_prepares_total",                  // prepares ok / failed
    "autoprep_request_duration_seconds_bucket", // latency quantiles
    "autoprep_unprepared_recoveries_total",     // unprepared recoveries
    "autoprep_client_connections",              // connections
    "autoprep_received_bytes_total",            // bytes in
    "cassandra_cql_preparedstatementsexecuted", // the server's prepared executions
    "cassandra_cql_regularstatementsexecuted",  // and regular ones
    // Issues 18 and 26: what autoprep saved the server's CPU, and the control group's latency.
    "autoprep_server_cpu_saved_seconds_total", // the estimate from the nodes' CPU
    "autoprep_server_cpu_saved_interval_seconds", // its 95 % interval
    "autoprep_server_cpu_net_saved_seconds",   // net of autoprep's own CPU
    "autoprep_server_response_seconds_count",  // control vs rewritten response time
    "autoprep_control_fraction",               // the control group's size
    "cassandra_process_cpu_seconds_total",     // Cassandra's CPU per 1000 statements
    "scylla_reactor_cpu_busy_ms",              // ScyllaDB's CPU per 1000 requests
    "scylla_transport_requests_served",        // (its denominator)
];

/// Grafana's own variables.
const BUILTIN_VARIABLES: [&str; 4] = ["__rate_interval", "__interval", "__range", "__all"];

/// Series name → label name → values seen.
type Exposition = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// The `/metrics` text of a fresh proxy, with a QUERY request and a pass-through counted so that
/// the series that appear only once counted exist. Every family a `# TYPE` line declares is in
/// the map (a histogram as its `_bucket`, `_sum` and `_count`), with the labels its samples carry.
fn exposition() -> (String, Exposition) {
    let ctx = Context::new(Config::for_upstream("127.0.0.1:9")).unwrap();
    ctx.metrics.request(0x07);
    ctx.metrics.passthrough("preparing");
    let text = autoprep::admin::metrics_text(&ctx);
    let mut series = Exposition::new();
    for declared in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, kind) = declared.split_once(' ').expect("# TYPE name kind");
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                series.entry(format!("{name}{suffix}")).or_default();
            }
        } else {
            series.entry(name.to_owned()).or_default();
        }
    }
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => panic!("bad sample line {line:?}"),
        };
        let labels = series.entry(name.to_owned()).or_default();
        if let Some(body) = rest.strip_prefix('{') {
            let body = &body[..body.rfind('}').expect("closing brace")];
            for (k, v) in parse_matchers(body) {
                labels.entry(k).or_default().insert(v.1);
            }
        }
    }
    (text, series)
}

/// `k="v", k2=~"v2"` → (label, (operator, value)). Values here carry no escaped quotes.
fn parse_matchers(body: &str) -> Vec<(String, (String, String))> {
    let mut out = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let op_at = rest
            .find(['=', '!'])
            .unwrap_or_else(|| panic!("matcher without operator in {body:?}"));
        let label = rest[..op_at].trim().to_owned();
        let after = &rest[op_at..];
        let op_len =
            if after.starts_with("=~") || after.starts_with("!=") || after.starts_with("!~") {
                2
            } else {
                1
            };
        let op = after[..op_len].to_owned();
        let after = after[op_len..].trim_start();
        let after = after
            .strip_prefix('"')
            .unwrap_or_else(|| panic!("unquoted matcher value in {body:?}"));
        let end = after.find('"').expect("closing quote");
        out.push((label, (op, after[..end].to_owned())));
        rest = after[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// A metric selector found in a PromQL expression.
#[derive(Debug)]
struct Selector {
    name: String,
    matchers: Vec<(String, (String, String))>,
}

/// Metric selectors (names with our prefixes, and their `{...}`), names inside `__name__`
/// regexes, and the labels of every `by (...)` / `without (...)` grouping.
fn scan(expr: &str) -> (Vec<Selector>, Vec<String>) {
    let prefixes = ["autoprep_", "cassandra_", "scylla_"];
    let chars: Vec<char> = expr.chars().collect();
    let mut selectors = Vec::new();
    let mut groupings = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            // A string outside a selector (the {...} bodies are consumed below).
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += 1;
            }
            i += 1;
            continue;
        }
        if c == '{' {
            // A selector without a name: `{__name__=~"a|b"}`.
            let end = i + chars[i..].iter().position(|&c| c == '}').expect("}");
            let body: String = chars[i + 1..end].iter().collect();
            for (label, (op, value)) in parse_matchers(&body) {
                assert_eq!(label, "__name__", "nameless selector {body:?} in {expr}");
                assert!(op == "=" || op == "=~", "{expr}");
                for name in value.split('|') {
                    selectors.push(Selector {
                        name: name.to_owned(),
                        matchers: Vec::new(),
                    });
                }
            }
            i = end + 1;
            continue;
        }
        if is_ident_char(c) && (i == 0 || !is_ident_char(chars[i - 1])) {
            let start = i;
            while i < chars.len() && is_ident_char(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j] == ' ' {
                j += 1;
            }
            if word == "by" || word == "without" {
                assert_eq!(chars.get(j), Some(&'('), "{word} without ( in {expr}");
                let end = j + chars[j..].iter().position(|&c| c == ')').expect(")");
                let list: String = chars[j + 1..end].iter().collect();
                groupings.extend(list.split(',').map(|l| l.trim().to_owned()));
                i = end + 1;
            } else if prefixes.iter().any(|p| word.starts_with(p)) {
                let mut matchers = Vec::new();
                if chars.get(i) == Some(&'{') {
                    let end = i + chars[i..].iter().position(|&c| c == '}').expect("}");
                    let body: String = chars[i + 1..end].iter().collect();
                    matchers = parse_matchers(&body);
                    i = end + 1;
                }
                selectors.push(Selector {
                    name: word,
                    matchers,
                });
            }
            continue;
        }
        i += 1;
    }
    (selectors, groupings)
}

/// Every `$name` / `${name}` in a string.
fn variables(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let braced = rest.starts_with('{');
        let body = if braced { &rest[1..] } else { rest };
        let len = body.find(|c: char| !is_ident_char(c)).unwrap_or(body.len());
        if len > 0 {
            out.push(body[..len].to_owned());
        }
        rest = body;
    }
    out
}

fn balanced(expr: &str) -> bool {
    let mut stack = Vec::new();
    let mut in_string = false;
    for c in expr.chars() {
        let opening = match c {
            ')' => '(',
            '}' => '{',
            ']' => '[',
            _ => {
                if c == '"' {
                    in_string = !in_string;
                } else if !in_string && "({[".contains(c) {
                    stack.push(c);
                }
                continue;
            }
        };
        if !in_string && stack.pop() != Some(opening) {
            return false;
        }
    }
    stack.is_empty() && !in_string
}

/// Checks one PromQL expression; returns the metric names it uses.
fn check_expr(expr: &str, where_: &str, exported: &Exposition, readme: &str) -> Vec<String> {
    assert!(balanced(expr), "{where_}: unbalanced brackets in {expr}");
    let (selectors, groupings) = scan(expr);
    assert!(!selectors.is_empty(), "{where_}: no metric in {expr}");
    let mut names = Vec::new();
    let mut labels_in_scope: BTreeSet<String> =
        TARGET_LABELS.iter().map(|s| s.to_string()).collect();
    for s in &selectors {
        names.push(s.name.clone());
        if s.name.starts_with("autoprep_") {
            let labels = exported.get(&s.name).unwrap_or_else(|| {
                panic!(
                    "{where_}: autoprep does not export {} (exported: {:?})",
                    s.name,
                    exported.keys().collect::<Vec<_>>()
                )
            });
            labels_in_scope.extend(labels.keys().cloned());
            for (label, (op, value)) in &s.matchers {
                if TARGET_LABELS.contains(&label.as_str()) {
                    continue;
                }
                let values = labels.get(label).unwrap_or_else(|| {
                    panic!("{where_}: {} has no label {label} in {expr}", s.name)
                });
                if op == "=" && !value.contains('$') {
                    assert!(
                        values.contains(value),
                        "{where_}: {}{{{label}=\"{value}\"}} is never written (values: {values:?})",
                        s.name
                    );
                }
            }
        } else {
            assert!(
                SERVER_METRICS.contains(&s.name.as_str()),
                "{where_}: {} is not a server metric this test knows",
                s.name
            );
            assert!(
                readme.contains(&s.name),
                "{where_}: deploy/README.md does not document {}",
                s.name
            );
            // Server metrics' labels are the exporter's: the target labels and `kind`.
            labels_in_scope.insert("kind".into());
            for (label, _) in &s.matchers {
                assert!(
                    labels_in_scope.contains(label),
                    "{where_}: unexpected label {label} on {}",
                    s.name
                );
            }
        }
    }
    for g in groupings {
        assert!(
            labels_in_scope.contains(&g),
            "{where_}: grouping by {g}, which none of its metrics has: {expr}"
        );
    }
    names
}

#[test]
fn dashboard_queries_only_what_autoprep_exports() {
    let root = repo_root();
    let path = root.join("deploy/grafana/autoprep.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let readme = std::fs::read_to_string(root.join("deploy/README.md")).unwrap();
    let (text, exported) = exposition();
    assert!(text.contains("# TYPE autoprep_queries_total counter"));

    // Variables: defined ones, and the metrics their queries read.
    let mut defined: BTreeSet<String> = BUILTIN_VARIABLES.iter().map(|s| s.to_string()).collect();
    let mut used_metrics = BTreeSet::new();
    for var in dash["templating"]["list"]
        .as_array()
        .expect("templating.list")
    {
        let name = var["name"].as_str().expect("variable name");
        if var["type"] == "query" {
            let q = var["definition"].as_str().expect("definition");
            let inner = q
                .strip_prefix("label_values(")
                .and_then(|s| s.strip_suffix(')'))
                .unwrap_or_else(|| panic!("variable {name}: not label_values(...): {q}"));
            let (selector, label) = inner
                .rsplit_once(',')
                .expect("label_values(selector, label)");
            let label = label.trim();
            let metrics = check_expr(selector, &format!("variable {name}"), &exported, &readme);
            assert!(
                TARGET_LABELS.contains(&label),
                "variable {name} reads label {label}, not a target label"
            );
            for v in variables(q) {
                assert!(
                    defined.contains(&v),
                    "variable {name} uses ${v} before it is defined"
                );
            }
            used_metrics.extend(metrics);
        }
        defined.insert(name.to_owned());
    }
    assert!(defined.contains("datasource"), "a datasource variable");

    // Panels.
    let panels = dash["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    let mut queried = 0;
    for p in panels {
        let id = p["id"].as_u64().expect("panel id");
        let title = p["title"].as_str().expect("panel title");
        assert!(ids.insert(id), "panel id {id} twice");
        let grid = &p["gridPos"];
        let (x, w) = (grid["x"].as_u64().unwrap(), grid["w"].as_u64().unwrap());
        assert!(
            w >= 1 && x + w <= 24,
            "panel {title}: off the 24-column grid"
        );
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(
            p["datasource"]["uid"], "${datasource}",
            "panel {title}: data source is the variable"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {title}: no query");
        let mut ref_ids = BTreeSet::new();
        for t in targets {
            assert!(
                ref_ids.insert(t["refId"].as_str().expect("refId")),
                "{title}: refId twice"
            );
            let expr = t["expr"].as_str().expect("expr");
            for v in variables(expr) {
                assert!(defined.contains(&v), "panel {title}: ${v} is not defined");
            }
            used_metrics.extend(check_expr(
                expr,
                &format!("panel {title}"),
                &exported,
                &readme,
            ));
            queried += 1;
        }
    }
    assert!(queried >= 20, "{queried} queries");
    for m in REQUIRED {
        assert!(used_metrics.contains(m), "the dashboard shows no {m}");
    }
    let unused: Vec<_> = exported
        .keys()
        .filter(|k| !used_metrics.contains(*k))
        .collect();
    // Informational: a new metric need not be on the dashboard at once.
    eprintln!("exported but not on the dashboard: {unused:?}");
}

#[test]
fn scanner_finds_selectors_and_groupings() {
    let (s, g) = scan(
        r#"sum by (le, pod) (rate(autoprep_x_bucket{a="b", c=~"$d"}[$__rate_interval])) / on() sum(autoprep_y) + count({__name__=~"scylla_a|cassandra_b"})"#,
    );
    let names: Vec<_> = s.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["autoprep_x_bucket", "autoprep_y", "scylla_a", "cassandra_b"]
    );
    assert_eq!(s[0].matchers.len(), 2);
    assert_eq!(s[0].matchers[1].1, ("=~".into(), "$d".into()));
    assert_eq!(g, ["le", "pod"]);
    assert!(balanced("a(b{c=\")\"}[1m])"));
    assert!(!balanced("a(b"));
    assert_eq!(
        variables("x{a=~\"$ns\"}[${__rate_interval}]"),
        ["ns", "__rate_interval"]
    );
}
