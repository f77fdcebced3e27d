//! `add-flow`, `mod-flows` and `del-flows` lines into [`FlowMod`]s.
//!
//! A line is a list of words separated by commas or white space: flow fields (`table=`,
//! `priority=`, `cookie=`, timeouts, flags, `out_port=`/`out_group=` filters), match fields
//! and protocol shorthands in any order, then `actions=` and the actions up to the end of the
//! line. Statistics that `dump-flows` prints (`duration=`, `n_packets=`, `n_bytes=`,
//! `idle_age=`, `hard_age=`) are ignored, so its output can be fed back.

use super::actions::{parse_instructions, GROUP_MAX};
use super::error::{ErrorKind, FlowParseError, PResult, Problem, TextKind};
use super::fields;
use super::lexer::{split_eq, split_words};
use super::matcher::{is_field, MatchBuilder};
use super::values::{parse_num, parse_port};
use crate::model::{
    FlowFlags, FlowMod, FlowModCommand, Instruction, Match, ALL_TABLES, GROUP_ANY, MAX_TABLE,
};

/// The priority of a flow that does not give one (as in `ovs-ofctl`).
pub const DEFAULT_PRIORITY: u16 = 0x8000;

/// Flow fields taken as `name=value`.
const FLOW_FIELDS: &[&str] = &[
    "table",
    "priority",
    "cookie",
    "idle_timeout",
    "hard_timeout",
    "out_port",
    "out_group",
];
/// Flags taken as a bare word.
const FLAGS: &[&str] = &[
    "send_flow_rem",
    "check_overlap",
    "reset_counts",
    "no_packet_counts",
    "no_byte_counts",
];
/// Statistics of `dump-flows` output, ignored.
const IGNORED: &[&str] = &["duration", "n_packets", "n_bytes", "idle_age", "hard_age"];

/// Parses an `add-flow` line, e.g. `table=0,priority=10,in_port=1,actions=output:2`.
///
/// `actions=` is required (`actions=drop` for a flow without actions); the table defaults to
/// 0 and the priority to [`DEFAULT_PRIORITY`].
pub fn parse_flow(text: &str) -> Result<FlowMod, FlowParseError> {
    parse_flow_match(text, FlowModCommand::Add)
}

/// Parses a flow line for `command`: like [`parse_flow`] for adds; for modifies `actions=` is
/// required, `cookie=V/M`, `out_port=`, `out_group=` filter, a `cookie=V` without mask is the
/// new cookie, and the table defaults to 0 (OpenFlow 1.3 allows "all tables" only in
/// deletes); for deletes `actions=` is refused, a cookie needs a mask (`cookie=V/-1` for an
/// exact one) and the table defaults to all tables ([`ALL_TABLES`]). Strictness is the
/// caller's choice of command.
pub fn parse_flow_match(text: &str, command: FlowModCommand) -> Result<FlowMod, FlowParseError> {
    parse(text, command).map_err(|p| p.into_error(TextKind::Flow, text))
}

/// Parses a file of flows for `command` (as `ovs-ofctl add-flows FILE` reads it): one flow a
/// line; blank lines and lines starting with `#` are skipped. An error carries its line
/// number.
pub fn parse_flows(text: &str, command: FlowModCommand) -> Result<Vec<FlowMod>, FlowParseError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let fm = parse_flow_match(t, command).map_err(|mut e| {
            e.line = Some(n + 1);
            e
        })?;
        out.push(fm);
    }
    Ok(out)
}

fn is_delete(c: FlowModCommand) -> bool {
    matches!(c, FlowModCommand::Delete | FlowModCommand::DeleteStrict)
}

fn command_name(c: FlowModCommand) -> &'static str {
    match c {
        FlowModCommand::Add => "add-flow",
        FlowModCommand::Modify | FlowModCommand::ModifyStrict => "mod-flows",
        FlowModCommand::Delete | FlowModCommand::DeleteStrict => "del-flows",
    }
}

fn misplaced(word: &str, what: &str, command: FlowModCommand) -> Problem {
    Problem::new(
        ErrorKind::Misplaced,
        word,
        format!(
            "{what} only filters mod-flows and del-flows, not {}",
            command_name(command)
        ),
        format!("remove {word}"),
    )
}

