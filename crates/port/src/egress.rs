//! Egress queues of a port, as written in its spec, parsed and checked here
//! ([`crate::dp_options`] takes them out of a spec); the datapath enforces them
//! (`datapath::egress`). The rates are Open vSwitch's: a Queue row's `other_config:min-rate`
//! and `max-rate`, and its QoS row's `other_config:max-rate` for the whole port, but in
//! kbit/s (Open vSwitch counts bit/s).
//!
//! | option | meaning |
//! |---|---|
//! | `qos_max_rate=KBPS` | most kbit/s the port sends, all queues together (frame bytes) |
//! | `qos_burst=KBIT` | that bucket's size, kbit (default: a tenth of a second of rate, at least [`MIN_DEFAULT_BURST_KBIT`]) |
//! | `queue=ID:min_rate=KBPS:max_rate=KBPS:burst=KBIT` | queue `ID` (0 ..= [`MAX_QUEUE_ID`], 0xefff: Open vSwitch's `linux-htb` range; at most [`MAX_QUEUES`] queues a port, queue 0 counted): its guaranteed rate, its cap and its buckets' size; each part optional, repeat the option for several queues |
//! | `qos_type=TYPE` | how the rates are kept ([`QosType`]): `egress-policer` (the default) or `trtcm-policer` police, `linux-htb` shapes |
//! | `qos_backlog=PKTS` | `linux-htb` only: packets each queue holds per poll thread (default [`DEFAULT_BACKLOG`], at most [`MAX_BACKLOG`]) |
//!
//! What it is, by type: a policer (`egress-policer`, `trtcm-policer`) drops a packet above
//! its queue's rates at output; a shaper (`linux-htb`) holds it in its queue until the rates
//! allow, and drops only when the queue is full (`datapath::egress` and
//! `datapath::egress_backlog` say how). Either way a packet within its queue's `min_rate`
//! goes first; above that, it goes while both its queue's `max_rate` and the port's
//! `qos_max_rate` have room. Packets no flow put in a queue (no `set_queue`) are in queue 0.
//! A port without queues ignores `set_queue` (as Open vSwitch does on a port without QoS); on
//! a port with queues, a queue it lacks is a counted drop (queue 0 excepted: without a row of
//! its own, only the port's rate limits it).

use std::collections::BTreeMap;

/// The highest queue id a port may have (queues 0 ..= this): Open vSwitch's for `linux-htb`
/// (`HTB_N_QUEUES`, 0xf000 ids: Linux HTB class minor ids 1 ..= 0xf000 hold queues 0 ..=
/// 0xefff).
pub const MAX_QUEUE_ID: u32 = 0xefff;

/// The most queues a port may have, queue 0 counted (it always exists): the datapath keeps
/// this many buckets and, per poll thread of a shaped port, rings.
pub const MAX_QUEUES: usize = 64;

/// The least default bucket, kbit: 32 frames of 1518 bytes (one full batch).
pub const MIN_DEFAULT_BURST_KBIT: u32 = (32 * 1518 * 8u32).div_ceil(1000);

/// Packets a `linux-htb` queue holds per poll thread by default (Linux's `txqueuelen`).
pub const DEFAULT_BACKLOG: u32 = 1000;

/// The most packets a `linux-htb` queue may hold per poll thread (each held packet is a
/// frame of the datapath's pool).
pub const MAX_BACKLOG: u32 = 16384;

/// How a port's queues keep their rates: Open vSwitch's QoS `type`, of those Hayate has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QosType {
    /// `egress-policer`: policing at output, a packet above the rates is dropped (the default).
    #[default]
    EgressPolicer,
    /// `trtcm-policer`: the same policing at output (a guaranteed and a peak rate per queue).
    TrtcmPolicer,
    /// `linux-htb`: shaping, a packet above the rates waits in its queue until they allow.
    LinuxHtb,
}

