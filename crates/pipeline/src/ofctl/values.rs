//! Scalar values of the flow syntax, both ways: numbers (decimal or `0x` hex), MAC addresses,
//! IPv4 and IPv6 addresses with prefix or mask, and port numbers with their reserved names.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::error::{ErrorKind, PResult, Problem};
use crate::model::ports;

/// How a field's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    /// A number (decimal or 0x hex).
    Num,
    /// `aa:bb:cc:dd:ee:ff`.
    Mac,
    /// `a.b.c.d`.
    Ipv4,
    /// An IPv6 address.
    Ipv6,
    /// A port number or reserved port name.
    Port,
}

/// Parses a decimal or `0x` hexadecimal number no larger than `max`. `name` names the field
/// in errors.
pub(crate) fn parse_num(name: &str, text: &str, max: u128) -> PResult<u128> {
    let t = text.trim();
    let parsed = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u128::from_str_radix(hex, 16)
    } else {
        t.parse::<u128>()
    };
    let v = parsed.map_err(|_| {
        Problem::new(
            ErrorKind::BadValue,
            text,
            format!("{name} value \"{text}\" is not a number"),
            "expected a decimal or 0x-prefixed hexadecimal number",
        )
    })?;
    if v > max {
        return Err(out_of_range(name, text, max));
    }
    Ok(v)
}

/// The error for a number too large for its field.
pub(crate) fn out_of_range(name: &str, text: &str, max: u128) -> Problem {
    out_of_range_from(name, text, 0, max)
}

/// The error for a number outside `min..=max`.
pub(crate) fn out_of_range_from(name: &str, text: &str, min: u128, max: u128) -> Problem {
    let max = if max <= 0xffff {
        max.to_string()
    } else {
        format!("{max:#x}")
    };
    Problem::new(
        ErrorKind::OutOfRange,
        text,
        format!("{name} {text} is out of range {min}..={max}"),
        "",
    )
}

/// Parses `aa:bb:cc:dd:ee:ff` (also `-` separated) into the low 48 bits.
pub(crate) fn parse_mac(name: &str, text: &str) -> PResult<u128> {
    let bad = || {
        Problem::new(
            ErrorKind::BadValue,
            text,
            format!("{name} value \"{text}\" is not a MAC address"),
            "expected six hex bytes like 00:11:22:aa:bb:cc",
        )
    };
    let sep = if text.contains('-') { '-' } else { ':' };
    let mut v: u128 = 0;
    let mut n = 0;
    for part in text.split(sep) {
        if part.is_empty() || part.len() > 2 {
            return Err(bad());
        }
        let b = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        v = (v << 8) | b as u128;
        n += 1;
    }
    if n != 6 {
        return Err(bad());
    }
    Ok(v)
}

/// Parses a dotted-quad IPv4 address.
pub(crate) fn parse_ipv4(name: &str, text: &str) -> PResult<u128> {
    text.parse::<Ipv4Addr>()
        .map(|a| u32::from(a) as u128)
        .map_err(|_| {
            Problem::new(
                ErrorKind::BadValue,
                text,
                format!("{name} value \"{text}\" is not an IPv4 address"),
                "expected a.b.c.d, optionally with /prefix or /a.b.c.d mask",
            )
        })
}

/// Parses an IPv6 address.
pub(crate) fn parse_ipv6(name: &str, text: &str) -> PResult<u128> {
    text.parse::<Ipv6Addr>().map(u128::from).map_err(|_| {
        Problem::new(
            ErrorKind::BadValue,
            text,
            format!("{name} value \"{text}\" is not an IPv6 address"),
            "expected an address like 2001:db8::1, optionally with /prefix or /mask",
        )
    })
}

/// Reserved port names, as written in flows (any case accepted) and as printed.
const PORT_NAMES: &[(&str, u32)] = &[
    ("IN_PORT", ports::IN_PORT),
    ("TABLE", ports::TABLE),
    ("NORMAL", ports::NORMAL),
    ("FLOOD", ports::FLOOD),
    ("ALL", ports::ALL),
    ("CONTROLLER", ports::CONTROLLER),
    ("LOCAL", ports::LOCAL),
    ("ANY", ports::ANY),
];

