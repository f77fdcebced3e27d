//! The action half of a flow: `actions=` text into OpenFlow instructions and actions.
//!
//! Plain actions (`output:2`, `mod_vlan_vid:10`, `set_field:10.0.0.1->nw_dst`, ...) go into
//! one apply-actions instruction in the order written. Instructions (`meter:N`,
//! `clear_actions`, `write_actions(...)`, `write_metadata:V[/M]`, `goto_table:N`) may appear in
//! any order, at most once each, and are put in OpenFlow order: meter, apply-actions,
//! clear-actions, write-actions, write-metadata, goto-table.
//!
//! `mod_vlan_vid` becomes a set-field of `vlan_vid` with the tag-present bit: under OpenFlow
//! 1.3 it rewrites the VID of an existing tag and does not push one (use `push_vlan:0x8100`
//! first for untagged frames).

use packet::Field;

use super::error::{ErrorKind, PResult, Problem};
use super::fields::{self, Target};
use super::lexer::{split_action, split_eq, split_list};
use super::values::{self, parse_num, parse_port};
use crate::model::{ports, Action, Instruction, MAX_TABLE};

/// Every action and instruction name, for "expected one of" messages.
pub(crate) const ACTION_NAMES: &str = "output, drop, normal, flood, all, controller, local, \
     in_port, mod_vlan_vid, mod_vlan_pcp, strip_vlan, pop_vlan, push_vlan, set_field, \
     mod_dl_src, mod_dl_dst, mod_nw_src, mod_nw_dst, mod_nw_tos, mod_nw_ecn, mod_tp_src, \
     mod_tp_dst, mod_nw_ttl, dec_ttl, set_tunnel, set_queue, enqueue, group, meter, goto_table, \
     write_metadata, clear_actions, write_actions, push_mpls, pop_mpls, set_mpls_label, \
     set_mpls_tc, set_mpls_ttl, dec_mpls_ttl, copy_ttl_out, copy_ttl_in";

/// Highest group id (`OFPG_MAX`).
pub(crate) const GROUP_MAX: u32 = 0xffff_ff00;
/// Highest meter id (`OFPM_MAX`).
pub(crate) const METER_MAX: u32 = 0xffff_0000;

/// What one action word is.
enum Item {
    Action(Action),
    Drop,
    Meter(u32),
    Clear,
    Write(Vec<Action>),
    /// `enqueue:PORT:QUEUE`: these actions in turn.
    Several(Vec<Action>),
    WriteMetadata(u64, u64),
    Goto(u8),
}

/// Parses the text after `actions=` into instructions in OpenFlow order.
pub(crate) fn parse_instructions(text: &str) -> PResult<Vec<Instruction>> {
    let words = split_list(text)?;
    let mut apply = Vec::new();
    let mut meter = None;
    let mut clear = false;
    let mut write = None;
    let mut metadata = None;
    let mut goto = None;
    let mut dropped = false;
    for w in &words {
        let dup = |name: &str| {
            Problem::new(
                ErrorKind::Duplicate,
                w.text,
                format!("duplicate instruction {name}"),
                "give each instruction once",
            )
        };
        match parse_item(w.text)? {
            Item::Action(a) => apply.push(a),
            Item::Several(a) => apply.extend(a),
            Item::Drop => dropped = true,
            Item::Meter(m) if meter.is_none() => meter = Some(m),
            Item::Meter(_) => return Err(dup("meter")),
            Item::Clear if !clear => clear = true,
            Item::Clear => return Err(dup("clear_actions")),
            Item::Write(a) if write.is_none() => write = Some(a),
            Item::Write(_) => return Err(dup("write_actions")),
            Item::WriteMetadata(v, m) if metadata.is_none() => metadata = Some((v, m)),
            Item::WriteMetadata(..) => return Err(dup("write_metadata")),
            Item::Goto(t) if goto.is_none() => goto = Some(t),
            Item::Goto(_) => return Err(dup("goto_table")),
        }
    }
    if dropped && words.len() > 1 {
        return Err(Problem::new(
            ErrorKind::Misplaced,
            "drop",
            "drop must be the only action",
            "write actions=drop alone, or list the actions without drop",
        ));
    }
    let mut out = Vec::new();
    if let Some(m) = meter {
        out.push(Instruction::Meter(m));
    }
    if !apply.is_empty() {
        out.push(Instruction::ApplyActions(apply));
    }
    if clear {
        out.push(Instruction::ClearActions);
    }
    if let Some(a) = write {
        out.push(Instruction::WriteActions(a));
    }
    if let Some((value, mask)) = metadata {
        out.push(Instruction::WriteMetadata { value, mask });
    }
    if let Some(t) = goto {
        out.push(Instruction::GotoTable(t));
    }
    Ok(out)
}

