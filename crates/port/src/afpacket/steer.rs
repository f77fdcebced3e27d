//! The classic-BPF fanout program of `prio=on`: which socket of the port's fanout group a
//! received frame goes to.
//!
//! A port with `queues=N` and `prio=on` has 2N receive sockets in one `PACKET_FANOUT_CBPF`
//! group, joined in this order: N bulk sockets (indices `0..N`), then N priority sockets
//! (`N..2N`). The program returns `hash % N` for bulk frames and `N + hash % N` for priority
//! frames, where `hash` is a multiplicative hash of the IP addresses (and the TCP/UDP ports
//! of unfragmented packets), so a flow's frames of both classes stay on one queue. Priority
//! frames are the rare ones a person or a protocol waits on and that cost little to forward:
//! - ARP;
//! - ICMP and ICMPv6 (ping, neighbour discovery, path-MTU messages);
//! - TCP SYNs with no payload and neither FIN nor RST (the handshake).
//!
//! Pure ACKs are bulk: a stream sends thousands a second, and each priority frame costs the
//! datapath a switch to its priority lane and back (measured: a stream through `prio=on`
//! ports ran at 0.8× the rate of one through plain ports with ACKs in the priority class,
//! at 1.0× with ACKs in bulk, for the same ping latency).
//!
//! Everything else, and every frame whose headers the program cannot see (a VLAN tag the
//! interface did not take out, IPv6 extension headers), is bulk. The kernel runs the program
//! with the frame's data at its network header and `skb->protocol` as the ancillary protocol
//! word (a VLAN tag taken out by the interface is not in the data).

/// One classic-BPF instruction (`struct sock_filter`).
pub(super) type Insn = libc::sock_filter;

use packet::cbpf::op::*;

/// Scratch word holding the header byte count (IPv4 TCP).
const M_HDRS: u32 = 0;
/// Scratch word holding the flow hash.
const M_HASH: u32 = 1;

/// Where a conditional jump goes.
#[derive(Clone, Copy)]
enum To {
    Next,
    L(&'static str),
}

/// A tiny assembler: instructions with named jump targets, resolved by [`Asm::finish`].
struct Asm {
    ins: Vec<(u16, To, To, u32)>,
    labels: Vec<(&'static str, usize)>,
}

impl Asm {
    fn new() -> Asm {
        Asm {
            ins: Vec::new(),
            labels: Vec::new(),
        }
    }

    fn op(&mut self, code: u16, k: u32) -> &mut Asm {
        self.ins.push((code, To::Next, To::Next, k));
        self
    }

    fn jump(&mut self, code: u16, k: u32, jt: To, jf: To) -> &mut Asm {
        self.ins.push((code, jt, jf, k));
        self
    }

    fn label(&mut self, name: &'static str) -> &mut Asm {
        self.labels.push((name, self.ins.len()));
        self
    }

