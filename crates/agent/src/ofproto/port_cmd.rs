//! `add-port` and `del-port` on the wire: an OpenFlow experimenter message under Hayate's
//! experimenter id, taken only from the management socket (`hayate ctl`), never from a
//! controller.
//!
//! | message | `exp_type` | body (UTF-8 text) |
//! |---|---|---|
//! | add-port request | [`exp_type::ADD_PORT`] | the port spec, then `key=value` options, one per line (`ofport=N`, `name=NAME`) |
//! | del-port request | [`exp_type::DEL_PORT`] | the port's name or OpenFlow number |
//! | dump-pmd request | [`exp_type::DUMP_PMD`] | empty |
//! | dump-drops request | [`exp_type::DUMP_DROPS`] | empty |
//! | pmd-stats, rxq-show, show, dump-megaflows, trace, dump-queues | [`exp_type::PMD_STATS`] … [`exp_type::TRACE`], [`exp_type::DUMP_QUEUES`] | `text` or `json`, then the command's arguments, one per line ([`look_request`]) |
//! | set-policing, set-queue | [`exp_type::SET_POLICING`], [`exp_type::SET_QUEUE`] | as a look request: `text`, then the port and the options, one per line |
//! | reply | [`exp_type::DONE`] | what was done, e.g. `added port vm1 as OpenFlow port 7`, or the dump's text |
//! | reply in pieces | [`exp_type::DONE_MORE`] … then [`exp_type::DONE`] | a long dump's text, cut at 60,000 bytes ([`done_pieces`]) |
//!
//! A refusal is an `OFPT_ERROR` of type `OFPET_EXPERIMENTER` (0xffff) under the same
//! experimenter id, with a code of [`exp_error`] and the explanation as its data (text that
//! names the thing and the fix, not the request's bytes).

use openflow::{ErrorCode, ErrorMsg, Experimenter, Message};

/// Hayate's experimenter id ("\0HYT").
pub const HAYATE_EXPERIMENTER: u32 = 0x0048_5954;

/// `exp_type` values of Hayate's experimenter messages.
pub mod exp_type {
    /// Add a port to the bridge.
    pub const ADD_PORT: u32 = 1;
    /// Remove a port from the bridge.
    pub const DEL_PORT: u32 = 2;
    /// Every poll thread's counters (`hayate ctl BRIDGE dump-pmd`).
    pub const DUMP_PMD: u32 = 3;
    /// Every port's drops by reason (`hayate ctl BRIDGE dump-drops`).
    pub const DUMP_DROPS: u32 = 4;
    /// Each poll thread's packets, cycles and cache hit shares (`pmd-stats [--reset]`).
    pub const PMD_STATS: u32 = 5;
    /// Which rx queue each thread polls and its share of the thread (`rxq-show`).
    pub const RXQ_SHOW: u32 = 6;
    /// The bridge, its ports and controllers (`show`).
    pub const SHOW: u32 = 7;
    /// Every thread's megaflows (`dump-megaflows`).
    pub const DUMP_MEGAFLOWS: u32 = 8;
    /// A packet traced through the tables (`trace FLOW`, `trace --hex HEX [in_port]`).
    pub const TRACE: u32 = 9;
    /// Start capturing a port's frames (`capture`); the reply is the capture's id.
    pub const CAPTURE_START: u32 = 10;
    /// The frames captured since the last read (binary records, [`super::capture_records`]).
    pub const CAPTURE_READ: u32 = 11;
    /// Stop a capture; the reply says how many frames were taken and lost.
    pub const CAPTURE_STOP: u32 = 12;
    /// Change a running port's ingress policing (`set-policing`; [`crate::ofproto`]'s `qos.rs`).
    pub const SET_POLICING: u32 = 13;
    /// Change a running port's egress queues (`set-queue`).
    pub const SET_QUEUE: u32 = 14;
    /// Each port's egress queues with their counters and held packets (`dump-queues`).
    pub const DUMP_QUEUES: u32 = 15;
    /// The switch did what was asked; the body says what.
    pub const DONE: u32 = 0x100;
    /// A piece of a long reply; more pieces follow, the last one as [`DONE`].
    pub const DONE_MORE: u32 = 0x101;

