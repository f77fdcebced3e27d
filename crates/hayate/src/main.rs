//! `hayate`: the one binary of the Hayate virtual switch.
//!
//! - `hayate run` — run bridges from a TOML config, or one standalone (L2 learning) bridge on
//!   the ports named with `--port`;
//! - `hayate ovsdb-init` — a database and `ovsdb-server` for `hayate run --ovsdb`;
//! - `hayate ctl` — ovs-ofctl's flow syntax on a running switch, over its management socket;
//! - `hayate bench` — named in-process benchmark scenarios on null ports, one pinned thread;
//! - `hayate gen` — traffic generator and analyzer on any port spec (`gen/`).

mod bench;
mod config;
mod ctl;
mod fdlimit;
mod gen;
mod logging;
mod metrics;
mod nudge;
mod openflow_side;
mod ovsdb;
mod plug;
mod pool_watch;
mod run;
mod switch;
mod tunnel_flows;
mod tunnel_iface;
mod tunnels;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Hayate: a userspace OpenFlow virtual switch.
#[derive(Parser, Debug)]
#[command(name = "hayate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines on stderr as text, or as one JSON object a line (for journald or a log
    /// shipper). `RUST_LOG` filters them.
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the switch: bridges from a config file, or one standalone bridge on --port specs.
    Run(run::RunArgs),
    /// Run benchmark scenarios (null ports, one pinned thread) and print Mpps, Gbit/s and
    /// cycles per packet.
    Bench(bench::BenchArgs),
    /// Traffic generator and analyzer: send, recv, run, rfc2544, reflect, loopback.
    Gen(gen::GenArgs),
    /// Talk to a running switch in ovs-ofctl's flow syntax (add-flow, dump-flows, …) over its
    /// management socket; add-port and del-port plug ports in and out of a running bridge.
    Ctl(ctl::CtlArgs),
    /// Create an Open vSwitch database (ovsdb-tool) and start ovsdb-server on DIR/db.sock for
    /// `hayate run --ovsdb`; prints the target.
    OvsdbInit(ovsdb::init::InitArgs),
    /// Check a config file and print the bridges, ports and flows it describes.
    Check {
        /// The TOML config.
        config: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Log lines from the crates (e.g. which XDP mode a port uses) on stderr; RUST_LOG filters.
    let default = match cli.command {
        Command::Bench(_) => "warn",
        _ => "info",
    };
    logging::init(cli.log_format, default);
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Bench(args) => bench::main(args),
        Command::Gen(args) => gen::main(args),
        Command::Ctl(args) => ctl::main(args),
        Command::OvsdbInit(args) => ovsdb::init::main(args),
        Command::Check { config } => run::check(&config),
    };
    // Sockets of ports dropped on the way out close on port::close's threads, several at
    // once; the kernel would close what is left at exit one after another.
    port::close::drain();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hayate: {e:#}");
            ExitCode::FAILURE
        }
    }
}