fn parse(text: &str, command: FlowModCommand) -> PResult<FlowMod> {
    let words = split_words(text)?;
    let mut fm = FlowMod::add(
        if is_delete(command) { ALL_TABLES } else { 0 },
        DEFAULT_PRIORITY,
        Match::ANY,
        Vec::new(),
    );
    fm.command = command;
    let mut builder = MatchBuilder::new();
    let mut seen: Vec<String> = Vec::new();
    let mut actions: Option<&str> = None;
    for w in &words {
        let (key, value) = split_eq(w.text);
        let lkey = key.to_ascii_lowercase();
        if lkey == "actions" && value.is_some() {
            let start = w.at + w.text.find('=').map_or(0, |i| i + 1);
            actions = Some(&text[start..]);
            break;
        }
        if FLOW_FIELDS.contains(&lkey.as_str()) || FLAGS.contains(&lkey.as_str()) {
            if seen.contains(&lkey) {
                return Err(Problem::new(
                    ErrorKind::Duplicate,
                    key,
                    format!("duplicate field {key}"),
                    "give each field once",
                ));
            }
            seen.push(lkey.clone());
        }
        match (lkey.as_str(), value) {
            (k, _) if IGNORED.contains(&k) => {}
            (k, None) if FLAGS.contains(&k) => set_flag(&mut fm.flags, k),
            (k, Some(_)) if FLAGS.contains(&k) => {
                return Err(Problem::new(
                    ErrorKind::BadValue,
                    w.text,
                    format!("{key} is a flag and takes no value"),
                    format!("write {key} alone"),
                ))
            }
            (k, Some(v)) if FLOW_FIELDS.contains(&k) => flow_field(&mut fm, k, v, command)?,
            (k, None) if FLOW_FIELDS.contains(&k) || is_field(k) => {
                return Err(Problem::new(
                    ErrorKind::BadValue,
                    key,
                    format!("{key} needs a value"),
                    format!("write {key}=VALUE"),
                ))
            }
            (_, None) => {
                if !builder.shorthand(key)? {
                    return Err(unknown(key));
                }
            }
            (_, Some(v)) => {
                if !builder.field(key, v)? {
                    return Err(unknown(key));
                }
            }
        }
    }
    fm.matcher = builder.finish()?;
    match (actions, is_delete(command)) {
        (Some(_), true) => {
            return Err(Problem::new(
                ErrorKind::Actions,
                "actions",
                "del-flows takes no actions=",
                "remove actions=... (use out_port= or out_group= to filter by action)",
            ))
        }
        (None, false) => {
            return Err(Problem::new(
                ErrorKind::Actions,
                "",
                "missing actions=",
                "end the flow with actions=... (actions=drop for a flow that drops)",
            ))
        }
        (Some(a), false) => fm.instructions = parse_instructions(a)?,
        (None, true) => {}
    }
    check_goto(&fm)?;
    Ok(fm)
}

fn unknown(key: &str) -> Problem {
    let shorthands: Vec<&str> = fields::SHORTHANDS.iter().map(|s| s.0).collect();
    Problem::new(
        ErrorKind::UnknownField,
        key,
        format!("unknown field \"{key}\""),
        format!(
            "expected a flow field ({}), a flag ({}), a protocol ({}) or a match field ({})",
            FLOW_FIELDS.join(", "),
            FLAGS.join(", "),
            shorthands.join(", "),
            fields::names(|_| true)
        ),
    )
}

fn set_flag(flags: &mut FlowFlags, name: &str) {
    match name {
        "send_flow_rem" => flags.send_flow_rem = true,
        "check_overlap" => flags.check_overlap = true,
        "reset_counts" => flags.reset_counts = true,
        "no_packet_counts" => flags.no_pkt_counts = true,
        _ => flags.no_byte_counts = true,
    }
}

fn flow_field(fm: &mut FlowMod, key: &str, v: &str, command: FlowModCommand) -> PResult<()> {
    match key {
        "table" => {
            let max = if is_delete(command) {
                ALL_TABLES
            } else {
                MAX_TABLE
            };
            let t = parse_num(key, v, max as u128).map_err(|mut p| {
                if p.kind == ErrorKind::OutOfRange && !is_delete(command) {
                    p.expected = "only del-flows may use table=255 (all tables)".into();
                }
                p
            })?;
            fm.table_id = t as u8;
        }
        "priority" => fm.priority = parse_num(key, v, 0xffff)? as u16,
        "idle_timeout" => fm.idle_timeout = parse_num(key, v, 0xffff)? as u16,
        "hard_timeout" => fm.hard_timeout = parse_num(key, v, 0xffff)? as u16,
        "cookie" => {
            let (value, mask) = match v.split_once('/') {
                Some((c, m)) => (c, Some(m.trim())),
                None => (v, None),
            };
            fm.cookie = parse_num(key, value, u64::MAX as u128)? as u64;
            match mask {
                None if is_delete(command) => {
                    return Err(Problem::new(
                        ErrorKind::Misplaced,
                        v,
                        "del-flows filters by cookie only with a mask",
                        format!("write cookie={value}/-1 to match the cookie exactly"),
                    ))
                }
                None => {}
                Some(_) if command == FlowModCommand::Add => {
                    return Err(misplaced(v, "a cookie mask", command))
                }
                Some("-1") => fm.cookie_mask = u64::MAX,
                Some(m) => fm.cookie_mask = parse_num("cookie mask", m, u64::MAX as u128)? as u64,
            }
            fm.cookie &= if mask.is_some() {
                fm.cookie_mask
            } else {
                u64::MAX
            };
        }
        "out_port" => {
            if command == FlowModCommand::Add {
                return Err(misplaced(key, "out_port", command));
            }
            fm.out_port = parse_port(key, v)?;
        }
        _ => {
            if command == FlowModCommand::Add {
                return Err(misplaced(key, "out_group", command));
            }
            fm.out_group = if v.eq_ignore_ascii_case("any") {
                GROUP_ANY
            } else {
                parse_num(key, v, GROUP_MAX as u128)? as u32
            };
        }
    }
    Ok(())
}

fn check_goto(fm: &FlowMod) -> PResult<()> {
    for i in &fm.instructions {
        if let Instruction::GotoTable(t) = i {
            if *t <= fm.table_id {
                return Err(Problem::new(
                    ErrorKind::BadValue,
                    "goto_table",
                    format!(
                        "goto_table:{t} must name a later table than table={}",
                        fm.table_id
                    ),
                    format!(
                        "OpenFlow only goes forward: use goto_table:{} or higher",
                        fm.table_id as u16 + 1
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "flow_tests.rs"]
mod tests;