impl QosType {
    /// The type named `text` (Open vSwitch's names); the error lists them.
    pub fn parse(text: &str) -> Result<QosType, String> {
        match text.trim() {
            "egress-policer" => Ok(QosType::EgressPolicer),
            "trtcm-policer" => Ok(QosType::TrtcmPolicer),
            "linux-htb" => Ok(QosType::LinuxHtb),
            other => Err(format!(
                "qos_type={other}: give linux-htb (shape: hold packets above the rates), \
                 egress-policer or trtcm-policer (police: drop them)"
            )),
        }
    }

    /// Its Open vSwitch name.
    pub fn name(self) -> &'static str {
        match self {
            QosType::EgressPolicer => "egress-policer",
            QosType::TrtcmPolicer => "trtcm-policer",
            QosType::LinuxHtb => "linux-htb",
        }
    }

    /// Whether packets above the rates wait (a shaper) rather than being dropped.
    pub fn shapes(self) -> bool {
        self == QosType::LinuxHtb
    }
}

/// One queue's rates (kbit/s; 0: not set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueRates {
    /// Guaranteed kbit/s (0: none).
    pub min_kbps: u32,
    /// Most kbit/s (0: only the port's rate limits it).
    pub max_kbps: u32,
    /// Size of each of its buckets, kbit (0: the default from its rate).
    pub burst_kbit: u32,
}

/// A port's egress queues and its own cap; empty: no queues, nothing enforced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Egress {
    /// Most kbit/s of the whole port (0: none).
    pub max_kbps: u32,
    /// Its bucket, kbit (0: the default from its rate).
    pub burst_kbit: u32,
    /// The queues by id.
    pub queues: BTreeMap<u32, QueueRates>,
    /// How the rates are kept.
    pub qos_type: QosType,
    /// `linux-htb`: packets each queue holds per poll thread (0: [`DEFAULT_BACKLOG`]).
    pub backlog: u32,
}

/// The default bucket of `rate_kbps`: a tenth of a second of it, at least one batch of frames.
pub fn default_burst(rate_kbps: u32) -> u32 {
    (rate_kbps / 10).max(MIN_DEFAULT_BURST_KBIT)
}

fn number(key: &str, value: &str) -> Result<u32, String> {
    let v: u32 = value
        .parse()
        .map_err(|_| format!("{key}={value}: not a whole number in 0 ..= {}", u32::MAX))?;
    if v == 0 {
        return Err(format!(
            "{key}=0 would let nothing through; leave the option out for no limit, \
             else give at least 1"
        ));
    }
    Ok(v)
}

impl QueueRates {
    /// Parses `min_rate=KBPS`, `max_rate=KBPS`, `burst=KBIT` parts split by `sep` (`,` from
    /// `hayate ctl set-queue`, `:` inside a spec's `queue=` option); `min` / `max` and
    /// Open vSwitch's `min-rate` / `max-rate` are the same keys. Checked.
    pub fn parse(text: &str, sep: char) -> Result<QueueRates, String> {
        let mut q = QueueRates::default();
        for part in text.split(sep).filter(|s| !s.trim().is_empty()) {
            let (k, v) = part.trim().split_once('=').ok_or_else(|| {
                format!("'{part}': write min_rate=KBPS, max_rate=KBPS or burst=KBIT")
            })?;
            let field = match k {
                "min" | "min_rate" | "min-rate" => &mut q.min_kbps,
                "max" | "max_rate" | "max-rate" => &mut q.max_kbps,
                "burst" => &mut q.burst_kbit,
                _ => {
                    return Err(format!(
                        "unknown queue option '{k}'; valid options: min_rate, max_rate, burst"
                    ))
                }
            };
            *field = number(k, v)?;
        }
        q.check()?;
        Ok(q)
    }

    /// Refuses a guarantee above the cap and a queue with no rate at all.
    pub fn check(&self) -> Result<(), String> {
        if self.min_kbps == 0 && self.max_kbps == 0 {
            return Err("a queue needs min_rate or max_rate (kbit/s); give at least one".into());
        }
        if self.max_kbps != 0 && self.min_kbps > self.max_kbps {
            return Err(format!(
                "min_rate={} is above max_rate={}; the guarantee cannot exceed the cap: \
                 lower min_rate or raise max_rate",
                self.min_kbps, self.max_kbps
            ));
        }
        check_burst(self.burst_kbit)
    }
}

