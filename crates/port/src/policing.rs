//! Ingress policing options of a port, as written in its spec (the names Open vSwitch gives
//! them in its Interface table), parsed and checked here ([`crate::dp_options`] takes them
//! out of a spec); the datapath polices (`datapath::police`).
//!
//! | option | meaning |
//! |---|---|
//! | `ingress_policing_rate=KBPS` | most kbit/s the port may send into the switch (frame bytes, no preamble or FCS) |
//! | `ingress_policing_burst=KBIT` | bucket size in kbit (default 8000, as Open vSwitch; at least one 1518-byte frame: 13) |
//! | `ingress_policing_kpkts_rate=KPPS` | most thousands of packets a second |
//! | `ingress_policing_kpkts_burst=KPKTS` | bucket size in thousands of packets (default: a tenth of a second of rate, at least 1) |
//!
//! Both rates may be given; a frame then passes when both buckets hold its cost. Leaving a
//! rate out (not `0`, which is refused) does not police by it.

/// Default bucket of a bit rate, kbit (Open vSwitch's default burst).
pub const DEFAULT_BURST_KBIT: u32 = 8000;
/// The frame a bit-rate bucket must hold at least: 1518 bytes (1500-byte MTU, Ethernet
/// header, one VLAN tag).
pub const MIN_BURST_FRAME: u32 = 1518;

/// The option names this module owns.
pub const OPTIONS: [&str; 4] = [
    "ingress_policing_rate",
    "ingress_policing_burst",
    "ingress_policing_kpkts_rate",
    "ingress_policing_kpkts_burst",
];

/// How much a port may send into the switch; all zero: no policing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policing {
    /// kbit/s (0: no bit rate).
    pub rate_kbps: u32,
    /// Bucket of the bit rate, kbit.
    pub burst_kbit: u32,
    /// Thousands of packets a second (0: no packet rate).
    pub rate_kpps: u32,
    /// Bucket of the packet rate, thousands of packets.
    pub burst_kpkts: u32,
}

impl Policing {
    /// Whether any rate is set.
    pub fn is_on(&self) -> bool {
        self.rate_kbps != 0 || self.rate_kpps != 0
    }

    /// Sets the option `key` (one of [`OPTIONS`]) to `value`. Unknown keys return `Ok(false)`,
    /// so a caller can try its own options next. Call [`Policing::finish`] after the last.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let field = match key {
            "ingress_policing_rate" => &mut self.rate_kbps,
            "ingress_policing_burst" => &mut self.burst_kbit,
            "ingress_policing_kpkts_rate" => &mut self.rate_kpps,
            "ingress_policing_kpkts_burst" => &mut self.burst_kpkts,
            _ => return Ok(false),
        };
        *field = value
            .parse()
            .map_err(|_| format!("{key}={value}: not a whole number in 0 ..= {}", u32::MAX))?;
        if *field == 0 && key.ends_with("rate") {
            return Err(format!(
                "{key}=0 would let nothing through; to not police, leave the option out, \
                 else give a rate of at least 1"
            ));
        }
        Ok(true)
    }

    /// Fills in default bursts and checks the whole: a burst without its rate, or a bit-rate
    /// burst smaller than one frame, is an error naming the fix.
    pub fn finish(mut self) -> Result<Policing, String> {
        if self.burst_kbit != 0 && self.rate_kbps == 0 {
            return Err(format!(
                "ingress_policing_burst={} without ingress_policing_rate; add the rate",
                self.burst_kbit
            ));
        }
        if self.burst_kpkts != 0 && self.rate_kpps == 0 {
            return Err(format!(
                "ingress_policing_kpkts_burst={} without ingress_policing_kpkts_rate; add the rate",
                self.burst_kpkts
            ));
        }
        if self.rate_kbps != 0 {
            if self.burst_kbit == 0 {
                self.burst_kbit = DEFAULT_BURST_KBIT;
            }
            let min = (MIN_BURST_FRAME * 8).div_ceil(1000);
            if self.burst_kbit < min {
                return Err(format!(
                    "ingress_policing_burst={} kbit holds less than one {MIN_BURST_FRAME}-byte \
                     frame, so such frames could never pass; use at least {min}",
                    self.burst_kbit
                ));
            }
        }
        if self.rate_kpps != 0 && self.burst_kpkts == 0 {
            self.burst_kpkts = self.rate_kpps.div_ceil(10).max(1);
        }
        Ok(self)
    }

    /// Parses `key=value` options separated by commas (e.g. what `hayate ctl BRIDGE
    /// set-policing PORT ...` is given); every key must be one of [`OPTIONS`].
    pub fn parse(text: &str) -> Result<Policing, String> {
        let mut p = Policing::default();
        for opt in text.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = opt.trim().split_once('=').ok_or_else(|| {
                format!(
                    "'{opt}': write KEY=VALUE with KEY one of {}",
                    OPTIONS.join(", ")
                )
            })?;
            if !p.set(k, v)? {
                return Err(format!(
                    "unknown policing option '{k}'; valid options: {}",
                    OPTIONS.join(", ")
                ));
            }
        }
        p.finish()
    }
}

