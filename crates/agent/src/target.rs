//! Controller targets written the Open vSwitch way.
//!
//! Active targets connect out: `tcp:HOST[:PORT]`, `ssl:HOST[:PORT]`, `unix:PATH`. Passive
//! targets listen: `ptcp:[PORT][:IP]`, `pssl:[PORT][:IP]`, `punix:PATH`. The port defaults to
//! 6653 (the IANA OpenFlow port); a passive target without an IP listens on every address.
//! An IPv6 address is written in brackets: `tcp:[::1]:6653`, `ptcp:6653:[::1]`.

use std::fmt;
use std::path::PathBuf;

/// The IANA-assigned OpenFlow port.
pub const DEFAULT_PORT: u16 = 6653;

/// Where a controller connection comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// Connect to `host:port` over TCP (`tcp:`) or TLS (`ssl:`).
    Active {
        /// Host name or IP address (IPv6 without brackets).
        host: String,
        /// TCP port.
        port: u16,
        /// Whether to speak TLS.
        tls: bool,
    },
    /// Listen on `ip:port` over TCP (`ptcp:`) or TLS (`pssl:`).
    Passive {
        /// Address to bind (`0.0.0.0` when none was given).
        ip: String,
        /// TCP port.
        port: u16,
        /// Whether to speak TLS.
        tls: bool,
    },
    /// Connect to a Unix stream socket.
    Unix(PathBuf),
    /// Listen on a Unix stream socket (the local management socket).
    PassiveUnix(PathBuf),
}

/// A target string that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("controller target {target:?}: {problem}; {fix}")]
pub struct TargetError {
    /// The text as given.
    pub target: String,
    /// What is wrong.
    pub problem: String,
    /// How to write it instead.
    pub fix: &'static str,
}

const FORMS: &str = "write tcp:HOST[:PORT], ssl:HOST[:PORT], ptcp:[PORT][:IP], pssl:[PORT][:IP], unix:PATH or punix:PATH";

impl Target {
    /// Parses a target such as `tcp:192.0.2.1:6653` or `ptcp:6653:127.0.0.1`.
    pub fn parse(text: &str) -> Result<Target, TargetError> {
        let err = |problem: String, fix: &'static str| TargetError {
            target: text.to_string(),
            problem,
            fix,
        };
        let Some((scheme, rest)) = text.split_once(':') else {
            return Err(err("no scheme".into(), FORMS));
        };
        match scheme {
            "tcp" | "ssl" => {
                let (host, port) = split_host_port(rest).map_err(|p| err(p, FORMS))?;
                if host.is_empty() {
                    return Err(err(
                        "no host".into(),
                        "name the controller: tcp:HOST[:PORT]",
                    ));
                }
                let port = parse_port(port, false).map_err(|p| err(p, PORT_FIX))?;
                Ok(Target::Active {
                    host: host.to_string(),
                    port,
                    tls: scheme == "ssl",
                })
            }
            "ptcp" | "pssl" => {
                let (port, ip) = match rest.split_once(':') {
                    Some((port, ip)) => (port, ip),
                    None => (rest, ""),
                };
                let port = parse_port(port, true).map_err(|p| err(p, PORT_FIX))?;
                let ip = ip
                    .strip_prefix('[')
                    .and_then(|s| s.strip_suffix(']'))
                    .unwrap_or(ip);
                if !ip.is_empty() && ip.parse::<std::net::IpAddr>().is_err() {
                    return Err(err(
                        format!("{ip:?} is not an IP address"),
                        "listen on an address such as ptcp:6653:127.0.0.1 or ptcp:6653:[::1]",
                    ));
                }
                let ip = if ip.is_empty() { "0.0.0.0" } else { ip };
                Ok(Target::Passive {
                    ip: ip.to_string(),
                    port,
                    tls: scheme == "pssl",
                })
            }
            "unix" | "punix" => {
                if rest.is_empty() {
                    return Err(err("no path".into(), "write unix:/path/to/socket"));
                }
                let path = PathBuf::from(rest);
                Ok(if scheme == "unix" {
                    Target::Unix(path)
                } else {
                    Target::PassiveUnix(path)
                })
            }
            other => Err(err(format!("unknown scheme {other:?}"), FORMS)),
        }
    }

    /// Whether this target listens (and may accept several controllers).
    pub fn is_passive(&self) -> bool {
        matches!(self, Target::Passive { .. } | Target::PassiveUnix(_))
    }

    /// Whether this target speaks TLS.
    pub fn is_tls(&self) -> bool {
        matches!(
            self,
            Target::Active { tls: true, .. } | Target::Passive { tls: true, .. }
        )
    }
}

const PORT_FIX: &str = "give a port number from 1 to 65535, or leave it out for 6653";