    /// Whether `t` asks for a dump (answered by the bridge's counters and looks, not by the
    /// port commands).
    pub fn is_dump(t: u32) -> bool {
        (DUMP_PMD..=CAPTURE_STOP).contains(&t) || t == DUMP_QUEUES
    }
}

/// Codes of Hayate's experimenter errors.
pub mod exp_error {
    /// The switch could not do it (the text says why and what to do).
    pub const REFUSED: u16 = 1;
    /// Only the management socket may ask this.
    pub const NOT_PERMITTED: u16 = 2;
    /// The request itself is malformed (bad body, unknown option).
    pub const BAD_REQUEST: u16 = 3;
}

/// A port command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortCmd {
    /// Open `spec` and add it to the bridge.
    Add {
        /// The port spec (`ring:x`, `afpacket:veth3`, `vhostuser:/tmp/vm1.sock`, …).
        spec: String,
        /// The OpenFlow number it takes (`None`: the lowest free one).
        ofport: Option<u32>,
        /// Its name (`None`: the port's own name).
        name: Option<String>,
    },
    /// Remove the port with this name or OpenFlow number.
    Del {
        /// A port name or number.
        port: String,
    },
}

/// Largest number a physical port may have (`OFPP_MAX`).
const OFPP_MAX: u32 = 0xffff_ff00;

impl PortCmd {
    /// Parses `add-port SPEC [ofport=N] [name=NAME]` or `del-port NAME|NUMBER` from its words.
    pub fn parse(command: &str, words: &[&str]) -> Result<PortCmd, String> {
        match command {
            "add-port" => {
                let Some((spec, opts)) = words.split_first() else {
                    return Err("add-port needs a port spec, e.g. add-port ring:x or \
                                add-port vhostuser:/tmp/vm1.sock ofport=7"
                        .into());
                };
                let spec = spec.trim();
                if spec.is_empty() {
                    return Err("add-port needs a port spec, e.g. add-port ring:x".into());
                }
                let (mut ofport, mut name) = (None, None);
                for o in opts {
                    match o.split_once('=') {
                        Some(("ofport", v)) => ofport = Some(parse_ofport(v)?),
                        Some(("name", v)) if !v.is_empty() => name = Some(v.to_string()),
                        _ => {
                            return Err(format!(
                            "add-port: unknown option {o:?}; options are ofport=N and name=NAME \
                                 (the port's own options go in its spec, after a comma)"
                        ))
                        }
                    }
                }
                Ok(PortCmd::Add {
                    spec: spec.to_string(),
                    ofport,
                    name,
                })
            }
            "del-port" => match words {
                [port] if !port.trim().is_empty() => Ok(PortCmd::Del {
                    port: port.trim().to_string(),
                }),
                _ => Err("del-port takes one port: its name or OpenFlow number".into()),
            },
            other => Err(format!(
                "{other} is not a port command; use add-port or del-port"
            )),
        }
    }

    /// The request as an experimenter message.
    pub fn to_message(&self) -> Message {
        let (exp_type, words) = match self {
            PortCmd::Add { spec, ofport, name } => {
                let mut w = vec![spec.clone()];
                w.extend(ofport.map(|n| format!("ofport={n}")));
                w.extend(name.as_ref().map(|n| format!("name={n}")));
                (exp_type::ADD_PORT, w)
            }
            PortCmd::Del { port } => (exp_type::DEL_PORT, vec![port.clone()]),
        };
        Message::Experimenter(Experimenter {
            experimenter: HAYATE_EXPERIMENTER,
            exp_type,
            data: words.join("\n").into_bytes(),
        })
    }

    /// The request an experimenter message carries (the switch's side).
    pub fn from_experimenter(e: &Experimenter) -> Result<PortCmd, String> {
        let text = std::str::from_utf8(&e.data)
            .map_err(|_| "the port command's body is not UTF-8 text".to_string())?;
        let words: Vec<&str> = text.split('\n').collect();
        match e.exp_type {
            exp_type::ADD_PORT => PortCmd::parse("add-port", &words),
            exp_type::DEL_PORT => PortCmd::parse("del-port", &words),
            t => Err(format!(
                "unknown Hayate experimenter type {t}; add-port is {}, del-port {}, dump-pmd {} \
                 and dump-drops {}",
                exp_type::ADD_PORT,
                exp_type::DEL_PORT,
                exp_type::DUMP_PMD,
                exp_type::DUMP_DROPS
            )),
        }
    }
}