impl std::fmt::Display for Policing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.is_on() {
            return write!(f, "no policing");
        }
        let mut sep = "";
        if self.rate_kbps != 0 {
            write!(
                f,
                "ingress_policing_rate={},ingress_policing_burst={}",
                self.rate_kbps, self.burst_kbit
            )?;
            sep = ",";
        }
        if self.rate_kpps != 0 {
            write!(
                f,
                "{sep}ingress_policing_kpkts_rate={},ingress_policing_kpkts_burst={}",
                self.rate_kpps, self.burst_kpkts
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dp_options::split_spec;

    #[test]
    fn spec_options_come_out_and_the_rest_stays() {
        let (rest, o) = split_spec(
            "afxdp:veth0,queues=2,ingress_policing_rate=10000,ingress_policing_burst=1000",
        )
        .unwrap();
        let p = o.policing;
        assert_eq!(rest, "afxdp:veth0,queues=2");
        assert_eq!(
            p,
            Policing {
                rate_kbps: 10000,
                burst_kbit: 1000,
                ..Policing::default()
            }
        );
        let (rest, o) = split_spec("null:ingress_policing_kpkts_rate=100").unwrap();
        let p = o.policing;
        assert_eq!(rest, "null:");
        assert_eq!((p.rate_kpps, p.burst_kpkts), (100, 10), "default burst");
        let (rest, o) = split_spec("null:sink").unwrap();
        assert_eq!((rest.as_str(), o.policing.is_on()), ("null:sink", false));
        let (_, o) = split_spec("null:ingress_policing_rate=500").unwrap();
        assert_eq!(o.policing.burst_kbit, DEFAULT_BURST_KBIT);
    }

    #[test]
    fn bad_input_names_the_fix() {
        let e = |s: &str| split_spec(s).unwrap_err().to_string();
        assert!(e("null:ingress_policing_rate=0").contains("leave the option out"));
        assert!(e("null:ingress_policing_kpkts_rate=0").contains("leave the option out"));
        let small = e("null:ingress_policing_rate=100,ingress_policing_burst=12");
        assert!(small.contains("less than one 1518-byte frame"), "{small}");
        assert!(small.contains("at least 13"), "{small}");
        assert!(split_spec("null:ingress_policing_rate=100,ingress_policing_burst=13").is_ok());
        assert!(e("null:ingress_policing_burst=100").contains("add the rate"));
        assert!(e("null:ingress_policing_rate=fast").contains("not a whole number"));
        assert!(Policing::parse("rate=5")
            .unwrap_err()
            .contains("valid options"));
    }

    #[test]
    fn parse_and_display_agree() {
        let p =
            Policing::parse("ingress_policing_rate=2000,ingress_policing_kpkts_rate=50").unwrap();
        assert_eq!(Policing::parse(&p.to_string()).unwrap(), p);
        assert_eq!(Policing::default().to_string(), "no policing");
    }
}