    fn finish(&self) -> Vec<Insn> {
        let at = |name: &str| {
            self.labels
                .iter()
                .find(|(n, _)| *n == name)
                .map(|&(_, i)| i)
                .unwrap_or_else(|| panic!("steering program: no label {name}"))
        };
        self.ins
            .iter()
            .enumerate()
            .map(|(i, &(code, jt, jf, k))| {
                let off = |t: To| -> u8 {
                    match t {
                        To::Next => 0,
                        To::L(name) => {
                            let d = at(name)
                                .checked_sub(i + 1)
                                .expect("steering program: jumps go forward");
                            u8::try_from(d).expect("steering program: jump within 255")
                        }
                    }
                };
                Insn {
                    code,
                    jt: off(jt),
                    jf: off(jf),
                    k,
                }
            })
            .collect()
    }
}

/// The fanout program for a port with `queues` bulk and `queues` priority sockets.
pub(super) fn program(queues: u16) -> Vec<Insn> {
    let n = u32::from(queues.max(1));
    let hashed = n > 1;
    let mut a = Asm::new();
    if hashed {
        a.op(LD | IMM, 0).op(ST, M_HASH);
    }
    a.op(LD | H | ABS, AD_PROTOCOL)
        .jump(JMP | JEQ | K, 0x0806, To::L("prio"), To::Next)
        .jump(JMP | JEQ | K, 0x0800, To::L("v4"), To::Next)
        .jump(JMP | JEQ | K, 0x86dd, To::L("v6"), To::L("bulk"));

    a.label("v4");
    if hashed {
        // hash = the addresses, then the port word of an unfragmented TCP/UDP packet.
        a.op(LD | W | ABS, 12);
        fold(&mut a);
        a.op(LD | W | ABS, 16);
        fold(&mut a);
        a.op(LD | H | ABS, 6)
            .jump(JMP | JSET | K, 0x1fff, To::L("v4class"), To::Next)
            .op(LD | B | ABS, 9)
            .jump(JMP | JEQ | K, 6, To::L("v4ports"), To::Next)
            .jump(JMP | JEQ | K, 17, To::L("v4ports"), To::L("v4class"))
            .label("v4ports")
            .op(LDX | B | MSH, 0)
            .op(LD | W | IND, 0);
        fold(&mut a);
    }
    a.label("v4class")
        .op(LD | B | ABS, 9)
        .jump(JMP | JEQ | K, 1, To::L("prio"), To::Next)
        .jump(JMP | JEQ | K, 6, To::Next, To::L("bulk"))
        // A later fragment has no TCP header.
        .op(LD | H | ABS, 6)
        .jump(JMP | JSET | K, 0x1fff, To::L("bulk"), To::Next)
        .op(LDX | B | MSH, 0)
        .op(LD | B | IND, 13)
        .jump(JMP | JSET | K, 0x05, To::L("bulk"), To::Next)
        // Of the segments without FIN or RST, SYNs only.
        .jump(JMP | JSET | K, 0x02, To::Next, To::L("bulk"))
        // Header bytes = IHL * 4 + data offset * 4; no payload when that is the total length.
        .op(LD | B | IND, 12)
        .op(ALU | RSH | K, 4)
        .op(ALU | LSH | K, 2)
        .op(ALU | ADD | X, 0)
        .op(ST, M_HDRS)
        .op(LDX | W | MEM, M_HDRS)
        .op(LD | H | ABS, 2)
        .jump(JMP | JEQ | X, 0, To::L("prio"), To::L("bulk"));

    a.label("v6");
    if hashed {
        // hash = the eight address words, then the port word of TCP/UDP.
        for off in (8..40).step_by(4) {
            a.op(LD | W | ABS, off);
            fold(&mut a);
        }
        a.op(LD | B | ABS, 6)
            .jump(JMP | JEQ | K, 6, To::L("v6ports"), To::Next)
            .jump(JMP | JEQ | K, 17, To::L("v6ports"), To::L("v6class"))
            .label("v6ports")
            .op(LD | W | ABS, 40);
        fold(&mut a);
    }
    a.label("v6class")
        .op(LD | B | ABS, 6)
        .jump(JMP | JEQ | K, 58, To::L("prio"), To::Next)
        .jump(JMP | JEQ | K, 6, To::Next, To::L("bulk"))
        .op(LD | B | ABS, 53)
        .jump(JMP | JSET | K, 0x05, To::L("bulk"), To::Next)
        // Of the segments without FIN or RST, SYNs only.
        .jump(JMP | JSET | K, 0x02, To::Next, To::L("bulk"))
        // No payload when the payload length is the TCP header's length.
        .op(LD | B | ABS, 52)
        .op(ALU | RSH | K, 4)
        .op(ALU | LSH | K, 2)
        .op(MISC | TAX, 0)
        .op(LD | H | ABS, 4)
        .jump(JMP | JEQ | X, 0, To::L("prio"), To::L("bulk"));

    a.label("bulk");
    if hashed {
        a.op(LD | MEM, M_HASH)
            .op(ALU | RSH | K, 16)
            .op(ALU | MOD | K, n)
            .op(RET | A, 0);
    } else {
        a.op(RET | K, 0);
    }
    a.label("prio");
    if hashed {
        a.op(LD | MEM, M_HASH)
            .op(ALU | RSH | K, 16)
            .op(ALU | MOD | K, n)
            .op(ALU | ADD | K, n)
            .op(RET | A, 0);
    } else {
        a.op(RET | K, 1);
    }
    a.finish()
}

/// hash = (hash + A) * an odd constant: a multiplicative hash of the words folded in, whose
/// high half (taken for `% N`) depends on every bit of every word.
fn fold(a: &mut Asm) {
    a.op(MISC | TAX, 0)
        .op(LD | MEM, M_HASH)
        .op(ALU | ADD | X, 0)
        .op(ALU | MUL | K, 0x9e37_79b1)
        .op(ST, M_HASH);
}

#[cfg(test)]
#[path = "steer_tests.rs"]
pub(super) mod tests;