/// Parses a port; 0 (any free port, for tests and tools) only when `listen`.
fn parse_port(text: &str, listen: bool) -> Result<u16, String> {
    if text.is_empty() {
        return Ok(DEFAULT_PORT);
    }
    match text.parse::<u16>() {
        Ok(0) if !listen => Err(format!("{text:?} is not a port number")),
        Ok(p) => Ok(p),
        Err(_) => Err(format!("{text:?} is not a port number")),
    }
}

/// Splits `HOST[:PORT]` where HOST may be a bracketed IPv6 address.
fn split_host_port(text: &str) -> Result<(&str, &str), String> {
    if let Some(rest) = text.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err("unclosed '[' in the address".into());
        };
        return match after {
            "" => Ok((host, "")),
            _ => after
                .strip_prefix(':')
                .map(|port| (host, port))
                .ok_or_else(|| format!("unexpected {after:?} after the address")),
        };
    }
    if text.matches(':').count() > 1 {
        return Err("an IPv6 address must be written in brackets, e.g. tcp:[::1]:6653".into());
    }
    Ok(text.split_once(':').unwrap_or((text, "")))
}

/// Formats an address for display and connecting, bracketing IPv6.
fn host_port(f: &mut fmt::Formatter<'_>, host: &str, port: u16) -> fmt::Result {
    if host.contains(':') {
        write!(f, "[{host}]:{port}")
    } else {
        write!(f, "{host}:{port}")
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Active { host, port, tls } => {
                f.write_str(if *tls { "ssl:" } else { "tcp:" })?;
                host_port(f, host, *port)
            }
            Target::Passive { ip, port, tls } => {
                write!(f, "{}:{port}:", if *tls { "pssl" } else { "ptcp" })?;
                if ip.contains(':') {
                    write!(f, "[{ip}]")
                } else {
                    f.write_str(ip)
                }
            }
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::PassiveUnix(p) => write!(f, "punix:{}", p.display()),
        }
    }
}

impl std::str::FromStr for Target {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<Target, TargetError> {
        Target::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn active(host: &str, port: u16, tls: bool) -> Target {
        Target::Active {
            host: host.into(),
            port,
            tls,
        }
    }

    fn passive(ip: &str, port: u16, tls: bool) -> Target {
        Target::Passive {
            ip: ip.into(),
            port,
            tls,
        }
    }

    #[test]
    fn parses_the_ovs_forms() {
        let cases = [
            ("tcp:192.0.2.1:6633", active("192.0.2.1", 6633, false)),
            ("tcp:ctl.example", active("ctl.example", 6653, false)),
            ("ssl:10.0.0.1", active("10.0.0.1", 6653, true)),
            ("tcp:[::1]:7000", active("::1", 7000, false)),
            ("tcp:[fe80::1]", active("fe80::1", 6653, false)),
            ("ptcp:", passive("0.0.0.0", 6653, false)),
            ("ptcp:6654", passive("0.0.0.0", 6654, false)),
            ("ptcp:0:127.0.0.1", passive("127.0.0.1", 0, false)),
            ("ptcp:6654:127.0.0.1", passive("127.0.0.1", 6654, false)),
            ("pssl::[::1]", passive("::1", 6653, true)),
            (
                "unix:/run/hayate/br0.mgmt",
                Target::Unix("/run/hayate/br0.mgmt".into()),
            ),
            ("punix:/tmp/x", Target::PassiveUnix("/tmp/x".into())),
        ];
        for (text, want) in cases {
            assert_eq!(Target::parse(text), Ok(want.clone()), "{text}");
            // Display gives back a string that parses to the same target.
            assert_eq!(Target::parse(&want.to_string()), Ok(want), "{text}");
        }
        assert!(Target::parse("ptcp:1").unwrap().is_passive());
        assert!(Target::parse("ssl:h").unwrap().is_tls());
        assert!(!Target::parse("unix:/x").unwrap().is_tls());
    }

    #[test]
    fn errors_name_the_target_and_the_fix() {
        for (text, problem) in [
            ("192.0.2.1", "no scheme"),
            ("udp:1.2.3.4", "unknown scheme"),
            ("tcp:", "no host"),
            ("tcp:h:0", "not a port number"),
            ("tcp:h:70000", "not a port number"),
            ("tcp:::1", "brackets"),
            ("tcp:[::1", "unclosed"),
            ("ptcp:x", "not a port number"),
            ("ptcp:6653:nothost", "not an IP address"),
            ("punix:", "no path"),
        ] {
            let e = Target::parse(text).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(&format!("{text:?}")), "{msg}");
            assert!(msg.contains(problem), "{text}: {msg}");
        }
    }
}
