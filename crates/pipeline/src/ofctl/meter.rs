//! `add-meter` lines into [`Meter`]s and back:
//! `meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100`.
//!
//! Words before the first `band=` describe the meter (`meter=N`, the flags `kbps` (the
//! default) or `pktps`, `burst` and `stats`). Each `band=` starts a band: `type=drop` or
//! `type=dscp_remark`, `rate=N`, `burst_size=N` (default 0) and, for dscp_remark,
//! `prec_level=N`.

use super::actions::METER_MAX;
use super::error::{ErrorKind, FlowParseError, PResult, Problem, TextKind};
use super::lexer::{split_eq, split_words};
use super::values::{out_of_range_from, parse_num};
use crate::model::{Meter, MeterBand};

/// Parses an `add-meter` line.
pub fn parse_meter(text: &str) -> Result<Meter, FlowParseError> {
    parse(text).map_err(|p| p.into_error(TextKind::Meter, text))
}

#[derive(Default)]
struct Draft {
    kind: Option<bool>,
    rate: Option<u32>,
    burst: Option<u32>,
    prec_level: Option<u8>,
}

fn duplicate(word: &str) -> Problem {
    Problem::new(
        ErrorKind::Duplicate,
        word,
        format!("duplicate {word}"),
        "give it once",
    )
}

fn set_once<T>(slot: &mut Option<T>, name: &str, v: T) -> PResult<()> {
    if slot.is_some() {
        return Err(duplicate(name));
    }
    *slot = Some(v);
    Ok(())
}

fn parse(text: &str) -> PResult<Meter> {
    let mut id = None;
    let mut unit: Option<bool> = None;
    let mut burst = None;
    let mut stats = None;
    let mut bands: Vec<Draft> = Vec::new();
    for w in split_words(text)? {
        let (key, value) = split_eq(w.text);
        let lkey = key.to_ascii_lowercase();
        let (key, value) = if lkey == "band" {
            bands.push(Draft::default());
            match value.map(split_eq) {
                Some((k, v)) if !k.is_empty() => (k, v),
                _ => continue,
            }
        } else {
            (key, value)
        };
        let lkey = key.to_ascii_lowercase();
        if let Some(b) = bands.last_mut() {
            band_word(b, &lkey, value)?;
            continue;
        }
        match (lkey.as_str(), value) {
            ("meter", Some(v)) => {
                let n = parse_num("meter", v, METER_MAX as u128)? as u32;
                if n == 0 {
                    return Err(out_of_range_from("meter", v, 1, METER_MAX as u128));
                }
                set_once(&mut id, "meter", n)?
            }
            ("kbps", None) => set_once(&mut unit, "kbps/pktps", false)?,
            ("pktps", None) => set_once(&mut unit, "kbps/pktps", true)?,
            ("burst", None) => set_once(&mut burst, "burst", true)?,
            ("stats", None) => set_once(&mut stats, "stats", true)?,
            _ => {
                return Err(Problem::new(
                    ErrorKind::UnknownField,
                    w.text,
                    format!("unknown meter field \"{}\"", w.text),
                    "expected meter=N, kbps, pktps, burst or band=...",
                ))
            }
        }
    }
    let id = id.ok_or_else(|| {
        Problem::new(
            ErrorKind::Misplaced,
            "",
            "missing meter=",
            "add meter=N first",
        )
    })?;
    if bands.is_empty() {
        return Err(Problem::new(
            ErrorKind::Misplaced,
            "",
            "a meter needs at least one band",
            "add band=type=drop,rate=N",
        ));
    }
    let mut out = Vec::new();
    for (n, b) in bands.into_iter().enumerate() {
        out.push(finish_band(n + 1, b)?);
    }
    Ok(Meter {
        id,
        pktps: unit.unwrap_or(false),
        burst: burst.unwrap_or(false),
        stats: stats.unwrap_or(false),
        bands: out,
        kbps: unit != Some(true),
    })
}

fn band_word(b: &mut Draft, key: &str, value: Option<&str>) -> PResult<()> {
    let Some(v) = value else {
        return Err(Problem::new(
            ErrorKind::BadValue,
            key,
            format!("band field {key} needs a value"),
            format!("write {key}=VALUE"),
        ));
    };
    match key {
        "type" => match v.to_ascii_lowercase().as_str() {
            "drop" => set_once(&mut b.kind, "type", false),
            "dscp_remark" => set_once(&mut b.kind, "type", true),
            _ => Err(Problem::new(
                ErrorKind::BadValue,
                v,
                format!("unknown band type \"{v}\""),
                "expected drop or dscp_remark",
            )),
        },
        "rate" => {
            let r = parse_num("rate", v, u32::MAX as u128)? as u32;
            if r == 0 {
                return Err(out_of_range_from("rate", v, 1, u32::MAX as u128));
            }
            set_once(&mut b.rate, "rate", r)
        }
        "burst_size" => {
            let r = parse_num("burst_size", v, u32::MAX as u128)? as u32;
            set_once(&mut b.burst, "burst_size", r)
        }
        "prec_level" => {
            let r = parse_num("prec_level", v, 0xff)? as u8;
            set_once(&mut b.prec_level, "prec_level", r)
        }
        _ => Err(Problem::new(
            ErrorKind::UnknownField,
            key,
            format!("unknown band field \"{key}\""),
            "expected type=, rate=, burst_size= or prec_level=",
        )),
    }
}

