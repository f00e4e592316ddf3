//! Loading the configuration: defaults, then the TOML file, then `AUTOPREP_*` variables, then
//! flags, each overriding the one before; then [`Config::validate`]. Every problem of every
//! source is collected before giving up, so one run names them all.

use super::options::{self, Kind, Raw, Spec, OPTIONS};
use super::{Config, Problem};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The variable naming the configuration file.
pub const CONFIG_ENV: &str = "AUTOPREP_CONFIG";

/// The prefix of every variable autoprep reads.
const ENV_PREFIX: &str = "AUTOPREP_";

/// Where an option's effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    Env(&'static str),
    Flag(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "from {}", p.display()),
            Source::Env(v) => write!(f, "from {v}"),
            Source::Flag(flag) => write!(f, "from --{flag}"),
        }
    }
}

/// A loaded, valid configuration.
#[derive(Debug)]
pub struct Loaded {
    pub config: Config,
    /// `--print-config` was given: print [`Loaded::to_toml`] and exit.
    pub print_config: bool,
    /// The configuration file read, if any.
    pub file: Option<PathBuf>,
    /// Where each option's value came from, by TOML key.
    pub sources: BTreeMap<&'static str, Source>,
    /// Not errors, but worth a log line once logging is up (unknown `AUTOPREP_*` variables).
    pub warnings: Vec<String>,
}

/// Why there is no configuration to run with.
#[derive(Debug)]
pub enum LoadError {
    /// The command line could not be parsed, or asked for `--help` / `--version` (then
    /// [`clap::Error::use_stderr`] is false and the text goes to standard output, exit 0).
    Cli(clap::Error),
    /// Every problem found, one line each.
    Invalid(Vec<String>),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Cli(e) => write!(f, "{e}"),
            LoadError::Invalid(problems) => {
                writeln!(
                    f,
                    "autoprep: invalid configuration ({} problem{}):",
                    problems.len(),
                    if problems.len() == 1 { "" } else { "s" }
                )?;
                for p in problems {
                    writeln!(f, "  - {p}")?;
                }
                write!(f, "See CONFIG.md or `autoprep --help`.")
            }
        }
    }
}

/// The command line: every option of [`OPTIONS`], plus `--config` and `--print-config`.
pub fn command() -> Command {
    let defaults = flat(&Config::default());
    let mut cmd = Command::new("autoprep")
        .version(env!("CARGO_PKG_VERSION"))
        .about("A CQL sidecar that turns unprepared statements into prepared ones.")
        .after_help(
            "Flags override AUTOPREP_* variables, which override the file, which overrides the \
             defaults. Every option is documented in CONFIG.md.",
        )
        .arg(
            Arg::new("config")
                .long("config")
                .value_name("PATH")
                .help(format!("A TOML configuration file [env: {CONFIG_ENV}]")),
        )
        .arg(
            Arg::new("print-config")
                .long("print-config")
                .action(ArgAction::SetTrue)
                .help("Print the effective configuration as TOML and exit"),
        );
    for o in OPTIONS {
        let default = match defaults.get(o.key) {
            Some(v) => format!(" [default: {v}]"),
            None => String::new(),
        };
        cmd = cmd.arg(
            Arg::new(o.key)
                .long(o.flag)
                .value_name(o.value_name)
                .hide(o.hidden)
                .action(match o.kind {
                    Kind::One => ArgAction::Set,
                    Kind::List => ArgAction::Append,
                })
                .help(format!("{} [env: {}]{default}", o.help, o.env)),
        );
    }
    cmd
}

