//! The `autoprep` binary's configuration, run for real: the precedence of flags over
//! environment over file over defaults as `--print-config` shows it, and exit code 64 with
//! every problem named.

use std::path::PathBuf;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_autoprep");

/// The binary with none of the caller's `AUTOPREP_*` variables.
fn autoprep(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("AUTOPREP_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(args).envs(env.iter().copied()).output().unwrap()
}

fn file(name: &str, text: &str) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("autoprep-cli-{}-{name}.toml", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn flags_override_environment_override_file_override_defaults() {
    let f = file(
        "precedence",
        "cache_entries = 9\nadmission_threshold = 3\ncache_bytes = 1000\nlisten = \"127.0.0.1:19043\"\n",
    );
    let out = autoprep(
        &["--print-config", "--admission-threshold", "5"],
        &[
            ("AUTOPREP_CONFIG", f.to_str().unwrap()),
            ("AUTOPREP_CACHE_ENTRIES", "77"),
            ("AUTOPREP_ADMISSION_THRESHOLD", "4"),
            ("AUTOPREP_LISTEN", "127.0.0.1:29043"),
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let printed: toml::Table = stdout.parse().expect("--print-config prints TOML");
    assert_eq!(printed["admission_threshold"].as_integer(), Some(5));
    assert_eq!(printed["cache_entries"].as_integer(), Some(77));
    assert_eq!(printed["cache_bytes"].as_integer(), Some(1000));
    assert_eq!(printed["listen"].as_str(), Some("127.0.0.1:29043"));
    assert_eq!(printed["max_client_connections"].as_integer(), Some(1024));
    for line in [
        "admission_threshold = 5  # from --admission-threshold",
        "cache_entries = 77  # from AUTOPREP_CACHE_ENTRIES",
        &format!("cache_bytes = 1000  # from {}", f.display()),
        "drain_grace_seconds = 20  # default",
        "# admin is unset  (default)",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "{line:?} not in\n{stdout}"
        );
    }

    // What it prints is a configuration file that gives the same configuration.
    let again = file("printed", &stdout);
    let out2 = autoprep(
        &["--print-config", "--config", again.to_str().unwrap()],
        &[],
    );
    assert_eq!(out2.status.code(), Some(0), "{}", text(&out2.stderr));
    let reprinted: toml::Table = text(&out2.stdout).parse().unwrap();
    assert_eq!(reprinted, printed);
    std::fs::remove_file(f).unwrap();
    std::fs::remove_file(again).unwrap();
}

#[test]
fn every_problem_is_named_and_the_exit_code_is_64() {
    let f = file(
        "problems",
        "lisen = \"127.0.0.1:9043\"\nupstream = \"db.example:70000\"\nrewrite = \"yes\"\n",
    );
    let out = autoprep(
        &[
            "--config",
            f.to_str().unwrap(),
            "--cache-bytes",
            "0",
            "--admin",
            "localhost",
        ],
        &[
            ("AUTOPREP_SERVER_TIME_ZONE", "Europe/Paris"),
            ("AUTOPREP_MAX_CLIENT_CONNECTIONS", "lots"),
            ("AUTOPREP_DRAIN_GRACE_SECONDS", "-1"),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(out.stdout.is_empty());
    for expected in [
        "invalid configuration (8 problems)",
        "unknown key \"lisen\"",
        "did you mean \"listen\"",
        "upstream: bad port",
        "rewrite: expected a boolean, got string",
        "cache_bytes: must be at least 1, got 0 (from --cache-bytes)",
        "admin: no port",
        "server_time_zone: expected a UTC offset",
        "max_client_connections: expected a whole number, got \"lots\" (from AUTOPREP_MAX_CLIENT_CONNECTIONS)",
        "drain_grace_seconds: expected a whole number, got \"-1\"",
    ] {
        assert!(stderr.contains(expected), "{expected:?} not in\n{stderr}");
    }
    std::fs::remove_file(f).unwrap();
}

#[test]
fn command_line_errors_exit_64_and_help_exits_0() {
    let out = autoprep(&["--no-such-flag"], &[]);
    assert_eq!(out.status.code(), Some(64));
    assert!(text(&out.stderr).contains("--no-such-flag"));

    let out = autoprep(&["--config", "/nonexistent/autoprep.toml"], &[]);
    assert_eq!(out.status.code(), Some(64));
    assert!(text(&out.stderr).contains("--config: cannot read /nonexistent/autoprep.toml"));

    let out = autoprep(&["--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for flag in [
        "--config",
        "--print-config",
        "--max-client-connections",
        "AUTOPREP_DRAIN_GRACE_SECONDS",
    ] {
        assert!(help.contains(flag), "{flag} not in\n{help}");
    }
}
