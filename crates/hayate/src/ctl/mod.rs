//! `hayate ctl BRIDGE|SOCKET COMMAND ARGS`: the ovs-ofctl flow syntax (parsed and printed by
//! `pipeline::ofctl`) on a running switch, over its management socket.
//!
//! | command | does |
//! |---|---|
//! | `add-flow FLOW`, `add-flows FILE` | flow-mod add (a file: one flow a line, `#` comments) |
//! | `mod-flows [--strict] FLOW` | modify the actions of the flows FLOW selects |
//! | `del-flows [--strict] [FLOW]` | delete (everything without FLOW) |
//! | `dump-flows [FLOW]` | flows with counters |
//! | `dump-ports [PORT]`, `dump-ports-desc` | port counters, port descriptions |
//! | `dump-tables` | table counters |
//! | `add-group GROUP`, `del-groups [group_id=N]`, `dump-groups` | groups |
//! | `add-meter METER`, `dump-meters` | meters |
//! | `add-port SPEC [ofport=N] [name=NAME]` | open a port and add it to the running bridge (the lowest free number unless `ofport=` is given); `vxlan:`/`geneve:` specs add tunnel ports |
//! | `del-port NAME\|NUMBER` | take a port out of the running bridge (its queues and resources are released) |
//! | `set-policing PORT rate=KBPS[,burst=KBIT][,kpkts_rate=KPPS][,kpkts_burst=KPKTS]\|off` | change a running port's ingress policing (`port::policing`) |
//! | `set-queue PORT QUEUE min_rate=KBPS[,max_rate=KBPS][,burst=KBIT]\|off`, `set-queue PORT port [type=linux-htb\|egress-policer\|trtcm-policer][,max_rate=KBPS][,burst=KBIT][,backlog=PKTS]\|off` | change a running port's egress queue, or its own options: its cap, whether its queues shape (`linux-htb`: hold packets above the rates, up to `backlog` per queue and poll thread) or police (drop them; the default) (`port::egress`; `min`/`max` are short for the rates) |
//! | `dump-pmd` | every poll thread's counters, then their total (as `ovs-appctl dpif-netdev/pmd-stats-show`) |
//! | `dump-drops` | every port's drops by reason (the switch's, the port's own, and tunnel drops: termination's on an underlay port, the send side's on a tunnel port) |
//! | `trace FLOW`, `trace --hex FRAME [in_port=N]` | a packet through the tables, as `ofproto/trace` |
//! | `pmd-stats [--reset]` (`dump-pmd` the raw counters) | per poll thread: packets, cycles per packet, EMC/megaflow hit shares, upcalls, idle share |
//! | `rxq-show` | which rx queue each thread polls, each queue's share of the thread |
//! | `dump-queues [PORT]` | each port's egress queues: rates, packets and bytes sent, drops (over the rates, or tail drops when it shapes), packets held now, drops for a queue the port lacks |
//! | `dump-megaflows` | every thread's megaflows: match/mask, actions, packets, bytes, age |
//! | `show` | the bridge, its ports (why a link is down, when the port knows: a tunnel port's next hop), controllers and fail mode |
//! | `capture PORT [FILTER] -w FILE\|- [-c N] [--rx\|--tx]` | the frames a port receives and sends, live, as pcap (`capture.rs`) |
//!
//! `--json` makes trace, pmd-stats, rxq-show, dump-megaflows, dump-queues and show answer in JSON
//! (`agent::ofproto` `look.rs` says what each holds).
//!
//! Queue statistics and configuration are OpenFlow's: `ovs-ofctl -O OpenFlow13 queue-stats`
//! and `queue-get-config` on the management socket.
//!
//! add-port, del-port, set-policing, set-queue and the dumps travel as a Hayate experimenter message
//! ([`agent::ofproto::port_cmd`]); only the management socket may send them.
//!
//! `dump-pmd` prints, per thread, `pmd thread N core C:` (C is `-` for a thread not pinned;
//! the priority lane, when the bridge has one, is the last thread) and one line
//! `  NAME: VALUE` per counter of `datapath::Counter` (`  busy_cycles: 123`), then `total:`
//! and the same lines summed. Benchmarks parse it: the format stays as it is.
//!
//! BRIDGE names `<run dir>/BRIDGE.mgmt`; a path (with a `/`) is used as it is; `tcp:HOST:PORT`
//! reaches a controller listener instead.

mod capture;
mod client;
mod print;

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use openflow::messages::mods::FlowModMsg;
use openflow::multipart::FlowStatsRequest;
use openflow::{
    Message, MeterModMsg, MultipartReplyBody as B, MultipartRequestBody as R, NO_BUFFER,
};
use pipeline::model::{
    ports, FlowMod, FlowModCommand, GroupMod, GroupModCommand, MeterMod, MeterModCommand,
    ALL_TABLES, GROUP_ALL, GROUP_ANY, METER_ALL,
};
use pipeline::ofctl;

use agent::ofproto::port_cmd::{exp_type, PortCmd};
use client::Client;