fn check_burst(kbit: u32) -> Result<(), String> {
    let min = (1518u32 * 8).div_ceil(1000);
    if kbit != 0 && kbit < min {
        return Err(format!(
            "burst={kbit} kbit holds less than one 1518-byte frame, so such frames could \
             never pass; use at least {min}"
        ));
    }
    Ok(())
}

impl Egress {
    /// Whether the port has queues or a cap.
    pub fn is_on(&self) -> bool {
        self.max_kbps != 0 || !self.queues.is_empty()
    }

    /// Packets each queue holds per poll thread when the type shapes (0 when it polices).
    pub fn backlog_limit(&self) -> u32 {
        match (self.qos_type.shapes(), self.backlog) {
            (false, _) => 0,
            (true, 0) => DEFAULT_BACKLOG,
            (true, b) => b,
        }
    }

    /// Sets the spec option `key` to `value` if it is one of this module's; `Ok(false)` for
    /// other keys. Call [`Egress::finish`] after the last.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        match key {
            "qos_max_rate" => self.max_kbps = number(key, value)?,
            "qos_burst" => self.burst_kbit = number(key, value)?,
            "qos_type" => self.qos_type = QosType::parse(value)?,
            "qos_backlog" => {
                let b = number(key, value)?;
                if b > MAX_BACKLOG {
                    return Err(format!(
                        "qos_backlog={b}: each held packet is a pool frame; give at most \
                         {MAX_BACKLOG}"
                    ));
                }
                self.backlog = b;
            }
            "queue" => {
                let (id, rest) = value.split_once(':').unwrap_or((value, ""));
                let id = queue_id(id)?;
                let rates =
                    QueueRates::parse(rest, ':').map_err(|e| format!("queue={value}: {e}"))?;
                if self.queues.insert(id, rates).is_some() {
                    return Err(format!("queue {id} is given twice; give each queue once"));
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Sets the port's own options from `set-queue PORT port` text, `,`-separated:
    /// `type=TYPE`, `max_rate=KBPS` (`max`, `max-rate`), `burst=KBIT`, `backlog=PKTS` (the
    /// spec's `qos_` names work too); what is not given is kept. Call [`Egress::finish`] after.
    pub fn set_port(&mut self, text: &str) -> Result<(), String> {
        for part in text.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = part.trim().split_once('=').unwrap_or((part.trim(), ""));
            let key = match k.trim_start_matches("qos_") {
                "type" => "qos_type",
                "max" | "max_rate" | "max-rate" => "qos_max_rate",
                "burst" => "qos_burst",
                "backlog" => "qos_backlog",
                _ => {
                    return Err(format!(
                        "unknown port option '{k}'; valid options: type, max_rate, burst, backlog \
                         (the port's own rate is a cap only: a guarantee belongs to a queue)"
                    ))
                }
            };
            self.set(key, v)?;
        }
        Ok(())
    }

    /// Checks the whole: a burst without its rate, a backlog without a shaper, and a
    /// guarantee above the port's cap.
    pub fn finish(self) -> Result<Egress, String> {
        if self.backlog != 0 && !self.qos_type.shapes() {
            return Err(format!(
                "qos_backlog={} with qos_type={}: only a shaper holds packets; add \
                 qos_type=linux-htb or leave qos_backlog out",
                self.backlog,
                self.qos_type.name()
            ));
        }
        if self.burst_kbit != 0 && self.max_kbps == 0 {
            return Err(format!(
                "qos_burst={} without qos_max_rate; add the rate",
                self.burst_kbit
            ));
        }
        check_burst(self.burst_kbit)?;
        self.check_queues()?;
        Ok(self)
    }

    /// Refuses more than [`MAX_QUEUES`] queues and a queue whose guarantee is above the
    /// port's cap.
    pub fn check_queues(&self) -> Result<(), String> {
        let others = self.queues.keys().filter(|&&id| id != 0).count();
        if others >= MAX_QUEUES {
            return Err(format!(
                "{} queues: a port has at most {MAX_QUEUES}, queue 0 among them (it always \
                 exists); remove {}",
                others + 1,
                others + 1 - MAX_QUEUES
            ));
        }
        if self.max_kbps == 0 {
            return Ok(());
        }
        for (id, q) in &self.queues {
            if q.min_kbps > self.max_kbps {
                return Err(format!(
                    "queue {id}: min_rate={} is above the port's qos_max_rate={}; lower \
                     min_rate or raise qos_max_rate",
                    q.min_kbps, self.max_kbps
                ));
            }
        }
        Ok(())
    }
}

/// A queue id from text (decimal, or hex after `0x`), checked against [`MAX_QUEUE_ID`].
pub fn queue_id(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let n = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => t.parse::<u32>(),
    };
    match n {
        Ok(id) if id <= MAX_QUEUE_ID => Ok(id),
        _ => Err(format!(
            "queue id '{text}': give a number in 0 ..= {MAX_QUEUE_ID} (0x{MAX_QUEUE_ID:x}, \
             Open vSwitch's linux-htb range)"
        )),
    }
}