fn parse_ofport(v: &str) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if (1..=OFPP_MAX).contains(&n) => Ok(n),
        _ => Err(format!(
            "ofport={v} is not a port number; give one from 1 to {OFPP_MAX}, or leave it out \
             for the lowest free one"
        )),
    }
}

/// The reply to a port command that was done.
/// A dump request (`exp_type` [`exp_type::DUMP_PMD`] or [`exp_type::DUMP_DROPS`]).
pub fn dump_request(exp_type: u32) -> Message {
    Message::Experimenter(Experimenter {
        experimenter: HAYATE_EXPERIMENTER,
        exp_type,
        data: Vec::new(),
    })
}

/// A request of [`exp_type::PMD_STATS`] … [`exp_type::TRACE`]: `json` asks for JSON instead
/// of text; `args` are the command's words.
pub fn look_request(exp_type: u32, json: bool, args: &[String]) -> Message {
    let mut lines = vec![if json { "json" } else { "text" }.to_string()];
    lines.extend(args.iter().cloned());
    Message::Experimenter(Experimenter {
        experimenter: HAYATE_EXPERIMENTER,
        exp_type,
        data: lines.join("\n").into_bytes(),
    })
}

/// A [`look_request`]'s format (`true`: JSON) and arguments.
pub fn parse_look_request(e: &Experimenter) -> Result<(bool, Vec<String>), String> {
    let text = std::str::from_utf8(&e.data).map_err(|_| "the request is not UTF-8 text")?;
    let mut lines = text.split('\n');
    let json = match lines.next().unwrap_or("") {
        "json" => true,
        "text" | "" => false,
        other => return Err(format!("unknown output format {other:?}; use text or json")),
    };
    Ok((
        json,
        lines.filter(|l| !l.is_empty()).map(String::from).collect(),
    ))
}

