//! Logging: JSON lines in zap's shape (what Knative components print) with the
//! level taken from the `config-logging` ConfigMap and changed live when it
//! changes.
//!
//! The level for a component is `loglevel.<component>` if set, else the `level`
//! of `zap-logger-config`, else `info`. A ConfigMap that does not parse keeps
//! the last good level and logs why; a missing one means the defaults.
//!
//! Lines are JSON unless a person reads them: `zap-logger-config`'s
//! `encoding` (`json` or `console`, as zap's) decides when set; otherwise a
//! terminal on stdout gets one readable line per event
//! (`12:04:05.123 ERROR Reconcile error; retrying in 5ms  knative.dev/key=ns/web …`)
//! and anything else (a pod's log, a file, a pipe) gets JSON. The encoding is
//! chosen at start; the level follows the ConfigMap live.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::OnceLock;

use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use thiserror::Error;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context as LayerContext, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::reload;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

/// A `config-logging` ConfigMap that cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LoggingConfigError {
    /// A level name zap does not know.
    #[error(
        "invalid log level {level:?} in {key}; use one of debug, info, warn, error, dpanic, panic, fatal"
    )]
    Level {
        /// The key holding it.
        key: String,
        /// The bad value.
        level: String,
    },
    /// `zap-logger-config` is not JSON.
    #[error("zap-logger-config is not valid JSON ({0}); fix it or remove the key")]
    ZapConfig(String),
    /// `zap-logger-config` is JSON, but not an object.
    #[error(
        "zap-logger-config must be a JSON object such as {{\"level\": \"info\", \"encoding\": \"json\"}}, got {0}"
    )]
    ZapConfigShape(&'static str),
    /// An `encoding` zap does not know.
    #[error("invalid encoding {0:?} in zap-logger-config; use \"json\" or \"console\"")]
    Encoding(String),
}

/// The level a component logs at, from `config-logging` data.
pub fn level_from_config(
    component: &str,
    data: &BTreeMap<String, String>,
) -> Result<LevelFilter, LoggingConfigError> {
    let mut level = LevelFilter::INFO;
    if let Some(zap) = zap_config(data)?
        && let Some(name) = zap.get("level").and_then(Value::as_str)
    {
        level = parse_level("zap-logger-config", name)?;
    }
    let key = format!("loglevel.{component}");
    if let Some(name) = data.get(&key) {
        level = parse_level(&key, name)?;
    }
    Ok(level)
}

/// `zap-logger-config` parsed, when set and not blank: a JSON object, as
/// zap's `Config` is (valid JSON of another shape, `[1,2]`, would otherwise
/// be taken as a config that sets nothing).
fn zap_config(data: &BTreeMap<String, String>) -> Result<Option<Value>, LoggingConfigError> {
    let Some(text) = data.get("zap-logger-config").filter(|s| !s.trim().is_empty()) else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(text) {
        Ok(config @ Value::Object(_)) => Ok(Some(config)),
        Ok(other) => Err(LoggingConfigError::ZapConfigShape(json_kind(&other))),
        Err(e) => Err(LoggingConfigError::ZapConfig(e.to_string())),
    }
}

/// What a JSON value is, in the words of an error.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn parse_level(key: &str, name: &str) -> Result<LevelFilter, LoggingConfigError> {
    match name.trim().to_ascii_lowercase().as_str() {
        "debug" => Ok(LevelFilter::DEBUG),
        "info" | "" => Ok(LevelFilter::INFO),
        "warn" => Ok(LevelFilter::WARN),
        "error" | "dpanic" | "panic" | "fatal" => Ok(LevelFilter::ERROR),
        _ => Err(LoggingConfigError::Level {
            key: key.to_owned(),
            level: name.to_owned(),
        }),
    }
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// One JSON object per line, with zap's keys.
    Json,
    /// One readable line per event: time, level, message, then the fields.
    Console,
}

impl Encoding {
    /// What `config-logging` asks for (`zap-logger-config`'s `encoding`), else
    /// console on a terminal and JSON anywhere else.
    pub fn from_config(
        data: &BTreeMap<String, String>,
        stdout_is_terminal: bool,
    ) -> Result<Self, LoggingConfigError> {
        let asked =
            zap_config(data)?.and_then(|zap| zap.get("encoding").and_then(Value::as_str).map(str::to_owned));
        match asked.as_deref() {
            Some("json") => Ok(Encoding::Json),
            Some("console") => Ok(Encoding::Console),
            Some(other) => Err(LoggingConfigError::Encoding(other.to_owned())),
            None if stdout_is_terminal => Ok(Encoding::Console),
            None => Ok(Encoding::Json),
        }
    }
}