/// Loads the configuration from `args` (the first is the program name) and the environment
/// `env` (every variable; those without the `AUTOPREP_` prefix are ignored).
pub fn load<A, E>(args: A, env: E) -> Result<Loaded, LoadError>
where
    A: IntoIterator,
    A::Item: Into<OsString> + Clone,
    E: IntoIterator<Item = (OsString, OsString)>,
{
    let matches = command()
        .try_get_matches_from(args)
        .map_err(LoadError::Cli)?;
    let mut problems = Vec::new();
    let vars = autoprep_vars(env, &mut problems);
    let mut a = Assembly {
        config: Config::default(),
        sources: OPTIONS.iter().map(|o| (o.key, Source::Default)).collect(),
        problems,
    };
    let file = match matches.get_one::<String>("config") {
        Some(p) => Some((PathBuf::from(p), "--config")),
        None => vars
            .get(CONFIG_ENV)
            .filter(|p| !p.is_empty())
            .map(|p| (PathBuf::from(p), CONFIG_ENV)),
    };
    if let Some((path, named_by)) = &file {
        a.file(path, named_by);
    }
    let warnings = a.env(&vars);
    a.flags(&matches);
    a.validate();
    if !a.problems.is_empty() {
        return Err(LoadError::Invalid(a.problems));
    }
    Ok(Loaded {
        config: a.config,
        print_config: matches.get_flag("print-config"),
        file: file.map(|(p, _)| p),
        sources: a.sources,
        warnings,
    })
}

/// The `AUTOPREP_*` variables of `env`; one that is not valid UTF-8 is a problem.
fn autoprep_vars<E>(env: E, problems: &mut Vec<String>) -> BTreeMap<String, String>
where
    E: IntoIterator<Item = (OsString, OsString)>,
{
    let mut vars = BTreeMap::new();
    for (name, value) in env {
        let Some(name) = name.to_str().filter(|n| n.starts_with(ENV_PREFIX)) else {
            continue;
        };
        match value.into_string() {
            Ok(v) => {
                vars.insert(name.to_owned(), v);
            }
            Err(_) => problems.push(format!("{name}: not valid UTF-8")),
        }
    }
    vars
}

/// The configuration being put together, source after source: where each option's value came
/// from, and every problem met so far.
struct Assembly {
    config: Config,
    sources: BTreeMap<&'static str, Source>,
    problems: Vec<String>,
}

impl Assembly {
    /// Sets the option `o` to `raw`, given by `source`.
    fn set(&mut self, o: &'static Spec, raw: Raw<'_>, source: Source) {
        match (o.set)(&mut self.config, &raw) {
            Ok(()) => {
                self.sources.insert(o.key, source);
            }
            Err(why) => self.problems.push(format!("{}: {why} ({source})", o.key)),
        }
    }

    /// The file at `path` (named by `named_by`: `--config` or the variable).
    fn file(&mut self, path: &Path, named_by: &str) {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                let problem = format!("{named_by}: cannot read {}: {e}", path.display());
                return self.problems.push(problem);
            }
        };
        for key in apply_file(&mut self.config, path, &text, &mut self.problems) {
            self.sources.insert(key, Source::File(path.to_path_buf()));
        }
    }

    /// The environment's variables; returns the warning that names those that are not
    /// autoprep options, if any.
    fn env(&mut self, vars: &BTreeMap<String, String>) -> Vec<String> {
        for o in OPTIONS {
            if let Some(v) = vars.get(o.env) {
                let raw = match o.kind {
                    Kind::One => Raw::Text(v),
                    Kind::List => Raw::Texts(options::split_list(v)),
                };
                self.set(o, raw, Source::Env(o.env));
            }
        }
        let unknown: Vec<&str> = vars
            .keys()
            .map(String::as_str)
            .filter(|v| *v != CONFIG_ENV && !OPTIONS.iter().any(|o| o.env == *v))
            .collect();
        let mut warnings = Vec::new();
        if !unknown.is_empty() {
            warnings.push(format!(
                "ignoring environment variables that are not autoprep options: {}",
                unknown.join(", ")
            ));
        }
        warnings
    }

    /// The flags given on the command line.
    fn flags(&mut self, matches: &ArgMatches) {
        for o in OPTIONS {
            if let Some(values) = flag_values(matches, o.key) {
                let raw = match o.kind {
                    Kind::One => Raw::Text(values.first().map_or("", String::as_str)),
                    Kind::List => Raw::Texts(values),
                };
                self.set(o, raw, Source::Flag(o.flag));
            }
        }
    }

    /// [`Config::validate`]'s problems, each with the source of the option's value.
    fn validate(&mut self) {
        for Problem { key, message } in self.config.validate() {
            match self.sources.get(key) {
                Some(Source::Default) | None => self.problems.push(format!("{key}: {message}")),
                Some(source) => self.problems.push(format!("{key}: {message} ({source})")),
            }
        }
    }
}