/// Parses a port: a number up to 0xffffff00 or a reserved name (`LOCAL`, `CONTROLLER`, ...).
pub(crate) fn parse_port(name: &str, text: &str) -> PResult<u32> {
    if let Some((_, p)) = PORT_NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(text.trim()))
    {
        return Ok(*p);
    }
    if text.trim().starts_with(|c: char| c.is_ascii_digit()) {
        return parse_num(name, text, ports::MAX as u128).map(|v| v as u32);
    }
    Err(Problem::new(
        ErrorKind::BadValue,
        text,
        format!("{name} value \"{text}\" is not a port"),
        "expected a port number up to 0xffffff00 or one of in_port, table, normal, flood, \
         all, controller, local, any",
    ))
}

/// Formats a port number, by name when it is reserved.
pub(crate) fn format_port(port: u32) -> String {
    match PORT_NAMES.iter().find(|(_, p)| *p == port) {
        Some((n, _)) => (*n).to_string(),
        None => port.to_string(),
    }
}

/// Parses a value in `syntax` for a field `bits` wide.
pub(crate) fn parse_value(name: &str, text: &str, syntax: Syntax, bits: u8) -> PResult<u128> {
    let max = if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    match syntax {
        Syntax::Num => parse_num(name, text, max),
        Syntax::Mac => parse_mac(name, text),
        Syntax::Ipv4 => parse_ipv4(name, text),
        Syntax::Ipv6 => parse_ipv6(name, text),
        Syntax::Port => parse_port(name, text).map(|p| p as u128),
    }
}

/// Parses a mask: a prefix length (`/24`, IP syntaxes only) or a value in the field's syntax.
pub(crate) fn parse_mask(name: &str, text: &str, syntax: Syntax, bits: u8) -> PResult<u128> {
    let prefix_bits = match syntax {
        Syntax::Ipv4 => Some(32u32),
        Syntax::Ipv6 => Some(128u32),
        _ => None,
    };
    if let Some(width) = prefix_bits {
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            let n = parse_num(&format!("{name} prefix length"), text, width as u128)? as u32;
            let all = if width == 128 {
                u128::MAX
            } else {
                (1u128 << width) - 1
            };
            return Ok(if n == 0 {
                0
            } else {
                (all << (width - n)) & all
            });
        }
    }
    if syntax == Syntax::Port {
        return Err(Problem::new(
            ErrorKind::MaskNotAllowed,
            text,
            format!("{name} does not take a mask"),
            "remove the /mask",
        ));
    }
    parse_value(&format!("{name} mask"), text, syntax, bits)
}

/// The prefix length of `mask` when it is a contiguous prefix of a `width`-bit field.
pub(crate) fn prefix_len(mask: u128, width: u32) -> Option<u32> {
    let all = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    let ones = mask.count_ones();
    let expect = if ones == 0 {
        0
    } else {
        (all << (width - ones)) & all
    };
    (mask == expect).then_some(ones)
}