/// Parses a list of plain actions (inside `write_actions(...)` or a group bucket); `context`
/// names the place in errors.
pub(crate) fn parse_action_list(text: &str, context: &str) -> PResult<Vec<Action>> {
    let mut out = Vec::new();
    for w in split_list(text)? {
        match parse_item(w.text)? {
            Item::Action(a) => out.push(a),
            Item::Several(a) => out.extend(a),
            _ => {
                return Err(Problem::new(
                    ErrorKind::Misplaced,
                    w.text,
                    format!("\"{}\" cannot appear {context}", w.text),
                    "only plain actions go there (output, set_field, group, ...); \
                     instructions and drop go in the flow's actions=",
                ))
            }
        }
    }
    Ok(out)
}

fn need_arg<'a>(name: &str, arg: Option<&'a str>, example: &str) -> PResult<&'a str> {
    match arg {
        Some(a) if !a.trim().is_empty() => Ok(a.trim()),
        _ => Err(Problem::new(
            ErrorKind::BadValue,
            name,
            format!("{name} needs an argument"),
            format!("write it like {example}"),
        )),
    }
}

fn no_arg(name: &str, arg: Option<&str>) -> PResult<()> {
    match arg {
        None => Ok(()),
        Some(_) => Err(Problem::new(
            ErrorKind::BadValue,
            name,
            format!("{name} takes no argument"),
            format!("write {name} alone"),
        )),
    }
}

fn output(port: u32) -> Action {
    Action::Output {
        port,
        max_len: if port == ports::CONTROLLER {
            crate::model::CONTROLLER_MAX_LEN_ALL
        } else {
            0
        },
    }
}

fn set(field: Field, value: u128) -> Action {
    Action::SetField { field, value }
}

