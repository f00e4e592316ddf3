use super::options::{Kind, OPTIONS};
use super::*;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// A file in the temporary directory with `text`, unique to this test process and call.
fn temp_file(text: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "autoprep-config-{}-{}.toml",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, text).unwrap();
    path
}

fn env(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    vars.iter().map(|(k, v)| (k.into(), v.into())).collect()
}

fn args(a: &[&str]) -> Vec<String> {
    std::iter::once("autoprep")
        .chain(a.iter().copied())
        .map(String::from)
        .collect()
}

fn problems(a: &[&str], vars: &[(&str, &str)]) -> Vec<String> {
    match load(args(a), env(vars)) {
        Err(LoadError::Invalid(p)) => p,
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn defaults_are_valid() {
    assert_eq!(Config::default().validate(), []);
    assert_eq!(Config::for_upstream("127.0.0.1:9042").validate(), []);
    let l = load(args(&[]), env(&[])).unwrap();
    assert_eq!(l.config, Config::default());
    assert!(l.sources.values().all(|s| *s == Source::Default));
}

#[test]
fn flags_override_the_environment_which_overrides_the_file() {
    let file = temp_file(
        "cache_entries = 9\nadmission_threshold = 3\ncache_bytes = 1000\nexclude = [\"system.\"]\n",
    );
    let l = load(
        args(&[
            "--config",
            file.to_str().unwrap(),
            "--admission-threshold",
            "5",
        ]),
        env(&[
            ("AUTOPREP_CACHE_ENTRIES", "77"),
            ("AUTOPREP_ADMISSION_THRESHOLD", "4"),
            ("PATH", "/bin"),
        ]),
    )
    .unwrap();
    let c = &l.config;
    assert_eq!(c.admission_threshold, 5, "flag over variable and file");
    assert_eq!(c.cache_entries, 77, "variable over file");
    assert_eq!(c.cache_bytes, 1000, "file over default");
    assert_eq!(c.exclude, ["system."]);
    assert_eq!(c.listen, Config::default().listen, "default");
    assert_eq!(
        l.sources["admission_threshold"],
        Source::Flag("admission-threshold")
    );
    assert_eq!(
        l.sources["cache_entries"],
        Source::Env("AUTOPREP_CACHE_ENTRIES")
    );
    assert_eq!(l.sources["cache_bytes"], Source::File(file.clone()));
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    std::fs::remove_file(file).unwrap();
}

#[test]
fn the_file_may_be_named_by_the_environment() {
    let file = temp_file("listen = \"0.0.0.0:19043\"\n");
    let l = load(
        args(&[]),
        env(&[("AUTOPREP_CONFIG", file.to_str().unwrap())]),
    )
    .unwrap();
    assert_eq!(l.config.listen, "0.0.0.0:19043");
    assert_eq!(l.file.as_deref(), Some(file.as_path()));
    std::fs::remove_file(file).unwrap();
}

#[test]
fn lists_and_unsetting() {
    let file = temp_file("admin = \"127.0.0.1:9100\"\nserver_time_zone = \"UTC\"\n");
    let f = file.to_str().unwrap();
    // An empty variable unsets what the file sets.
    let l = load(
        args(&["--config", f, "--exclude", "a, b", "--exclude", "c"]),
        env(&[("AUTOPREP_ADMIN", "")]),
    )
    .unwrap();
    assert_eq!(l.config.admin, None);
    assert_eq!(l.config.server_time_zone.as_deref(), Some("UTC"));
    // A flag is one pattern, commas included; the variable is split at commas.
    assert_eq!(l.config.exclude, ["a, b", "c"]);
    let l = load(args(&[]), env(&[("AUTOPREP_EXCLUDE", "x., y ,,z")])).unwrap();
    assert_eq!(l.config.exclude, ["x.", "y", "z"]);
    std::fs::remove_file(file).unwrap();
}

#[test]
fn every_problem_is_reported_by_name() {
    let file = temp_file(
        "lisen = \"x\"\nlisten = \"nowhere\"\ncache_entries = \"many\"\nrewrite = 1\n[tls]\ncert = \"c.pem\"\n",
    );
    let p = problems(
        &[
            "--config",
            file.to_str().unwrap(),
            "--cache-bytes",
            "0",
            "--upstream",
            "db:0",
        ],
        &[
            ("AUTOPREP_SERVER_TIME_ZONE", "Mars/Olympus"),
            ("AUTOPREP_MAX_CLIENT_CONNECTIONS", "0"),
            ("AUTOPREP_ADMISSION_THRESHOLD", "two"),
            ("AUTOPREP_LOG", "autoprep=loud"),
            ("AUTOPREP_EXCLUDE", ","),
            ("AUTOPREP_ADMIN", "[::1]9100"),
        ],
    );
    let all = p.join("\n");
    for expected in [
        "unknown key \"lisen\"",
        "did you mean \"listen\"",
        "unknown key \"tls.cert\"",
        "listen: no port",
        "cache_entries: expected an integer, got string",
        "rewrite: expected a boolean, got integer",
        "cache_bytes: must be at least 1, got 0 (from --cache-bytes)",
        "upstream: port 0",
        "server_time_zone: expected a UTC offset",
        "(from AUTOPREP_SERVER_TIME_ZONE)",
        "max_client_connections: must be at least 1, got 0 (from AUTOPREP_MAX_CLIENT_CONNECTIONS)",
        "admission_threshold: expected a whole number, got \"two\" (from AUTOPREP_ADMISSION_THRESHOLD)",
        "log: not a log filter",
        "admin: ",
    ] {
        assert!(all.contains(expected), "{expected:?} missing from\n{all}");
    }
    // ',' splits into no pattern at all: an empty list, which is fine.
    assert!(!all.contains("exclude"), "{all}");
    assert_eq!(p.len(), 12, "{all}");
    std::fs::remove_file(file).unwrap();
}

#[test]
fn an_empty_exclude_pattern_is_a_problem() {
    let p = problems(&["--exclude", ""], &[]);
    assert_eq!(
        p,
        ["exclude: an empty pattern would exclude every statement (from --exclude)"]
    );
}

#[test]
fn a_missing_or_broken_file_is_a_problem() {
    let p = problems(&["--config", "/nonexistent/autoprep.toml"], &[]);
    assert_eq!(p.len(), 1);
    assert!(
        p[0].starts_with("--config: cannot read /nonexistent/autoprep.toml"),
        "{p:?}"
    );
    let file = temp_file("listen = \n");
    let p = problems(&["--config", file.to_str().unwrap()], &[]);
    assert!(p[0].contains("not valid TOML"), "{p:?}");
    std::fs::remove_file(file).unwrap();
}

#[test]
fn unknown_variables_are_warned_about() {
    let l = load(
        args(&[]),
        env(&[("AUTOPREP_LISTN", "x"), ("AUTOPREP_LISTEN", "127.0.0.1:1")]),
    )
    .unwrap();
    assert_eq!(
        l.warnings,
        ["ignoring environment variables that are not autoprep options: AUTOPREP_LISTN"]
    );
}

#[test]
fn a_bad_flag_is_a_command_line_error() {
    match load(args(&["--no-such-flag"]), env(&[])) {
        Err(LoadError::Cli(e)) => assert!(e.use_stderr()),
        other => panic!("{other:?}"),
    }
    match load(args(&["--help"]), env(&[])) {
        Err(LoadError::Cli(e)) => assert!(!e.use_stderr()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn printed_config_reads_back_the_same() {
    let l = load(
        args(&[
            "--admin",
            "127.0.0.1:9100",
            "--exclude",
            "say \"hi\"",
            "--rewrite",
            "false",
        ]),
        env(&[("AUTOPREP_DRAIN_GRACE_SECONDS", "7")]),
    )
    .unwrap();
    let text = l.to_toml();
    assert!(
        text.contains("admin = \"127.0.0.1:9100\"  # from --admin\n"),
        "{text}"
    );
    assert!(
        text.contains("drain_grace_seconds = 7  # from AUTOPREP_DRAIN_GRACE_SECONDS\n"),
        "{text}"
    );
    assert!(
        text.contains("listen = \"127.0.0.1:9043\"  # default\n"),
        "{text}"
    );
    assert!(
        text.contains("# server_time_zone is unset  (default)\n"),
        "{text}"
    );
    let file = temp_file(&text);
    let back = load(args(&["--config", file.to_str().unwrap()]), env(&[])).unwrap();
    assert_eq!(back.config, l.config);
    std::fs::remove_file(file).unwrap();
}

#[test]
fn addresses() {
    for ok in [
        "127.0.0.1:9043",
        "[::1]:9043",
        "cassandra.db.svc:9042",
        "localhost:0",
    ] {
        assert_eq!(address(ok, true), Ok(()), "{ok}");
    }
    for bad in [
        "",
        "9042",
        ":9042",
        "host:",
        "host:99999",
        "::1:9042",
        "[::1:9042",
        "a b:1",
    ] {
        assert!(address(bad, true).is_err(), "{bad}");
    }
    assert!(address("db:0", false).is_err());
}

/// Every field of [`Config`] is an option, named by the conventions, and CONFIG.md documents
/// it with its flag, variable and default.
#[test]
fn options_fields_and_docs_agree() {
    let all_set = Config {
        admin: Some("x".into()),
        advertise_address: Some("x".into()),
        server_time_zone: Some("x".into()),
        tls_cert: Some("x".into()),
        tls_key: Some("x".into()),
        handover_socket: Some("x".into()),
        tls_client_ca: Some("x".into()),
        upstream_tls_ca: Some("x".into()),
        upstream_tls_cert: Some("x".into()),
        upstream_tls_key: Some("x".into()),
        upstream_tls_server_name: Some("x".into()),
        routing_local_dc: Some("x".into()),
        server_metrics_url: Some("x".into()),
        control_fraction: Some(0.5),
        tracing_endpoint: Some("x".into()),
        tracing_protocol: Some("x".into()),
        tracing_sample_ratio: Some(0.5),
        ..Config::default()
    };
    let fields: Vec<String> = toml::Table::try_from(&all_set)
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut keys: Vec<String> = OPTIONS.iter().map(|o| o.key.to_owned()).collect();
    keys.sort();
    assert_eq!(keys, fields);
    let doc = include_str!("../../../../CONFIG.md");
    for o in OPTIONS {
        assert_eq!(o.flag, o.key.replace('_', "-"));
        assert_eq!(o.env, format!("AUTOPREP_{}", o.key.to_uppercase()));
        assert_eq!(o.kind == Kind::List, o.key == "exclude");
        for name in [
            format!("`--{}`", o.flag),
            format!("`{}`", o.env),
            format!("`{}`", o.key),
        ] {
            assert!(doc.contains(&name), "CONFIG.md does not mention {name}");
        }
    }
}

/// The TOML examples of CONFIG.md load, and the full one is the defaults.
#[test]
fn config_md_examples_load() {
    let doc = include_str!("../../../../CONFIG.md");
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert_eq!(
        blocks.len(),
        2,
        "CONFIG.md has a minimal and a full example"
    );
    for (i, text) in blocks.iter().enumerate() {
        let file = temp_file(text);
        let l = load(args(&["--config", file.to_str().unwrap()]), env(&[])).unwrap();
        if i == 1 {
            assert_eq!(l.config, Config::default());
        }
        std::fs::remove_file(file).unwrap();
    }
}