/// Where libraries log their internals (each request, each TLS record): at
/// `warn` unless `config-logging` names one (`loglevel.kube_client: debug`),
/// so `debug` for a component shows the component's own work.
pub const LIBRARY_TARGETS: &[&str] = &[
    "axum",
    "h2",
    "hyper",
    "hyper_util",
    "kube_client",
    "kube_runtime",
    "rustls",
    "tokio_rustls",
    "tower",
    "tower_http",
];

/// The levels one component's `config-logging` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Levels {
    component: LevelFilter,
    libraries: BTreeMap<&'static str, LevelFilter>,
}

impl Levels {
    fn from_config(component: &str, data: &BTreeMap<String, String>) -> Result<Levels, LoggingConfigError> {
        let mut libraries = BTreeMap::new();
        for target in LIBRARY_TARGETS {
            let key = format!("loglevel.{target}");
            let level = match data.get(&key) {
                Some(name) => parse_level(&key, name)?,
                None => LevelFilter::WARN,
            };
            libraries.insert(*target, level);
        }
        Ok(Levels {
            component: level_from_config(component, data)?,
            libraries,
        })
    }

    fn at(component: LevelFilter) -> Levels {
        Levels {
            component,
            libraries: LIBRARY_TARGETS.iter().map(|t| (*t, LevelFilter::WARN)).collect(),
        }
    }
}

/// The one logger of the process and what each of its components asked for:
/// the local job runs the controller and the webhook in one process, and each
/// follows its own `config-logging`; the most verbose level any asks for is
/// the one in force.
struct ProcessLogging {
    filter: reload::Handle<Targets, Registry>,
    /// False when another logger was installed first (a test's): the levels
    /// are then not ours to change.
    installed: bool,
    asked: Mutex<BTreeMap<String, Levels>>,
}

static PROCESS: OnceLock<ProcessLogging> = OnceLock::new();

impl ProcessLogging {
    /// Records `levels` for `component` and applies what all components
    /// together ask for; `Err` when the filter cannot be changed.
    fn ask(&self, component: &str, levels: Levels) -> Result<(), reload::Error> {
        let mut asked = self.asked.lock();
        asked.insert(component.to_owned(), levels);
        let most =
            |of: &dyn Fn(&Levels) -> LevelFilter| asked.values().map(of).max().unwrap_or(LevelFilter::INFO);
        let default = most(&|l: &Levels| l.component);
        let filter = Targets::new().with_default(default).with_targets(
            LIBRARY_TARGETS
                .iter()
                .map(|target| (*target, most(&|l: &Levels| l.libraries[target]))),
        );
        self.filter.modify(|current| *current = filter)
    }

    fn level(&self, component: &str) -> Option<LevelFilter> {
        self.asked.lock().get(component).map(|levels| levels.component)
    }
}

/// Changes a component's log level at run time.
#[derive(Clone)]
pub struct LevelHandle {
    component: String,
}

impl std::fmt::Debug for LevelHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelHandle")
            .field("component", &self.component)
            .finish()
    }
}

impl LevelHandle {
    /// Applies `config-logging` data: a good config sets the component's
    /// levels, a bad one keeps them and logs why.
    pub fn apply(&self, data: &BTreeMap<String, String>) {
        let Some(process) = PROCESS.get() else { return };
        match Levels::from_config(&self.component, data) {
            Ok(levels) => {
                let before = process.level(&self.component);
                let level = levels.component;
                match process.ask(&self.component, levels) {
                    Err(e) if process.installed => {
                        tracing::error!(error = %e, "could not change the logging level");
                    }
                    Err(_) => {
                        tracing::debug!("another logger is installed; config-logging is not applied");
                    }
                    Ok(()) if before != Some(level) => {
                        tracing::info!(level = %level, "Updated logging level from config-logging");
                    }
                    Ok(()) => {}
                }
            }
            Err(err) => {
                tracing::error!(error = %err, "Failed to parse config-logging; keeping the current level")
            }
        }
    }

    /// The level this component asked for last.
    pub fn level(&self) -> Option<LevelFilter> {
        PROCESS.get().and_then(|process| process.level(&self.component))
    }
}

/// Where kube's client logs failed responses.
const KUBE_CLIENT_RESPONSE_TARGET: &str = "kube_client::client::builder";