fn parse_item(word: &str) -> PResult<Item> {
    if word.bytes().all(|b| b.is_ascii_digit()) {
        return parse_output(word, word).map(Item::Action);
    }
    let (name, arg, _) = split_action(word)?;
    let lname = name.trim().to_ascii_lowercase();
    let n = lname.as_str();
    let a = |e: Action| Ok(Item::Action(e));
    match n {
        "output" => a(parse_output(word, need_arg(n, arg, "output:2")?)?),
        "drop" => no_arg(n, arg).map(|_| Item::Drop),
        "normal" | "flood" | "all" | "local" | "in_port" => {
            no_arg(n, arg)?;
            a(output(parse_port(n, n)?))
        }
        "controller" => a(parse_controller(arg)?),
        "mod_vlan_vid" => {
            let v = parse_num(n, need_arg(n, arg, "mod_vlan_vid:10")?, 0xfff)?;
            a(set(Field::VlanVid, 0x1000 | v))
        }
        "mod_vlan_pcp" => a(set(
            Field::VlanPcp,
            parse_num(n, need_arg(n, arg, "mod_vlan_pcp:3")?, 7)?,
        )),
        "strip_vlan" | "pop_vlan" => no_arg(n, arg).map(|_| Item::Action(Action::PopVlan)),
        "push_vlan" => {
            let t = parse_num(n, need_arg(n, arg, "push_vlan:0x8100")?, 0xffff)? as u16;
            if t != 0x8100 && t != 0x88a8 {
                return Err(Problem::new(
                    ErrorKind::BadValue,
                    word,
                    format!("push_vlan ethertype {t:#06x} is not a VLAN TPID"),
                    "expected 0x8100 (802.1Q) or 0x88a8 (802.1ad)",
                ));
            }
            a(Action::PushVlan(t))
        }
        "set_field" => a(parse_set_field(need_arg(
            n,
            arg,
            "set_field:00:00:00:00:00:01->eth_dst",
        )?)?),
        "mod_dl_src" => a(set_named(
            "eth_src",
            need_arg(n, arg, "mod_dl_src:00:00:00:00:00:01")?,
        )?),
        "mod_dl_dst" => a(set_named(
            "eth_dst",
            need_arg(n, arg, "mod_dl_dst:00:00:00:00:00:01")?,
        )?),
        "mod_nw_src" => a(set_named(
            "ipv4_src",
            need_arg(n, arg, "mod_nw_src:10.0.0.1")?,
        )?),
        "mod_nw_dst" => a(set_named(
            "ipv4_dst",
            need_arg(n, arg, "mod_nw_dst:10.0.0.1")?,
        )?),
        "mod_nw_tos" => a(set_named("nw_tos", need_arg(n, arg, "mod_nw_tos:0xb8")?)?),
        "mod_nw_ecn" => a(set_named("ip_ecn", need_arg(n, arg, "mod_nw_ecn:1")?)?),
        "mod_tp_src" => a(set_named("tp_src", need_arg(n, arg, "mod_tp_src:80")?)?),
        "mod_tp_dst" => a(set_named("tp_dst", need_arg(n, arg, "mod_tp_dst:80")?)?),
        "set_tunnel" => a(set_named("tun_id", need_arg(n, arg, "set_tunnel:0x5")?)?),
        "mod_nw_ttl" => a(Action::SetNwTtl(
            parse_num(n, need_arg(n, arg, "mod_nw_ttl:64")?, 0xff)? as u8,
        )),
        "dec_ttl" => no_arg(n, arg).map(|_| Item::Action(Action::DecNwTtl)),
        "push_mpls" => {
            let t = parse_num(n, need_arg(n, arg, "push_mpls:0x8847")?, 0xffff)? as u16;
            if t != 0x8847 && t != 0x8848 {
                return Err(Problem::new(
                    ErrorKind::BadValue,
                    word,
                    format!("push_mpls ethertype {t:#06x} is not an MPLS ethertype"),
                    "expected 0x8847 (unicast) or 0x8848 (multicast)",
                ));
            }
            a(Action::PushMpls(t))
        }
        "pop_mpls" => a(Action::PopMpls(
            parse_num(n, need_arg(n, arg, "pop_mpls:0x0800")?, 0xffff)? as u16,
        )),
        "set_mpls_label" => a(set(
            Field::MplsLabel,
            parse_num(n, need_arg(n, arg, "set_mpls_label:16")?, 0xf_ffff)?,
        )),
        "set_mpls_tc" => a(set(
            Field::MplsTc,
            parse_num(n, need_arg(n, arg, "set_mpls_tc:3")?, 7)?,
        )),
        "set_mpls_ttl" => {
            a(Action::SetMplsTtl(
                parse_num(n, need_arg(n, arg, "set_mpls_ttl:64")?, 0xff)? as u8,
            ))
        }
        "dec_mpls_ttl" => no_arg(n, arg).map(|_| Item::Action(Action::DecMplsTtl)),
        "copy_ttl_out" => no_arg(n, arg).map(|_| Item::Action(Action::CopyTtlOut)),
        "copy_ttl_in" => no_arg(n, arg).map(|_| Item::Action(Action::CopyTtlIn)),
        "set_queue" => {
            a(Action::SetQueue(
                parse_num(n, need_arg(n, arg, "set_queue:1")?, u32::MAX as u128)? as u32,
            ))
        }
        "enqueue" => {
            // ovs-ofctl's enqueue:PORT:QUEUE or enqueue(PORT,QUEUE): set_queue, output, then
            // back to the packet's own queue (Nicira's pop_queue; in Hayate queue 0).
            let arg = need_arg(n, arg, "enqueue:2:1")?;
            let (p, q) = arg.split_once([':', ',']).ok_or_else(|| {
                Problem::new(
                    ErrorKind::BadValue,
                    word,
                    "enqueue needs a port and a queue",
                    "write it like enqueue:2:1 (port 2, queue 1)",
                )
            })?;
            let q = parse_num(n, q.trim(), u32::MAX as u128)? as u32;
            Ok(Item::Several(vec![
                Action::SetQueue(q),
                parse_output(word, p.trim())?,
                Action::SetQueue(0),
            ]))
        }
        "group" => a(Action::Group(
            parse_num(n, need_arg(n, arg, "group:1")?, GROUP_MAX as u128)? as u32,
        )),
        "meter" => {
            let m = parse_num(n, need_arg(n, arg, "meter:1")?, METER_MAX as u128)? as u32;
            if m == 0 {
                return Err(values::out_of_range_from(n, "0", 1, METER_MAX as u128));
            }
            Ok(Item::Meter(m))
        }
        "goto_table" => {
            Ok(Item::Goto(
                parse_num(n, need_arg(n, arg, "goto_table:1")?, MAX_TABLE as u128)? as u8,
            ))
        }
        "write_metadata" => {
            let t = need_arg(n, arg, "write_metadata:0x1/0xff")?;
            let (v, m) = match t.split_once('/') {
                Some((v, m)) => (v, Some(m)),
                None => (t, None),
            };
            let value = parse_num(n, v, u64::MAX as u128)? as u64;
            let mask = match m {
                Some(m) => parse_num("write_metadata mask", m, u64::MAX as u128)? as u64,
                None => u64::MAX,
            };
            Ok(Item::WriteMetadata(value & mask, mask))
        }
        "clear_actions" => no_arg(n, arg).map(|_| Item::Clear),
        "write_actions" => {
            let inner = arg.unwrap_or("");
            Ok(Item::Write(parse_action_list(
                inner,
                "inside write_actions(...)",
            )?))
        }
        _ => Err(Problem::new(
            ErrorKind::UnknownAction,
            name,
            format!("unknown action \"{name}\""),
            format!("expected one of {ACTION_NAMES}"),
        )),
    }
}

