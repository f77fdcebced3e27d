//! Options of a port spec that are the datapath's, not the backend's: ingress policing
//! ([`crate::policing`]), egress queues ([`crate::egress`]) and which poll thread reads which of the port's rx queues
//! (`rxq_affinity=QUEUE:CORE`, as Open vSwitch's `pmd-rxq-affinity`; repeat the option for
//! several queues). [`split_spec`] takes them out of a spec before the backend opens it.

use crate::egress::Egress;
use crate::policing::Policing;
use crate::PortError;

/// The datapath's options of one port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DatapathOptions {
    /// Ingress policing (default: none).
    pub policing: Policing,
    /// Egress queues and the port's cap (default: none).
    pub egress: Egress,
    /// Rx queues pinned to the poll thread of a core: `(queue, core)`. A thread that has a
    /// pinned queue reads no other port's unpinned queues (it is dedicated).
    pub rxq_affinity: Vec<(u16, usize)>,
}

/// Takes the datapath's options out of a port spec: returns the spec without them (for
/// [`crate::spec::open`]) and the options.
pub fn split_spec(spec: &str) -> Result<(String, DatapathOptions), PortError> {
    let Some((kind, rest)) = spec.split_once(':') else {
        return Ok((spec.to_string(), DatapathOptions::default()));
    };
    let err = |e: String| PortError::new(spec, e);
    let mut o = DatapathOptions::default();
    let mut kept = Vec::new();
    for opt in rest.split(',').filter(|o| !o.is_empty()) {
        let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
        if k == "rxq_affinity" {
            let pin = affinity(v).map_err(err)?;
            if o.rxq_affinity.iter().any(|(q, _)| *q == pin.0) {
                return Err(err(format!(
                    "rxq_affinity: queue {} is pinned twice; give each queue one core",
                    pin.0
                )));
            }
            o.rxq_affinity.push(pin);
        } else if !o.policing.set(k, v).map_err(err)? && !o.egress.set(k, v).map_err(err)? {
            kept.push(opt);
        }
    }
    o.policing = o.policing.finish().map_err(err)?;
    o.egress = std::mem::take(&mut o.egress).finish().map_err(err)?;
    Ok((format!("{kind}:{}", kept.join(",")), o))
}

fn affinity(v: &str) -> Result<(u16, usize), String> {
    let bad = || format!("rxq_affinity={v}: write QUEUE:CORE, e.g. rxq_affinity=0:3");
    let (q, c) = v.split_once(':').ok_or_else(bad)?;
    Ok((q.parse().map_err(|_| bad())?, c.parse().map_err(|_| bad())?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affinity_is_taken_out_and_repeats() {
        let (rest, o) =
            split_spec("afxdp:veth0,queues=2,rxq_affinity=0:3,rxq_affinity=1:5").unwrap();
        assert_eq!(rest, "afxdp:veth0,queues=2");
        assert_eq!(o.rxq_affinity, vec![(0, 3), (1, 5)]);
        let e = |s: &str| split_spec(s).unwrap_err().to_string();
        assert!(e("null:rxq_affinity=3").contains("QUEUE:CORE"));
        assert!(e("null:rxq_affinity=0:1,rxq_affinity=0:2").contains("pinned twice"));
    }
}
