//! The log filter at run time: the one configured (`log`, changed by a configuration reload)
//! and a temporary one set through the admin server (`PUT /log`), which reverts to the
//! configured one after an optional time limit.
//!
//! The binary installs `tracing_subscriber`'s reload layer around its `EnvFilter` and gives
//! [`LogFilter`] a function that swaps the filter in it; tests and embedders that install no
//! such layer have no `LogFilter`, and the admin server then says so.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tracing_subscriber::EnvFilter;

/// The longest a temporary filter may stay before it reverts (`PUT /log?for=`): one day.
pub const MAX_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// Puts a filter in force (the reload layer's handle).
type Apply = dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync;

/// The log filter in force, and the one configured. Clones share it.
#[derive(Clone)]
pub struct LogFilter {
    inner: Arc<Inner>,
}

struct Inner {
    apply: Box<Apply>,
    state: Mutex<State>,
}

struct State {
    /// The `log` option as last loaded.
    configured: String,
    /// The filter in force.
    current: String,
    /// When a temporary filter reverts to `configured`.
    until: Option<Instant>,
    /// Moves on with every change, so that a revert scheduled for an earlier temporary filter
    /// does nothing.
    generation: u64,
}

/// What `GET /log` reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Status {
    /// The filter in force.
    pub current: String,
    /// The `log` option, which the filter reverts to.
    pub configured: String,
    /// Seconds until a temporary filter reverts (rounded up); `None` when the filter in force
    /// is the configured one or was set without a time limit.
    pub reverts_in_seconds: Option<u64>,
}

/// Why a filter was not put in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("not a log filter ({reason}), got {filter:?}")]
    Invalid { filter: String, reason: String },
    #[error("a time limit must be 1 to {} seconds, got {seconds}", MAX_FOR.as_secs())]
    TimeLimit { seconds: u64 },
    #[error("the log filter could not be changed: {0}")]
    Apply(String),
}

impl fmt::Debug for LogFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogFilter")
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