/// Captured frames as a [`exp_type::CAPTURE_READ`] reply carries them: per frame, big-endian,
/// the wall-clock time in ns (u64), the length on the wire (u32), the bytes kept (u32), then
/// those bytes; after the last frame nothing.
pub fn capture_records(frames: &[(u64, u32, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (ts, wire, data) in frames {
        out.extend_from_slice(&ts.to_be_bytes());
        out.extend_from_slice(&wire.to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(data);
    }
    out
}

/// The frames of a [`capture_records`] body.
pub fn parse_capture_records(mut b: &[u8]) -> Result<Vec<(u64, u32, Vec<u8>)>, String> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 16 {
            return Err("a capture record is cut short".into());
        }
        let ts = u64::from_be_bytes(b[..8].try_into().unwrap_or_default());
        let wire = u32::from_be_bytes(b[8..12].try_into().unwrap_or_default());
        let n = u32::from_be_bytes(b[12..16].try_into().unwrap_or_default()) as usize;
        let data = b
            .get(16..16 + n)
            .ok_or("a capture record's bytes are cut short")?;
        out.push((ts, wire, data.to_vec()));
        b = &b[16 + n..];
    }
    Ok(out)
}

/// Longest text one reply message carries.
const PIECE: usize = 60_000;

/// The reply to a dump of any length: pieces of [`exp_type::DONE_MORE`], the last of
/// [`exp_type::DONE`].
pub fn done_pieces(text: &str) -> Vec<Message> {
    done_bytes(text.as_bytes())
}

/// [`done_pieces`] for bytes that are not text (captured frames).
pub fn done_bytes(bytes: &[u8]) -> Vec<Message> {
    let mut out: Vec<Message> = bytes
        .chunks(PIECE)
        .map(|c| {
            Message::Experimenter(Experimenter {
                experimenter: HAYATE_EXPERIMENTER,
                exp_type: exp_type::DONE_MORE,
                data: c.to_vec(),
            })
        })
        .collect();
    match out.last_mut() {
        Some(Message::Experimenter(e)) => e.exp_type = exp_type::DONE,
        _ => out.push(done("")),
    }
    out
}

/// The reply to a port command that was done, or to a dump.
pub fn done(text: &str) -> Message {
    Message::Experimenter(Experimenter {
        experimenter: HAYATE_EXPERIMENTER,
        exp_type: exp_type::DONE,
        data: text.as_bytes().to_vec(),
    })
}

/// The error refusing a port command, `code` one of [`exp_error`].
pub fn refusal(code: u16, text: &str) -> Message {
    Message::Error(ErrorMsg {
        code: ErrorCode {
            kind: openflow::error::error_type::EXPERIMENTER,
            code,
        },
        experimenter: HAYATE_EXPERIMENTER,
        data: text.as_bytes().to_vec(),
    })
}

/// The explanation a Hayate refusal carries (`None` for any other error).
pub fn refusal_text(e: &ErrorMsg) -> Option<String> {
    (e.code.kind == openflow::error::error_type::EXPERIMENTER
        && e.experimenter == HAYATE_EXPERIMENTER)
        .then(|| String::from_utf8_lossy(&e.data).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(cmd: &PortCmd) -> PortCmd {
        let mut buf = Vec::new();
        openflow::encode(9, &cmd.to_message(), &mut buf).unwrap();
        match openflow::decode(&buf).unwrap().1 {
            Message::Experimenter(e) => PortCmd::from_experimenter(&e).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn commands_survive_the_wire() {
        let add = PortCmd::parse("add-port", &["vhostuser:/tmp/vm1.sock", "ofport=7"]).unwrap();
        assert_eq!(
            add,
            PortCmd::Add {
                spec: "vhostuser:/tmp/vm1.sock".into(),
                ofport: Some(7),
                name: None
            }
        );
        assert_eq!(round_trip(&add), add);
        let named = PortCmd::parse("add-port", &["ring:x", "name=up"]).unwrap();
        assert_eq!(round_trip(&named), named);
        let del = PortCmd::parse("del-port", &["vm1"]).unwrap();
        assert_eq!(round_trip(&del), del);
    }

    #[test]
    fn bad_commands_say_what_to_do() {
        let e = PortCmd::parse("add-port", &["ring:x", "speed=10"]).unwrap_err();
        assert!(
            e.contains("unknown option \"speed=10\"") && e.contains("ofport=N"),
            "{e}"
        );
        let e = PortCmd::parse("add-port", &["ring:x", "ofport=0"]).unwrap_err();
        assert!(e.contains("ofport=0 is not a port number"), "{e}");
        assert!(PortCmd::parse("add-port", &[])
            .unwrap_err()
            .contains("needs a port spec"));
        assert!(PortCmd::parse("del-port", &[])
            .unwrap_err()
            .contains("one port"));
    }

    #[test]
    fn long_replies_go_in_pieces_that_join_up() {
        let text = "x".repeat(2 * PIECE + 5);
        let pieces = done_pieces(&text);
        assert_eq!(pieces.len(), 3);
        let mut joined = Vec::new();
        for (i, m) in pieces.iter().enumerate() {
            let mut buf = Vec::new();
            openflow::encode(1, m, &mut buf).unwrap();
            let Message::Experimenter(e) = openflow::decode(&buf).unwrap().1 else {
                panic!("not an experimenter message")
            };
            let last = i + 1 == pieces.len();
            let want = if last {
                exp_type::DONE
            } else {
                exp_type::DONE_MORE
            };
            assert_eq!(e.exp_type, want);
            joined.extend(e.data);
        }
        assert_eq!(joined, text.as_bytes());
        assert_eq!(done_pieces("").len(), 1);
        let req = look_request(exp_type::TRACE, true, &["in_port=1,udp".into()]);
        let Message::Experimenter(e) = req else {
            panic!()
        };
        assert_eq!(
            parse_look_request(&e).unwrap(),
            (true, vec!["in_port=1,udp".to_string()])
        );
    }

    #[test]
    fn capture_records_survive_the_wire() {
        let frames = vec![
            (1_700_000_000_123_456_789, 64, vec![1u8, 2, 3]),
            (5, 2000, vec![]),
        ];
        assert_eq!(
            parse_capture_records(&capture_records(&frames)).unwrap(),
            frames
        );
        let mut cut = capture_records(&frames);
        cut.truncate(18);
        assert!(parse_capture_records(&cut).is_err());
    }

    #[test]
    fn refusals_carry_their_text() {
        let mut buf = Vec::new();
        openflow::encode(3, &refusal(exp_error::REFUSED, "no port x"), &mut buf).unwrap();
        let Message::Error(e) = openflow::decode(&buf).unwrap().1 else {
            panic!("not an error")
        };
        assert_eq!(refusal_text(&e).as_deref(), Some("no port x"));
    }
}