/// Options of `hayate ctl`.
#[derive(Args, Debug)]
pub struct CtlArgs {
    /// Folder of the management sockets (as given to `hayate run --run-dir`).
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// mod-flows / del-flows: match priority and fields exactly.
    #[arg(long)]
    pub strict: bool,
    /// trace, pmd-stats, rxq-show, dump-megaflows, dump-queues, show: answer in JSON.
    #[arg(long)]
    pub json: bool,
    /// A bridge name, a socket path, or tcp:HOST:PORT.
    pub target: String,
    /// The command (add-flow, add-flows, mod-flows, del-flows, dump-flows, dump-ports,
    /// dump-ports-desc, dump-tables, add-group, del-groups, dump-groups, add-meter,
    /// dump-meters; add-port SPEC [ofport=N] [name=NAME], e.g. add-port
    /// vhostuser:/tmp/vm1.sock ofport=7; del-port NAME|NUMBER — ports of the running bridge,
    /// over the management socket only; set-policing PORT rate=KBPS[,burst=KBIT]|off;
    /// set-queue PORT QUEUE min_rate=KBPS[,max_rate=KBPS]|off, set-queue PORT port
    /// [type=linux-htb|egress-policer][,max_rate=KBPS][,backlog=PKTS]|off (linux-htb holds
    /// packets above the rates, a policer drops them); dump-queues [PORT]: each port's egress
    /// queues, their counters and held packets; dump-pmd: each poll thread's counters; dump-drops:
    /// each port's drops by reason; trace FLOW | trace --hex FRAME [in_port=N]; pmd-stats
    /// [--reset]; rxq-show; dump-megaflows; show; capture PORT [FILTER] -w FILE|- [-c N]
    /// [--rx|--tx]).
    pub command: String,
    /// The command's arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

fn socket_of(a: &CtlArgs) -> String {
    if a.target.starts_with("tcp:") || a.target.contains('/') {
        return a.target.clone();
    }
    let dir = a
        .run_dir
        .clone()
        .unwrap_or_else(crate::openflow_side::default_run_dir);
    crate::openflow_side::mgmt_path(&dir, &a.target)
        .to_string_lossy()
        .into_owned()
}

fn flow_mod(fm: FlowMod) -> Message {
    Message::FlowMod(FlowModMsg {
        flow_mod: fm,
        buffer_id: NO_BUFFER,
    })
}

/// The n-th argument, or an error naming what the command needs.
fn arg<'a>(a: &'a CtlArgs, n: usize, what: &str) -> Result<&'a str> {
    a.args
        .get(n)
        .map(String::as_str)
        .ok_or_else(|| anyhow!("{} needs {what}", a.command))
}

/// A flow selector for `command` (`""` selects everything).
fn selector(text: Option<&str>, command: FlowModCommand) -> Result<FlowMod> {
    match text {
        Some(t) if !t.trim().is_empty() => {
            ofctl::parse_flow_match(t, command).map_err(|e| anyhow!("{e}"))
        }
        _ => {
            let mut fm = FlowMod::add(ALL_TABLES, 0, pipeline::Match::ANY, Vec::new());
            fm.command = command;
            fm.out_port = ports::ANY;
            fm.out_group = GROUP_ANY;
            Ok(fm)
        }
    }
}

