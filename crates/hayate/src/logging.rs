//! Where log lines go: stderr, filtered by `RUST_LOG` (default `info`; `warn` for `hayate
//! bench`, whose switches' start-up lines would bury its report), as text for a
//! terminal or, with `--log-format json`, one JSON object a line for journald or a log
//! shipper (tracing-subscriber's JSON formatter: `timestamp`, `level`, `fields.message`,
//! `target`). The start-up lines `hayate run` prints itself (`hayate: bridge … running`,
//! warnings about ports) are plain text on stderr in either format.

use clap::ValueEnum;

/// The format of log lines (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the process's log subscriber; `default` is the filter without `RUST_LOG`.
pub fn init(format: LogFormat, default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => fmt
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => fmt.json().init(),
    }
}