/// The values of a flag given on the command line (not a default).
fn flag_values(m: &ArgMatches, id: &str) -> Option<Vec<String>> {
    if m.value_source(id) != Some(ValueSource::CommandLine) {
        return None;
    }
    Some(m.get_many::<String>(id)?.cloned().collect())
}

/// Every non-table value of `table`, nested tables flattened into dotted keys.
fn flatten<'t>(prefix: &str, table: &'t toml::Table, out: &mut Vec<(String, &'t toml::Value)>) {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out),
            other => out.push((key, other)),
        }
    }
}

/// The options of `cfg` as a flat TOML table (unset options absent).
fn flat(cfg: &Config) -> BTreeMap<String, toml::Value> {
    let table = toml::Table::try_from(cfg).unwrap_or_default();
    let mut entries = Vec::new();
    flatten("", &table, &mut entries);
    entries.into_iter().map(|(k, v)| (k, v.clone())).collect()
}

/// ` (did you mean "..."?)` when a known key is close to `key`.
fn suggestion(key: &str) -> String {
    OPTIONS
        .iter()
        .map(|o| (strsim::damerau_levenshtein(key, o.key), o.key))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, k)| format!(" (did you mean {k:?}?)"))
        .unwrap_or_default()
}

impl Loaded {
    /// The effective configuration as TOML (valid as a configuration file), each option with
    /// where its value came from; unset options are shown as comments.
    pub fn to_toml(&self) -> String {
        let values = flat(&self.config);
        let mut out = String::from(
            "# autoprep: the effective configuration\n\
             # (flags > AUTOPREP_* environment > file > defaults)\n",
        );
        if let Some(f) = &self.file {
            out.push_str(&format!("# file: {}\n", f.display()));
        }
        for o in OPTIONS {
            let source = self.sources.get(o.key).unwrap_or(&Source::Default);
            match values.get(o.key) {
                Some(v) => out.push_str(&format!("{} = {v}  # {source}\n", o.key)),
                None => out.push_str(&format!("# {} is unset  ({source})\n", o.key)),
            }
        }
        out
    }
}

/// Sets on `config` the options that `text`, the configuration file at `path`, gives, and
/// returns the keys set. Each thing wrong (not TOML, an unknown key, a bad value) adds a line
/// to `problems`; the options that are right are set all the same, so one run names every
/// problem. Takes text, not a file, so that the parsing can be fuzzed (`fuzz/`, target
/// `config`).
pub fn apply_file(
    config: &mut Config,
    path: &Path,
    text: &str,
    problems: &mut Vec<String>,
) -> Vec<&'static str> {
    let table = match text.parse::<toml::Table>() {
        Ok(t) => t,
        Err(e) => {
            problems.push(format!(
                "{}: not valid TOML: {}",
                path.display(),
                e.to_string().trim_end()
            ));
            return Vec::new();
        }
    };
    let source = Source::File(path.to_path_buf());
    let mut entries = Vec::new();
    flatten("", &table, &mut entries);
    let mut set = Vec::new();
    for (key, value) in entries {
        match options::by_key(&key) {
            Some(o) => match (o.set)(config, &Raw::Toml(value)) {
                Ok(()) => set.push(o.key),
                Err(why) => problems.push(format!("{}: {why} ({source})", o.key)),
            },
            None => problems.push(format!(
                "unknown key {key:?} in {}{}",
                path.display(),
                suggestion(&key)
            )),
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_a_close_key() {
        assert_eq!(suggestion("lisen"), " (did you mean \"listen\"?)");
        assert_eq!(
            suggestion("cache_entry"),
            " (did you mean \"cache_entries\"?)"
        );
        assert_eq!(suggestion("completely_different"), "");
    }

    #[test]
    fn flattens_nested_tables() {
        let t: toml::Table = "a = 1\n[b]\nc = 2\n[b.d]\ne = 3\n".parse().unwrap();
        let mut out = Vec::new();
        flatten("", &t, &mut out);
        let keys: Vec<_> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b.c", "b.d.e"]);
    }

    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }
}