fn parse_output(word: &str, arg: &str) -> PResult<Action> {
    let port = parse_port("output", arg)?;
    if port == 0 || port == ports::ANY {
        return Err(Problem::new(
            ErrorKind::BadValue,
            word,
            format!("output to port {arg} is not possible"),
            "expected a port number from 1 or in_port, table, normal, flood, all, \
             controller, local",
        ));
    }
    Ok(output(port))
}

fn parse_controller(arg: Option<&str>) -> PResult<Action> {
    let max_len = match arg.map(str::trim) {
        None | Some("") => crate::model::CONTROLLER_MAX_LEN_ALL,
        Some(a) if a.bytes().all(|b| b.is_ascii_digit()) || a.starts_with("0x") => {
            parse_num("controller max_len", a, 0xffff)? as u16
        }
        Some(a) => {
            let mut max_len = crate::model::CONTROLLER_MAX_LEN_ALL;
            for w in split_list(a)? {
                match split_eq(w.text) {
                    ("max_len", Some(v)) => {
                        max_len = parse_num("controller max_len", v, 0xffff)? as u16
                    }
                    (k, _) => {
                        return Err(Problem::new(
                            ErrorKind::BadValue,
                            w.text,
                            format!("controller does not take \"{k}\""),
                            "expected controller, controller:MAXLEN or controller(max_len=N)",
                        ))
                    }
                }
            }
            max_len
        }
    };
    Ok(Action::Output {
        port: ports::CONTROLLER,
        max_len,
    })
}