/// Why a log filter is refused before `tracing_subscriber` reads it.
#[derive(Debug, thiserror::Error)]
pub enum FilterSyntax {
    /// A span field value (`[{field=value}]`): see [`env_filter`].
    #[error("span field values ([{{field=value}}]) are not accepted in log filters")]
    FieldValue,
    #[error(transparent)]
    Parse(#[from] tracing_subscriber::filter::ParseError),
}

/// The `EnvFilter` of a directive string, as every filter autoprep puts in force is built (the
/// `log` option, `PUT /log`). Two defects of `tracing_subscriber` 0.3.23, both found by the
/// `config` fuzz target, are kept away from it:
///
/// - Span field values (`[{field=value}]`) are refused. As regular expressions (its default)
///   they compile into a dense DFA whose construction grows exponentially with patterns such
///   as `.*x.................` (27 characters: 30 s; each further `.` doubles it), and
///   `PUT /log` takes its filter from the network; as literal text (`with_regex(false)`) two
///   directives with the same field value trip a debug assertion (its `ValueMatch` equality
///   has no case for literal values). Field names alone (`[{field}]`) stay.
/// - Each directive is trimmed first: it walks the trimmed directive but slices the untrimmed
///   one, and panicked on whitespace before a multi-byte character (`start byte index .. is
///   not a char boundary`).
pub fn env_filter(directives: &str) -> Result<EnvFilter, FilterSyntax> {
    let trimmed: Vec<&str> = directives.split(',').map(str::trim).collect();
    // Directives are split at commas, field lists included: an `=` between a `{` and the
    // next `}` (or the end) is a field value.
    let field_value = |d: &str| {
        d.split('{')
            .skip(1)
            .any(|after| after.split('}').next().is_some_and(|f| f.contains('=')))
    };
    if trimmed.iter().any(|d| field_value(d)) {
        return Err(FilterSyntax::FieldValue);
    }
    Ok(EnvFilter::builder()
        .with_regex(false)
        .parse(trimmed.join(","))?)
}

/// Parses an `EnvFilter` directive string (not an empty one, which would log errors only).
fn parse(filter: &str) -> Result<EnvFilter, FilterError> {
    if filter.trim().is_empty() {
        return Err(FilterError::Invalid {
            filter: filter.to_owned(),
            reason: "empty".into(),
        });
    }
    env_filter(filter).map_err(|e| FilterError::Invalid {
        filter: filter.to_owned(),
        reason: e.to_string(),
    })
}

impl LogFilter {
    /// `configured` is in force now (the binary built its subscriber with it); `apply` puts
    /// another filter in force.
    pub fn new(
        configured: &str,
        apply: impl Fn(EnvFilter) -> Result<(), String> + Send + Sync + 'static,
    ) -> LogFilter {
        LogFilter {
            inner: Arc::new(Inner {
                apply: Box::new(apply),
                state: Mutex::new(State {
                    configured: configured.to_owned(),
                    current: configured.to_owned(),
                    until: None,
                    generation: 0,
                }),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The filter in force, the configured one, and when a temporary one reverts.
    pub fn status(&self) -> Status {
        let s = self.lock();
        Status {
            current: s.current.clone(),
            configured: s.configured.clone(),
            reverts_in_seconds: s.until.map(|u| {
                let left = u.saturating_duration_since(Instant::now());
                left.as_secs() + u64::from(left.subsec_nanos() > 0)
            }),
        }
    }

    /// Puts `filter` in force; with `for_`, only for that long (the revert is a task on the
    /// current tokio runtime). Replaces any temporary filter set before.
    pub fn set(&self, filter: &str, for_: Option<Duration>) -> Result<Status, FilterError> {
        let filter = filter.trim();
        if let Some(d) = for_ {
            if d.is_zero() || d > MAX_FOR {
                return Err(FilterError::TimeLimit {
                    seconds: d.as_secs(),
                });
            }
        }
        let parsed = parse(filter)?;
        let generation = {
            let mut s = self.lock();
            (self.inner.apply)(parsed).map_err(FilterError::Apply)?;
            s.current = filter.to_owned();
            s.until = for_.map(|d| Instant::now() + d);
            s.generation += 1;
            s.generation
        };
        tracing::warn!(
            filter,
            for_seconds = for_.map(|d| d.as_secs()),
            "log filter changed through the admin server"
        );
        if let Some(d) = for_ {
            let this = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                this.revert_if(generation);
            });
        }
        Ok(self.status())
    }

    /// Puts the configured filter back in force now, ending any temporary one.
    pub fn revert(&self) -> Result<Status, FilterError> {
        let mut s = self.lock();
        let generation = s.generation;
        self.revert_locked(&mut s, generation)?;
        drop(s);
        Ok(self.status())
    }

    /// Reverts unless the filter changed since `generation`.
    fn revert_if(&self, generation: u64) {
        let mut s = self.lock();
        if let Err(e) = self.revert_locked(&mut s, generation) {
            tracing::warn!(error = %e, "the temporary log filter could not be reverted");
        }
    }

    fn revert_locked(&self, s: &mut State, generation: u64) -> Result<(), FilterError> {
        if s.generation != generation || (s.current == s.configured && s.until.is_none()) {
            return Ok(());
        }
        (self.inner.apply)(parse(&s.configured)?).map_err(FilterError::Apply)?;
        s.current = s.configured.clone();
        s.until = None;
        s.generation += 1;
        tracing::info!(filter = %s.configured, "log filter back to the configured one");
        Ok(())
    }

    /// A configuration reload set the `log` option to `filter`: it becomes the configured
    /// filter and is put in force now, ending any temporary one. Nothing happens when it did
    /// not change.
    pub fn set_configured(&self, filter: &str) -> Result<bool, FilterError> {
        let mut s = self.lock();
        if s.configured == filter {
            return Ok(false);
        }
        let parsed = parse(filter)?;
        (self.inner.apply)(parsed).map_err(FilterError::Apply)?;
        s.configured = filter.to_owned();
        s.current = filter.to_owned();
        s.until = None;
        s.generation += 1;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `config` fuzz target: as a regular expression, the first field value took
    /// 30 s to compile into a DFA (tracing_subscriber 0.3.23, test profile), each further `.`
    /// doubling that; as literal text, the repeated directive tripped a debug assertion.
    #[test]
    fn field_values_are_refused() {
        for hostile in [
            "[{e=.*5.................}]",
            "[{a=}],[{a=}]",
            "info,[span{a=1}]=debug",
            // Split at the comma: `[{a` and `b=2}]`, neither a directive.
            "[{a,b=2}]",
        ] {
            let start = Instant::now();
            assert!(env_filter(hostile).is_err(), "{hostile}");
            assert!(start.elapsed() < Duration::from_secs(5));
            assert!(parse(hostile).is_err());
        }
        // Field names alone, span names and targets stay.
        for fine in [
            "[{a}]=debug",
            "[span]=trace",
            "info,autoprep::session=trace",
        ] {
            env_filter(fine).unwrap_or_else(|e| panic!("{fine}: {e}"));
        }
    }

    /// Found by the `config` fuzz target: a directive with leading whitespace (here form
    /// feeds) before a multi-byte character made `tracing_subscriber` slice inside the
    /// character and panic.
    #[test]
    fn leading_whitespace_before_multibyte_text_is_no_panic() {
        for f in [
            "\u{c}\u{c}\u{1E88}routing = 24e",
            "info, \u{c}é=debug",
            " ẞ[{é=1}]",
        ] {
            let _ = env_filter(f);
            let _ = parse(f);
        }
        assert_eq!(
            env_filter(" info , autoprep=debug ").unwrap().to_string(),
            env_filter("info,autoprep=debug").unwrap().to_string()
        );
    }

    /// A filter whose "apply" records what it was given.
    fn recording() -> (LogFilter, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let f = LogFilter::new("info", move |f| {
            s.lock().unwrap().push(f.to_string());
            Ok(())
        });
        (f, seen)
    }

    #[tokio::test(start_paused = true)]
    async fn a_temporary_filter_reverts() {
        let (f, seen) = recording();
        let st = f.set("debug", Some(Duration::from_secs(60))).unwrap();
        assert_eq!(st.current, "debug");
        assert_eq!(st.configured, "info");
        assert_eq!(st.reverts_in_seconds, Some(60));
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert_eq!(f.status().current, "debug");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let st = f.status();
        assert_eq!((st.current.as_str(), st.reverts_in_seconds), ("info", None));
        assert_eq!(*seen.lock().unwrap(), ["debug", "info"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_change_cancels_an_earlier_revert() {
        let (f, _) = recording();
        f.set("debug", Some(Duration::from_secs(10))).unwrap();
        f.set("warn", None).unwrap();
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert_eq!(f.status().current, "warn", "set without a limit: stays");
        f.revert().unwrap();
        assert_eq!(f.status().current, "info");
    }

    #[tokio::test]
    async fn bad_filters_and_limits_are_refused() {
        let (f, seen) = recording();
        let e = f.set("autoprep=notalevel", None).unwrap_err();
        assert!(matches!(e, FilterError::Invalid { .. }), "{e}");
        assert!(matches!(f.set(" ", None), Err(FilterError::Invalid { .. })));
        let e = f.set("debug", Some(Duration::ZERO)).unwrap_err();
        assert!(e.to_string().contains("1 to 86400 seconds"), "{e}");
        assert!(seen.lock().unwrap().is_empty());
        assert_eq!(f.status().current, "info");
    }

    #[tokio::test(start_paused = true)]
    async fn a_reloaded_configuration_ends_a_temporary_filter() {
        let (f, _) = recording();
        f.set("debug", Some(Duration::from_secs(600))).unwrap();
        assert!(!f.set_configured("info").unwrap(), "unchanged: nothing");
        assert_eq!(f.status().current, "debug");
        assert!(f.set_configured("warn").unwrap());
        let st = f.status();
        assert_eq!(
            (st.current.as_str(), st.configured.as_str()),
            ("warn", "warn")
        );
        tokio::time::sleep(Duration::from_secs(700)).await;
        assert_eq!(f.status().current, "warn");
    }
}