/// Runs `hayate ctl`.
pub fn main(a: CtlArgs) -> Result<()> {
    let strict = a.strict || a.args.iter().any(|x| x == "--strict");
    let json = a.json || a.args.iter().any(|x| x == "--json");
    let mut a = a;
    a.args.retain(|x| x != "--strict" && x != "--json");
    let target = socket_of(&a);
    let mut c = Client::connect(&target)?;
    match a.command.as_str() {
        "add-flow" => {
            let fm = ofctl::parse_flow(arg(&a, 0, "a flow")?).map_err(|e| anyhow!("{e}"))?;
            c.transact(&[flow_mod(fm)])
        }
        "add-flows" => {
            let path = arg(&a, 0, "a file of flows")?;
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
            let mods = ofctl::parse_flows(&text, FlowModCommand::Add)
                .map_err(|e| anyhow!("{path}: {e}"))?;
            let msgs: Vec<Message> = mods.into_iter().map(flow_mod).collect();
            c.transact(&msgs)
        }
        "mod-flows" => {
            let cmd = if strict {
                FlowModCommand::ModifyStrict
            } else {
                FlowModCommand::Modify
            };
            let fm = ofctl::parse_flow_match(arg(&a, 0, "a flow with actions")?, cmd)
                .map_err(|e| anyhow!("{e}"))?;
            c.transact(&[flow_mod(fm)])
        }
        "del-flows" => {
            let cmd = if strict {
                FlowModCommand::DeleteStrict
            } else {
                FlowModCommand::Delete
            };
            let fm = selector(a.args.first().map(String::as_str), cmd)?;
            c.transact(&[flow_mod(fm)])
        }
        "dump-flows" => {
            let sel = selector(a.args.first().map(String::as_str), FlowModCommand::Delete)?;
            let req = FlowStatsRequest {
                table_id: sel.table_id,
                out_port: sel.out_port,
                out_group: sel.out_group,
                cookie: sel.cookie,
                cookie_mask: sel.cookie_mask,
                matcher: sel.matcher,
            };
            let mut flows = Vec::new();
            for body in c.multipart(R::Flow(req))? {
                if let B::Flow(v) = body {
                    flows.extend(v);
                }
            }
            print!("{}", print::flows(&flows));
            Ok(())
        }
        "dump-ports" => {
            let port_no = match a.args.first() {
                Some(p) => p
                    .parse()
                    .map_err(|_| anyhow!("dump-ports takes a port number, not {p:?}"))?,
                None => ports::ANY,
            };
            let mut stats = Vec::new();
            for body in c.multipart(R::PortStats { port_no })? {
                if let B::PortStats(v) = body {
                    stats.extend(v);
                }
            }
            print!("{}", print::port_stats(&stats));
            Ok(())
        }
        "dump-ports-desc" => {
            let mut descs = Vec::new();
            for body in c.multipart(R::PortDesc)? {
                if let B::PortDesc(v) = body {
                    descs.extend(v);
                }
            }
            print!("{}", print::port_descs(&descs));
            Ok(())
        }
        "dump-tables" => {
            let mut tables = Vec::new();
            for body in c.multipart(R::Table)? {
                if let B::Table(v) = body {
                    tables.extend(v);
                }
            }
            print!("{}", print::tables(&tables));
            Ok(())
        }
        "add-group" => {
            let g = ofctl::parse_group(arg(&a, 0, "a group")?).map_err(|e| anyhow!("{e}"))?;
            c.transact(&[Message::GroupMod(GroupMod {
                command: GroupModCommand::Add,
                group: g,
            })])
        }
        "del-groups" => {
            let id = match a.args.first() {
                Some(t) => t
                    .strip_prefix("group_id=")
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| anyhow!("del-groups takes group_id=N, not {t:?}"))?,
                None => GROUP_ALL,
            };
            let g = pipeline::model::Group {
                id,
                kind: pipeline::model::GroupType::All,
                buckets: Vec::new(),
            };
            c.transact(&[Message::GroupMod(GroupMod {
                command: GroupModCommand::Delete,
                group: g,
            })])
        }
        "dump-groups" => {
            let mut groups = Vec::new();
            for body in c.multipart(R::GroupDesc)? {
                if let B::GroupDesc(v) = body {
                    groups.extend(v);
                }
            }
            println!("OFPST_GROUP_DESC reply (OF1.3):");
            for g in &groups {
                println!(" {}", ofctl::format_group(g));
            }
            Ok(())
        }
        "add-meter" => {
            let m = ofctl::parse_meter(arg(&a, 0, "a meter")?).map_err(|e| anyhow!("{e}"))?;
            c.transact(&[Message::MeterMod(MeterModMsg {
                meter_mod: MeterMod {
                    command: MeterModCommand::Add,
                    meter: m,
                },
            })])
        }
        "dump-meters" => {
            let mut meters = Vec::new();
            for body in c.multipart(R::MeterConfig {
                meter_id: METER_ALL,
            })? {
                if let B::MeterConfig(v) = body {
                    meters.extend(v);
                }
            }
            println!("OFPST_METER_CONFIG reply (OF1.3):");
            for m in &meters {
                println!("{}", ofctl::format_meter(&m.meter));
            }
            Ok(())
        }
        "dump-pmd" => {
            print!("{}", c.dump(exp_type::DUMP_PMD)?);
            Ok(())
        }
        "dump-drops" => {
            print!("{}", c.dump(exp_type::DUMP_DROPS)?);
            Ok(())
        }
        "capture" => capture::run(&mut c, &a.args),
        "trace" | "pmd-stats" | "rxq-show" | "dump-megaflows" | "show" | "dump-queues" => {
            let t = match a.command.as_str() {
                "trace" => exp_type::TRACE,
                "dump-queues" => exp_type::DUMP_QUEUES,
                "pmd-stats" => exp_type::PMD_STATS,
                "rxq-show" => exp_type::RXQ_SHOW,
                "dump-megaflows" => exp_type::DUMP_MEGAFLOWS,
                _ => exp_type::SHOW,
            };
            print!("{}", c.look(t, json, &a.args)?);
            Ok(())
        }
        "set-policing" | "set-queue" => {
            let t = if a.command == "set-policing" {
                exp_type::SET_POLICING
            } else {
                exp_type::SET_QUEUE
            };
            println!("{}", c.look(t, false, &a.args)?);
            Ok(())
        }
        "add-port" | "del-port" => {
            let words: Vec<&str> = a.args.iter().map(String::as_str).collect();
            let cmd = PortCmd::parse(&a.command, &words).map_err(|e| anyhow!(e))?;
            println!("{}", c.port_command(&cmd)?);
            Ok(())
        }
        other => bail!(
            "unknown command {other:?}; use add-flow, add-flows, mod-flows, del-flows, dump-flows, dump-ports, dump-ports-desc, dump-tables, add-group, del-groups, dump-groups, add-meter, dump-meters, add-port, del-port, set-policing, set-queue, dump-queues, dump-pmd, dump-drops, trace, pmd-stats, rxq-show, dump-megaflows, show or capture"
        ),
    }
}