/// Where kube's client logs a watch stream that ended early, and bodies it
/// could not decode before returning the error.
const KUBE_CLIENT_STREAM_TARGET: &str = "kube_client::client";

/// Installs the process's logger, the first time, writing `encoding` with
/// `component` as the logger name and `pod` on every line as
/// `knative.dev/pod`, and sets `component`'s level to `level` (libraries at
/// warn). A second component of the same process (the local job's webhook)
/// shares the logger and has a level of its own. Returns the handle that
/// changes the component's level.
pub fn init(component: &str, level: LevelFilter, pod: Option<String>, encoding: Encoding) -> LevelHandle {
    init_writing_to(component, level, pod, encoding, std::io::stdout)
}

/// [`init`], with each line written to what `out` makes instead of stdout.
/// A test that installs the process's logger passes
/// `tracing_subscriber::fmt::TestWriter::new`: its lines then go through
/// libtest's capture and show only when the test fails, where stdout's would
/// pass it and print among the test results.
pub fn init_writing_to<W>(
    component: &str,
    level: LevelFilter,
    pod: Option<String>,
    encoding: Encoding,
    out: W,
) -> LevelHandle
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let process = PROCESS.get_or_init(|| {
        let (filter, handle) = reload::Layer::new(Targets::new().with_default(level));
        let json = Lines {
            logger: component.to_owned(),
            pod,
            encoding,
            out,
        };
        // kube's client logs every failed response at error level, and the code
        // that made the request reports the same failure again (a reconcile's
        // one error line, an informer's warning): one failure, one line.
        //
        // Its watch streams warn when a stream ends early ("eof in poll",
        // once per informer when the API server goes away); the watcher
        // resumes them, and the informers say once for the process when the
        // server cannot be reached.
        let json = json.with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            let level = *meta.level();
            !(level == tracing::Level::ERROR && meta.target() == KUBE_CLIENT_RESPONSE_TARGET
                || level == tracing::Level::WARN && meta.target() == KUBE_CLIENT_STREAM_TARGET)
        }));
        let installed = tracing_subscriber::registry()
            .with(filter)
            .with(json)
            .try_init()
            .is_ok();
        ProcessLogging {
            filter: handle,
            installed,
            asked: Mutex::new(BTreeMap::new()),
        }
    });
    // Only a logger that is not installed refuses a change, and apply() says
    // so where it matters.
    let _ = process.ask(component, Levels::at(level));
    LevelHandle {
        component: component.to_owned(),
    }
}

/// Writes each event as one line: a JSON object with zap's keys (`level`,
/// `ts`, `logger`, `caller`, `msg`), the fields of the event and of its spans;
/// or the same, readable, for a terminal.
struct Lines<W> {
    logger: String,
    pod: Option<String>,
    encoding: Encoding,
    out: W,
}

/// Span fields, kept on the span so events inside it can print them.
struct SpanFields(Map<String, Value>);

struct Collect<'a>(&'a mut Map<String, Value>);

impl Visit for Collect<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().to_owned(), Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().to_owned(), Value::String(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.0.insert(field.name().to_owned(), Value::String(text));
    }
}

impl<S, W> Layer<S> for Lines<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: LayerContext<'_, S>,
    ) {
        let mut fields = Map::new();
        attrs.record(&mut Collect(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields));
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: LayerContext<'_, S>,
    ) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<SpanFields>()
        {
            values.record(&mut Collect(&mut fields.0));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: LayerContext<'_, S>) {
        let meta = event.metadata();
        let mut line = Map::new();
        line.insert("level".into(), Value::String(zap_level(*meta.level()).into()));
        line.insert("ts".into(), Value::String(Timestamp::now().to_string()));
        line.insert("logger".into(), Value::String(self.logger.clone()));
        if let (Some(file), Some(number)) = (meta.file(), meta.line()) {
            line.insert("caller".into(), Value::String(format!("{file}:{number}")));
        }
        if let Some(pod) = &self.pod {
            line.insert("knative.dev/pod".into(), Value::String(pod.clone()));
        }
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(fields) = span.extensions().get::<SpanFields>() {
                    line.extend(fields.0.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
        }
        let mut fields = Map::new();
        event.record(&mut Collect(&mut fields));
        if let Some(message) = fields.remove("message") {
            line.insert("msg".into(), message);
        }
        line.extend(fields);
        let mut text = match self.encoding {
            Encoding::Json => Value::Object(line).to_string(),
            Encoding::Console => console_line(line),
        };
        text.push('\n');
        // One write per line, so lines of several threads never interleave. A
        // closed stdout cannot be reported anywhere; dropping the line is all
        // that is left to do.
        let _ = self.out.make_writer().write_all(text.as_bytes());
    }
}