/// `set_field:VALUE->FIELD`.
fn parse_set_field(arg: &str) -> PResult<Action> {
    let Some((value, name)) = arg.rsplit_once("->") else {
        return Err(Problem::new(
            ErrorKind::BadValue,
            arg,
            format!("set_field argument \"{arg}\" has no \"->\""),
            "write set_field:VALUE->FIELD, e.g. set_field:10.0.0.1->ipv4_dst",
        ));
    };
    set_named(name.trim(), value.trim())
}

/// A set-field of the match field called `name` to `value` (in that field's syntax).
fn set_named(name: &str, value: &str) -> PResult<Action> {
    let writable = || fields::names(|d| d.writable);
    let Some(def) = super::matcher::field_def(name) else {
        return Err(Problem::new(
            ErrorKind::UnknownField,
            name,
            format!("unknown field \"{name}\" in set_field"),
            format!("expected one of {}", writable()),
        ));
    };
    if !def.writable {
        return Err(Problem::new(
            ErrorKind::BadValue,
            name,
            format!("set_field cannot write {name}"),
            format!("expected one of {}", writable()),
        ));
    }
    if value.contains('/') {
        return Err(Problem::new(
            ErrorKind::MaskNotAllowed,
            value,
            format!("set_field value \"{value}\" has a mask"),
            "OpenFlow 1.3 set_field writes whole fields: remove the /mask",
        ));
    }
    if let Target::Field(Field::VlanVid) = def.target {
        // The VID of the existing tag: the present bit is implied.
        let v = parse_num(name, value, 0x1fff)?;
        return Ok(set(Field::VlanVid, 0x1000 | v));
    }
    if let Target::DlVlan = def.target {
        let v = parse_num(name, value, 0xfff)?;
        return Ok(set(Field::VlanVid, 0x1000 | v));
    }
    let settings = fields::settings(def, name, value)?;
    let (field, v, _) = settings[0];
    Ok(set(field, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(a: Vec<Action>) -> Vec<Instruction> {
        vec![Instruction::ApplyActions(a)]
    }

    #[test]
    fn outputs_and_reserved_ports() {
        assert_eq!(parse_instructions("2").unwrap(), apply(vec![output(2)]));
        assert_eq!(
            parse_instructions("output:2,NORMAL,flood,all,local,in_port,output:LOCAL").unwrap(),
            apply(vec![
                output(2),
                output(ports::NORMAL),
                output(ports::FLOOD),
                output(ports::ALL),
                output(ports::LOCAL),
                output(ports::IN_PORT),
                output(ports::LOCAL)
            ])
        );
        let c = |max_len| Action::Output {
            port: ports::CONTROLLER,
            max_len,
        };
        assert_eq!(
            parse_instructions("controller,controller:128,controller(max_len=64)").unwrap(),
            apply(vec![c(0xffff), c(128), c(64)])
        );
    }

    #[test]
    fn instructions_in_openflow_order() {
        let got = parse_instructions(
            "goto_table:3,write_metadata:0x5/0xff,write_actions(output:1,group:2),clear_actions,\
             output:4,meter:7",
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                Instruction::Meter(7),
                Instruction::ApplyActions(vec![output(4)]),
                Instruction::ClearActions,
                Instruction::WriteActions(vec![output(1), Action::Group(2)]),
                Instruction::WriteMetadata {
                    value: 5,
                    mask: 0xff
                },
                Instruction::GotoTable(3),
            ]
        );
        assert_eq!(parse_instructions("drop").unwrap(), vec![]);
        assert_eq!(
            parse_instructions("write_actions()").unwrap(),
            vec![Instruction::WriteActions(vec![])]
        );
    }

    #[test]
    fn set_field_forms() {
        let got = parse_instructions(
            "mod_vlan_vid:10,set_field:10->vlan_vid,set_field:0x100a->vlan_vid,mod_vlan_pcp:3,\
             mod_dl_src:00:00:00:00:00:01,set_field:fe80::1->ipv6_dst,mod_nw_tos:0xb8,\
             set_field:10.0.0.1->nw_dst,set_tunnel:0x5,mod_tp_dst:80,push_vlan:0x88a8,\
             strip_vlan,pop_vlan,dec_ttl,mod_nw_ttl:9,set_queue:3",
        )
        .unwrap();
        assert_eq!(
            got,
            apply(vec![
                set(Field::VlanVid, 0x100a),
                set(Field::VlanVid, 0x100a),
                set(Field::VlanVid, 0x100a),
                set(Field::VlanPcp, 3),
                set(Field::EthSrc, 1),
                set(Field::Ipv6Dst, 0xfe80 << 112 | 1),
                set(Field::IpDscp, 46),
                set(Field::Ipv4Dst, 0x0a00_0001),
                set(Field::TunnelId, 5),
                set(Field::TpDst, 80),
                Action::PushVlan(0x88a8),
                Action::PopVlan,
                Action::PopVlan,
                Action::DecNwTtl,
                Action::SetNwTtl(9),
                Action::SetQueue(3),
            ])
        );
    }

    #[test]
    fn enqueue_is_set_queue_output_and_back_to_queue_zero() {
        let want = apply(vec![
            Action::SetQueue(1),
            Action::Output {
                port: 2,
                max_len: 0,
            },
            Action::SetQueue(0),
        ]);
        assert_eq!(parse_instructions("enqueue:2:1").unwrap(), want);
        assert_eq!(parse_instructions("enqueue(2,1)").unwrap(), want);
        assert!(parse_instructions("enqueue:2")
            .unwrap_err()
            .expected
            .contains("enqueue:2:1"));
    }

    #[test]
    fn action_errors() {
        let e = |t: &str| parse_instructions(t).unwrap_err();
        assert_eq!(e("outptu:2").problem, "unknown action \"outptu\"");
        assert!(e("outptu:2")
            .expected
            .starts_with("expected one of output, drop, normal"));
        assert_eq!(e("drop,output:1").problem, "drop must be the only action");
        assert_eq!(
            e("goto_table:1,goto_table:2").problem,
            "duplicate instruction goto_table"
        );
        assert_eq!(
            e("mod_vlan_vid:4096").problem,
            "mod_vlan_vid 4096 is out of range 0..=4095"
        );
        assert_eq!(e("push_vlan:0x0800").kind, ErrorKind::BadValue);
        assert_eq!(
            e("set_field:1->in_port").problem,
            "set_field cannot write in_port"
        );
        assert_eq!(e("set_field:1->bogus").kind, ErrorKind::UnknownField);
        assert_eq!(e("set_field:1").kind, ErrorKind::BadValue);
        assert_eq!(
            e("set_field:10.0.0.0/8->nw_dst").kind,
            ErrorKind::MaskNotAllowed
        );
        assert_eq!(
            e("write_actions(goto_table:1)").problem,
            "\"goto_table:1\" cannot appear inside write_actions(...)"
        );
        assert_eq!(e("output").problem, "output needs an argument");
        assert_eq!(e("output:0").problem, "output to port 0 is not possible");
        assert_eq!(e("dec_ttl:1").problem, "dec_ttl takes no argument");
        assert_eq!(
            e("controller(reason=x)").problem,
            "controller does not take \"reason\""
        );
        assert_eq!(e("meter:0").kind, ErrorKind::OutOfRange);
        assert_eq!(e("mod_nw_tos:1").kind, ErrorKind::BadValue);
    }
}