fn finish_band(n: usize, b: Draft) -> PResult<MeterBand> {
    let missing = |what: &str, fix: &str| {
        Problem::new(
            ErrorKind::Misplaced,
            "band",
            format!("band {n} has no {what}"),
            fix.to_string(),
        )
    };
    let remark = b
        .kind
        .ok_or_else(|| missing("type=", "add type=drop or type=dscp_remark"))?;
    let rate = b.rate.ok_or_else(|| missing("rate=", "add rate=N"))?;
    let burst = b.burst.unwrap_or(0);
    match (remark, b.prec_level) {
        (false, None) => Ok(MeterBand::Drop { rate, burst }),
        (false, Some(_)) => Err(Problem::new(
            ErrorKind::Misplaced,
            "prec_level",
            format!("band {n} is a drop band, which has no prec_level"),
            "remove prec_level= or use type=dscp_remark",
        )),
        (true, Some(prec_level)) => Ok(MeterBand::DscpRemark {
            rate,
            burst,
            prec_level,
        }),
        (true, None) => Err(missing("prec_level=", "add prec_level=N (levels to raise)")),
    }
}

/// Formats a meter as an `add-meter` line that [`parse_meter`] reads back.
pub fn format_meter(m: &Meter) -> String {
    let mut s = format!("meter={},{}", m.id, if m.pktps { "pktps" } else { "kbps" });
    if m.burst {
        s.push_str(",burst");
    }
    if m.stats {
        s.push_str(",stats");
    }
    for b in &m.bands {
        match b {
            MeterBand::Drop { rate, burst } => {
                s.push_str(&format!(",band=type=drop,rate={rate},burst_size={burst}"))
            }
            MeterBand::DscpRemark {
                rate,
                burst,
                prec_level,
            } => s.push_str(&format!(
                ",band=type=dscp_remark,rate={rate},burst_size={burst},prec_level={prec_level}"
            )),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_and_remark_bands() {
        let m = parse_meter("meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100").unwrap();
        assert_eq!(
            m,
            Meter {
                stats: false,
                id: 1,
                pktps: false,
                burst: true,
                bands: vec![MeterBand::Drop {
                    rate: 1000,
                    burst: 100
                }],
                kbps: true,
            }
        );
        assert_eq!(
            format_meter(&m),
            "meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100"
        );
        let m = parse_meter(
            "meter=2 pktps band=type=dscp_remark,rate=50,prec_level=1 band=type=drop,rate=90",
        )
        .unwrap();
        assert!(m.pktps && !m.burst);
        assert_eq!(
            m.bands,
            vec![
                MeterBand::DscpRemark {
                    rate: 50,
                    burst: 0,
                    prec_level: 1
                },
                MeterBand::Drop { rate: 90, burst: 0 }
            ]
        );
        assert_eq!(parse_meter(&format_meter(&m)).unwrap(), m);
    }

    #[test]
    fn meter_errors() {
        let e = |t: &str| parse_meter(t).unwrap_err().to_string();
        assert_eq!(
            e("kbps,band=type=drop,rate=1"),
            "meter \"kbps,band=type=drop,rate=1\": missing meter=; add meter=N first"
        );
        assert!(e("meter=0,band=type=drop,rate=1").contains("meter 0 is out of range 1..="));
        assert!(e("meter=1,kbps").contains("at least one band"));
        assert!(e("meter=1,kbps,pktps,band=type=drop,rate=1").contains("duplicate kbps/pktps"));
        assert!(e("meter=1,band=type=police,rate=1").contains("unknown band type \"police\""));
        assert!(e("meter=1,band=type=drop").contains("band 1 has no rate="));
        assert!(e("meter=1,band=rate=5").contains("band 1 has no type="));
        assert!(e("meter=1,band=type=dscp_remark,rate=5").contains("no prec_level="));
        assert!(e("meter=1,band=type=drop,rate=5,prec_level=1").contains("drop band"));
        assert!(e("meter=1,band=type=drop,rate=5,colour=red").contains("unknown band field"));
        assert!(e("meter=1,fast,band=type=drop,rate=5").contains("unknown meter field \"fast\""));
        assert!(e("meter=1,stats,stats,band=type=drop,rate=5").contains("duplicate stats"));
        let m = parse_meter("meter=1,pktps,stats,band=type=drop,rate=5").unwrap();
        assert!(m.stats && m.pktps && !m.burst);
        assert_eq!(
            format_meter(&m),
            "meter=1,pktps,stats,band=type=drop,rate=5,burst_size=0"
        );
        assert!(e("meter=1,band=type=drop,rate=0").contains("rate 0 is out of range 1..="));
    }
}