impl std::fmt::Display for QueueRates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if self.min_kbps != 0 {
            parts.push(format!("min_rate={}", self.min_kbps));
        }
        if self.max_kbps != 0 {
            parts.push(format!("max_rate={}", self.max_kbps));
        }
        if self.burst_kbit != 0 {
            parts.push(format!("burst={}", self.burst_kbit));
        }
        write!(f, "{}", parts.join(","))
    }
}

impl std::fmt::Display for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.is_on() {
            return write!(f, "no queues");
        }
        let mut parts = Vec::new();
        if self.max_kbps != 0 {
            parts.push(format!("qos_max_rate={}", self.max_kbps));
        }
        if self.burst_kbit != 0 {
            parts.push(format!("qos_burst={}", self.burst_kbit));
        }
        if self.qos_type != QosType::default() {
            parts.push(format!("qos_type={}", self.qos_type.name()));
        }
        if self.backlog != 0 {
            parts.push(format!("qos_backlog={}", self.backlog));
        }
        for (id, q) in &self.queues {
            parts.push(format!("queue {id}: {q}"));
        }
        write!(f, "{}", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dp_options::split_spec;

    #[test]
    fn queues_and_the_port_rate_come_out_of_a_spec() {
        let (rest, o) = split_spec(
            "null:sink,qos_max_rate=10000,queue=1:min_rate=1000:max_rate=5000,queue=2:max=300",
        )
        .unwrap();
        assert_eq!(rest, "null:sink");
        let e = o.egress;
        assert_eq!(e.max_kbps, 10000);
        assert_eq!(
            e.queues[&1],
            QueueRates {
                min_kbps: 1000,
                max_kbps: 5000,
                burst_kbit: 0
            }
        );
        assert_eq!(e.queues[&2].max_kbps, 300);
        assert!(e.is_on());
        assert!(!split_spec("null:sink").unwrap().1.egress.is_on());
    }

    #[test]
    fn bad_queues_name_the_fix() {
        let e = |s: &str| split_spec(s).unwrap_err().to_string();
        assert!(e("null:queue=1:min_rate=500:max_rate=100").contains("lower min_rate"));
        assert!(e("null:queue=1:max_rate=0").contains("leave the option out"));
        assert!(e("null:qos_max_rate=0").contains("leave the option out"));
        assert!(e("null:queue=1").contains("needs min_rate or max_rate"));
        assert!(e("null:queue=61440:max=5").contains("0 ..= 61439 (0xefff"));
        assert!(e("null:queue=-1:max=5").contains("0 ..= 61439"));
        let (_, o) = split_spec("null:queue=61439:max=5,queue=0x10:max=6").unwrap();
        assert_eq!(
            o.egress.queues.keys().copied().collect::<Vec<_>>(),
            [16, 61439]
        );
        let many = |n: u32| {
            let q: Vec<String> = (1..=n)
                .map(|i| format!("queue={}:max=5", i * 100))
                .collect();
            split_spec(&format!("null:{}", q.join(",")))
        };
        assert!(many(MAX_QUEUES as u32 - 1).is_ok(), "63 and queue 0");
        let err = many(MAX_QUEUES as u32).unwrap_err().to_string();
        assert!(err.contains("65 queues: a port has at most 64"), "{err}");
        assert!(err.contains("remove 1"), "{err}");
        assert!(e("null:queue=1:max=5,queue=1:max=6").contains("given twice"));
        assert!(e("null:queue=1:speed=5").contains("valid options"));
        assert!(e("null:qos_max_rate=100,queue=1:min=200").contains("raise qos_max_rate"));
        assert!(e("null:qos_burst=100").contains("add the rate"));
        assert!(e("null:queue=1:max=100:burst=5").contains("at least 13"));
    }

    #[test]
    fn ctl_text_parses_and_displays_back() {
        let q = QueueRates::parse("min=100,max-rate=200", ',').unwrap();
        assert_eq!((q.min_kbps, q.max_kbps), (100, 200));
        assert_eq!(QueueRates::parse(&q.to_string(), ',').unwrap(), q);
        assert_eq!(default_burst(1000), MIN_DEFAULT_BURST_KBIT);
        assert_eq!(default_burst(100_000), 10_000);
        let (_, o) = split_spec("null:qos_max_rate=900,queue=2:max=300").unwrap();
        assert_eq!(
            o.egress.to_string(),
            "qos_max_rate=900; queue 2: max_rate=300"
        );
        assert_eq!(Egress::default().to_string(), "no queues");
    }

    #[test]
    fn the_qos_type_and_backlog_come_from_a_spec_and_set_port() {
        let (_, o) =
            split_spec("null:sink,qos_type=linux-htb,qos_backlog=64,queue=1:max=100").unwrap();
        let e = o.egress;
        assert_eq!((e.qos_type, e.backlog_limit()), (QosType::LinuxHtb, 64));
        assert_eq!(
            e.to_string(),
            "qos_type=linux-htb; qos_backlog=64; queue 1: max_rate=100"
        );
        let (_, o) = split_spec("null:sink,qos_type=linux-htb,queue=1:max=100").unwrap();
        assert_eq!(o.egress.backlog_limit(), DEFAULT_BACKLOG);
        let (_, o) = split_spec("null:sink,qos_type=trtcm-policer,queue=1:max=100").unwrap();
        assert!(!o.egress.qos_type.shapes());
        assert_eq!(o.egress.backlog_limit(), 0);
        assert!(!split_spec("null:sink,qos_type=linux-htb")
            .unwrap()
            .1
            .egress
            .is_on());

        let mut e = Egress::default();
        e.set_port("type=linux-htb,max=900,backlog=10").unwrap();
        let e = e.finish().unwrap();
        assert_eq!((e.max_kbps, e.backlog_limit()), (900, 10));
        let mut e2 = e.clone();
        e2.set_port("qos_type=egress-policer").unwrap();
        assert!(e2
            .finish()
            .unwrap_err()
            .contains("only a shaper holds packets"));
        let mut e3 = e;
        assert!(e3.set_port("min=5").unwrap_err().contains("a cap only"));
    }

    #[test]
    fn bad_types_and_backlogs_name_the_fix() {
        let e = |s: &str| split_spec(s).unwrap_err().to_string();
        assert!(e("null:qos_type=linux-hfsc").contains("give linux-htb"));
        assert!(e("null:qos_type=linux-htb,qos_backlog=0").contains("leave the option out"));
        assert!(e("null:qos_type=linux-htb,qos_backlog=99999").contains("at most 16384"));
        assert!(e("null:qos_backlog=10").contains("add qos_type=linux-htb"));
    }
}