/// `12:04:05.123 ERROR message  key=value …`: the time of day, the level and
/// the message first, then the fields; the logger, pod and caller, the same on
/// every line of a process, are left out.
fn console_line(mut line: Map<String, Value>) -> String {
    let text = |v: Option<Value>| match v {
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let ts = text(line.remove("ts"));
    // RFC 3339 in UTC: the time of day is what a person scanning needs.
    let time = ts
        .split('T')
        .nth(1)
        .map(|t| t.trim_end_matches('Z'))
        .unwrap_or(&ts);
    let time: String = time.chars().take(12).collect();
    let level = text(line.remove("level")).to_uppercase();
    let msg = text(line.remove("msg"));
    for key in ["logger", "caller", "knative.dev/pod"] {
        line.remove(key);
    }
    let mut out = format!("{time} {level:<5} {msg}");
    for (key, value) in line {
        let value = text(Some(value));
        if value.contains(char::is_whitespace) || value.is_empty() {
            let _ = write!(out, "  {key}={value:?}");
        } else {
            let _ = write!(out, "  {key}={value}");
        }
    }
    out
}

fn zap_level(level: Level) -> &'static str {
    match level {
        Level::TRACE | Level::DEBUG => "debug",
        Level::INFO => "info",
        Level::WARN => "warn",
        Level::ERROR => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_gets_readable_lines_unless_the_config_says_json() {
        let none = BTreeMap::new();
        assert_eq!(Encoding::from_config(&none, true), Ok(Encoding::Console));
        assert_eq!(Encoding::from_config(&none, false), Ok(Encoding::Json));
        let json = data(&[("zap-logger-config", r#"{"encoding": "json"}"#)]);
        assert_eq!(Encoding::from_config(&json, true), Ok(Encoding::Json));
        let console = data(&[("zap-logger-config", r#"{"encoding": "console"}"#)]);
        assert_eq!(Encoding::from_config(&console, false), Ok(Encoding::Console));
        let bad = data(&[("zap-logger-config", r#"{"encoding": "xml"}"#)]);
        assert_eq!(
            Encoding::from_config(&bad, true).unwrap_err().to_string(),
            "invalid encoding \"xml\" in zap-logger-config; use \"json\" or \"console\""
        );
    }

    #[test]
    fn a_console_line_reads_time_level_message_then_fields() {
        let line = serde_json::json!({
            "level": "error", "ts": "2026-11-24T12:04:05.123456Z", "logger": "controller",
            "caller": "runtime/src/controller/mod.rs:680", "knative.dev/pod": "controller-0",
            "msg": "Reconcile error; retrying in 5ms", "knative.dev/key": "ns/web",
            "error": "failed to create pod: boom", "retry_in": "5ms",
        });
        let Value::Object(line) = line else { unreachable!() };
        assert_eq!(
            console_line(line),
            "12:04:05.123 ERROR Reconcile error; retrying in 5ms  error=\"failed to create pod: boom\"  \
             knative.dev/key=ns/web  retry_in=5ms"
        );
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn component_level_wins_over_zap_level() {
        let d = data(&[
            ("zap-logger-config", r#"{"level": "warn", "encoding": "json"}"#),
            ("loglevel.controller", "debug"),
        ]);
        assert_eq!(level_from_config("controller", &d), Ok(LevelFilter::DEBUG));
        assert_eq!(level_from_config("webhook", &d), Ok(LevelFilter::WARN));
        assert_eq!(
            level_from_config("controller", &BTreeMap::new()),
            Ok(LevelFilter::INFO)
        );
    }

    #[test]
    fn bad_values_say_what_to_use() {
        let err = level_from_config("controller", &data(&[("loglevel.controller", "loud")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid log level \"loud\" in loglevel.controller; use one of debug, info, warn, error, dpanic, panic, fatal"
        );
        let err = level_from_config("controller", &data(&[("zap-logger-config", "[1,2]")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "zap-logger-config must be a JSON object such as {\"level\": \"info\", \"encoding\": \"json\"}, got an array"
        );
        let err = level_from_config("controller", &data(&[("zap-logger-config", "{not json")])).unwrap_err();
        assert!(
            err.to_string().starts_with("zap-logger-config is not valid JSON"),
            "{err}"
        );
    }
}