/// Formats a MAC address from the low 48 bits.
pub(crate) fn format_mac(v: u128) -> String {
    let b = (v as u64).to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

/// Formats a value in `syntax`; numbers are decimal, or hex when `hex` is set.
pub(crate) fn format_value(v: u128, syntax: Syntax, hex: bool) -> String {
    match syntax {
        Syntax::Num if hex => format!("{v:#x}"),
        Syntax::Num => v.to_string(),
        Syntax::Mac => format_mac(v),
        Syntax::Ipv4 => Ipv4Addr::from(v as u32).to_string(),
        Syntax::Ipv6 => Ipv6Addr::from(v).to_string(),
        Syntax::Port => format_port(v as u32),
    }
}

/// Formats `value` with `mask` for a field of `bits` width: the bare value when the mask is
/// exact, `/N` for IP prefixes, `/mask` otherwise.
pub(crate) fn format_masked(
    value: u128,
    mask: u128,
    syntax: Syntax,
    bits: u8,
    hex: bool,
) -> String {
    let all = if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    let v = format_value(value, syntax, hex);
    if mask == all {
        return v;
    }
    if matches!(syntax, Syntax::Ipv4 | Syntax::Ipv6) {
        if let Some(n) = prefix_len(mask, bits as u32) {
            return format!("{v}/{n}");
        }
    }
    let hex_num = syntax == Syntax::Num;
    format!(
        "{}/{}",
        if hex_num { format!("{value:#x}") } else { v },
        format_value(mask, syntax, hex_num)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_decimal_and_hex_with_range() {
        assert_eq!(parse_num("x", "10", 255), Ok(10));
        assert_eq!(parse_num("x", "0xff", 255), Ok(255));
        assert_eq!(
            parse_num("dl_vlan", "4096", 4095).unwrap_err().problem,
            "dl_vlan 4096 is out of range 0..=4095"
        );
        assert_eq!(
            parse_num("in_port", "one", 9).unwrap_err().problem,
            "in_port value \"one\" is not a number"
        );
        assert_eq!(
            parse_num("x", "-1", 9).unwrap_err().kind,
            ErrorKind::BadValue
        );
    }

    #[test]
    fn macs_and_addresses() {
        assert_eq!(parse_mac("m", "00:11:22:aa:BB:cc"), Ok(0x0011_22aa_bbcc));
        assert_eq!(parse_mac("m", "00-11-22-aa-bb-cc"), Ok(0x0011_22aa_bbcc));
        for bad in [
            "00:11:22:aa:bb",
            "00:11:22:aa:bb:cc:dd",
            "0g:11:22:aa:bb:cc",
            "",
            "::::::",
        ] {
            assert!(parse_mac("m", bad).is_err(), "{bad}");
        }
        assert_eq!(format_mac(0x0011_22aa_bbcc), "00:11:22:aa:bb:cc");
        assert_eq!(parse_ipv4("a", "10.0.0.1"), Ok(0x0a00_0001));
        assert!(parse_ipv4("a", "10.0.0.256").is_err());
        assert_eq!(parse_ipv6("a", "::1"), Ok(1));
        assert!(parse_ipv6("a", "1::2::3").is_err());
    }

    #[test]
    fn masks_and_prefixes() {
        assert_eq!(parse_mask("a", "8", Syntax::Ipv4, 32), Ok(0xff00_0000));
        assert_eq!(parse_mask("a", "0", Syntax::Ipv4, 32), Ok(0));
        assert_eq!(
            parse_mask("a", "255.255.0.0", Syntax::Ipv4, 32),
            Ok(0xffff_0000)
        );
        assert_eq!(
            parse_mask("a", "64", Syntax::Ipv6, 128),
            Ok(u128::MAX << 64)
        );
        assert!(parse_mask("a", "33", Syntax::Ipv4, 32).is_err());
        assert_eq!(parse_mask("a", "0xff", Syntax::Num, 16), Ok(0xff));
        assert_eq!(prefix_len(0xffff_ff00, 32), Some(24));
        assert_eq!(prefix_len(0xff00_ff00, 32), None);
        assert_eq!(
            format_masked(0x0a00_0000, 0xff00_0000, Syntax::Ipv4, 32, false),
            "10.0.0.0/8"
        );
        assert_eq!(
            format_masked(0x0a00_0000, 0xff00_ff00, Syntax::Ipv4, 32, false),
            "10.0.0.0/255.0.255.0"
        );
        assert_eq!(
            format_masked(0x50, 0xfff0, Syntax::Num, 16, false),
            "0x50/0xfff0"
        );
        assert_eq!(format_masked(80, 0xffff, Syntax::Num, 16, false), "80");
    }

    #[test]
    fn ports_by_number_and_name() {
        assert_eq!(parse_port("p", "local"), Ok(ports::LOCAL));
        assert_eq!(parse_port("p", "7"), Ok(7));
        assert!(parse_port("p", "0xffffff01").is_err());
        assert!(parse_port("p", "eth0").is_err());
        assert_eq!(format_port(ports::CONTROLLER), "CONTROLLER");
        assert_eq!(format_port(3), "3");
    }
}
