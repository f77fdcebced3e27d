//! Classic BPF in one place: the opcodes of `<linux/filter.h>` ([`op`]), used by the
//! AF_PACKET port's fanout program (`port::afpacket::steer`) and its tests, and a checked
//! interpreter for capture filters: the program libpcap compiles from a tcpdump filter
//! (`tcpdump -ddd FILTER` prints it: the count, then `code jt jf k` a line), run on a frame in
//! user space. A program is checked once when loaded ([`Program::new`]:
//! known opcodes, jumps forward and inside it, scratch memory indexes below 16, a return at
//! the end), so running it cannot loop or index out of bounds; a load beyond the frame ends
//! the run with 0 (no match), as the kernel does.

/// Scratch memory words of a program (`BPF_MEMWORDS`).
const MEMWORDS: usize = 16;
/// Most instructions a program may have (`BPF_MAXINSNS`).
pub const MAX_INSNS: usize = 4096;

/// One instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset when true.
    pub jt: u8,
    /// Jump offset when false.
    pub jf: u8,
    /// Operand.
    pub k: u32,
}

/// The opcode parts of `<linux/filter.h>` (an instruction's `code` is class | size | mode,
/// or class | operation | source).
pub mod op {
    /// Class: load into A.
    pub const LD: u16 = 0x00;
    /// Class: load into X.
    pub const LDX: u16 = 0x01;
    /// Class: store A to scratch memory.
    pub const ST: u16 = 0x02;
    /// Class: store X to scratch memory.
    pub const STX: u16 = 0x03;
    /// Class: arithmetic on A.
    pub const ALU: u16 = 0x04;
    /// Class: jumps.
    pub const JMP: u16 = 0x05;
    /// Class: return.
    pub const RET: u16 = 0x06;
    /// Class: register moves.
    pub const MISC: u16 = 0x07;

    /// Size: 32-bit word.
    pub const W: u16 = 0x00;
    /// Size: 16-bit half-word.
    pub const H: u16 = 0x08;
    /// Size: byte.
    pub const B: u16 = 0x10;

    /// Mode: the constant `k`.
    pub const IMM: u16 = 0x00;
    /// Mode: the frame at `k`.
    pub const ABS: u16 = 0x20;
    /// Mode: the frame at `X + k`.
    pub const IND: u16 = 0x40;
    /// Mode: scratch word `k`.
    pub const MEM: u16 = 0x60;
    /// Mode: the frame's length.
    pub const LEN: u16 = 0x80;
    /// Mode: `4 * (frame[k] & 0xf)` (an IPv4 header length).
    pub const MSH: u16 = 0xa0;

    /// ALU: add.
    pub const ADD: u16 = 0x00;
    /// ALU: subtract.
    pub const SUB: u16 = 0x10;
    /// ALU: multiply.
    pub const MUL: u16 = 0x20;
    /// ALU: divide.
    pub const DIV: u16 = 0x30;
    /// ALU: or.
    pub const OR: u16 = 0x40;
    /// ALU: and.
    pub const AND: u16 = 0x50;
    /// ALU: shift left.
    pub const LSH: u16 = 0x60;
    /// ALU: shift right.
    pub const RSH: u16 = 0x70;
    /// ALU: negate.
    pub const NEG: u16 = 0x80;
    /// ALU: remainder.
    pub const MOD: u16 = 0x90;
    /// ALU: exclusive or.
    pub const XOR: u16 = 0xa0;

    /// Jump: always, by `k`.
    pub const JA: u16 = 0x00;
    /// Jump: if equal.
    pub const JEQ: u16 = 0x10;
    /// Jump: if greater.
    pub const JGT: u16 = 0x20;
    /// Jump: if greater or equal.
    pub const JGE: u16 = 0x30;
    /// Jump: if any bit of the operand is set in A.
    pub const JSET: u16 = 0x40;

    /// Source: the constant `k`.
    pub const K: u16 = 0x00;
    /// Source: register X.
    pub const X: u16 = 0x08;
    /// Return source: register A.
    pub const A: u16 = 0x10;

    /// Misc: copy A to X.
    pub const TAX: u16 = 0x00;
    /// Misc: copy X to A.
    pub const TXA: u16 = 0x80;

    /// `SKF_AD_OFF + SKF_AD_PROTOCOL`: an absolute load at this offset reads the kernel's
    /// `skb->protocol` (the EtherType, host order) instead of frame bytes.
    pub const AD_PROTOCOL: u32 = 0xffff_f000;
}

use op::*;

/// A checked program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program(Vec<Insn>);

impl Program {
    /// Checks `insns` (module docs); the error names the first bad instruction.
    pub fn new(insns: Vec<Insn>) -> Result<Program, String> {
        if insns.is_empty() || insns.len() > MAX_INSNS {
            return Err(format!(
                "a filter program has 1 to {MAX_INSNS} instructions, not {}",
                insns.len()
            ));
        }
        let n = insns.len();
        for (pc, i) in insns.iter().enumerate() {
            let bad = |why: &str| Err(format!("instruction {pc} ({:#06x}): {why}", i.code));
            let class = i.code & 0x07;
            match class {
                LD | LDX => {
                    let mode = i.code & 0xe0;
                    let ok = match (class, mode) {
                        (LD, IMM | ABS | IND | LEN) => true,
                        (LDX, IMM | LEN) => true,
                        (LDX, MSH) => i.code & 0x18 == B,
                        (_, MEM) => (i.k as usize) < MEMWORDS,
                        _ => false,
                    };
                    if !ok || (class == LD && !matches!(i.code & 0x18, W | H | B)) {
                        return bad("unknown load");
                    }
                }
                ST | STX => {
                    if i.k as usize >= MEMWORDS {
                        return bad("scratch memory index out of range");
                    }
                }
                ALU => {
                    let op = i.code & 0xf0;
                    if !matches!(
                        op,
                        ADD | SUB | MUL | DIV | OR | AND | LSH | RSH | NEG | MOD | XOR
                    ) {
                        return bad("unknown ALU operation");
                    }
                }
                JMP => {
                    let op = i.code & 0xf0;
                    let far = if op == JA {
                        i.k as usize
                    } else if matches!(op, JEQ | JGT | JGE | JSET) {
                        usize::from(i.jt.max(i.jf))
                    } else {
                        return bad("unknown jump");
                    };
                    if pc + 1 + far >= n {
                        return bad("jumps past the end");
                    }
                }
                RET => {
                    if !matches!(i.code & 0x18, K | A) {
                        return bad("unknown return");
                    }
                }
                MISC => {
                    if !matches!(i.code & 0xf8, TAX | TXA) {
                        return bad("unknown instruction");
                    }
                }
                _ => return bad("unknown instruction class"),
            }
        }
        if insns[n - 1].code & 0x07 != RET {
            return Err("a filter program must end with a return".into());
        }
        Ok(Program(insns))
    }

    /// Parses `tcpdump -ddd` output: the instruction count, then `code jt jf k` a line.
    pub fn parse(text: &str) -> Result<Program, String> {
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let count: usize = lines
            .next()
            .and_then(|l| l.parse().ok())
            .ok_or("a filter program starts with its instruction count")?;
        let mut insns = Vec::with_capacity(count);
        for l in lines {
            let v: Vec<u64> = l
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|_| format!("{l:?} is not `code jt jf k`"))?;
            let [code, jt, jf, k] = v[..] else {
                return Err(format!("{l:?} is not `code jt jf k`"));
            };
            insns.push(Insn {
                code: code as u16,
                jt: jt as u8,
                jf: jf as u8,
                k: k as u32,
            });
        }
        if insns.len() != count {
            return Err(format!(
                "the program says {count} instructions and has {}",
                insns.len()
            ));
        }
        Program::new(insns)
    }

    /// The program as `tcpdump -ddd` prints it ([`Program::parse`] reads it back).
    pub fn to_text(&self) -> String {
        let mut s = format!("{}\n", self.0.len());
        for i in &self.0 {
            s.push_str(&format!("{} {} {} {}\n", i.code, i.jt, i.jf, i.k));
        }
        s
    }

    /// Runs the program on `frame` (of wire length `wire_len`); what it returns (0: the
    /// frame does not match; otherwise how many bytes to keep).
    pub fn run(&self, frame: &[u8], wire_len: u32) -> u32 {
        self.run_with(frame, wire_len, None)
    }

    /// [`Program::run`] as the kernel runs a socket's program: an absolute load at
    /// [`op::AD_PROTOCOL`] reads `protocol` (the frame's EtherType, when the frame starts at
    /// its network header). Without one, such a load ends the run with 0, like any load
    /// beyond the frame.
    pub fn run_with(&self, frame: &[u8], wire_len: u32, protocol: Option<u16>) -> u32 {
        let p = &self.0;
        let (mut a, mut x) = (0u32, 0u32);
        let mut mem = [0u32; MEMWORDS];
        let mut pc = 0usize;
        loop {
            // `Program::new` holds every jump inside and a return at the end.
            let i = p[pc];
            pc += 1;
            match i.code & 0x07 {
                LD | LDX => {
                    let v = match i.code & 0xe0 {
                        IMM => i.k,
                        LEN => wire_len,
                        MEM => mem[i.k as usize],
                        MSH => match frame.get(i.k as usize) {
                            Some(b) => u32::from(b & 0x0f) << 2,
                            None => return 0,
                        },
                        ABS if i.k == AD_PROTOCOL => match protocol {
                            Some(p) => u32::from(p),
                            None => return 0,
                        },
                        mode => {
                            let at = if mode == IND {
                                x.wrapping_add(i.k)
                            } else {
                                i.k
                            } as usize;
                            match load(frame, at, i.code & 0x18) {
                                Some(v) => v,
                                None => return 0,
                            }
                        }
                    };
                    if i.code & 0x07 == LD {
                        a = v;
                    } else {
                        x = v;
                    }
                }
                ST => mem[i.k as usize] = a,
                STX => mem[i.k as usize] = x,
                ALU => {
                    let v = if i.code & 0x08 == X { x } else { i.k };
                    a = match i.code & 0xf0 {
                        ADD => a.wrapping_add(v),
                        SUB => a.wrapping_sub(v),
                        MUL => a.wrapping_mul(v),
                        DIV => match a.checked_div(v) {
                            Some(q) => q,
                            None => return 0,
                        },
                        MOD => match a.checked_rem(v) {
                            Some(r) => r,
                            None => return 0,
                        },
                        OR => a | v,
                        AND => a & v,
                        LSH => a.checked_shl(v).unwrap_or(0),
                        RSH => a.checked_shr(v).unwrap_or(0),
                        XOR => a ^ v,
                        _ => a.wrapping_neg(),
                    };
                }
                JMP => {
                    let op = i.code & 0xf0;
                    if op == JA {
                        pc += i.k as usize;
                        continue;
                    }
                    let v = if i.code & 0x08 == X { x } else { i.k };
                    let yes = match op {
                        JEQ => a == v,
                        JGT => a > v,
                        JGE => a >= v,
                        _ => a & v != 0,
                    };
                    pc += usize::from(if yes { i.jt } else { i.jf });
                }
                RET => return if i.code & 0x18 == A { a } else { i.k },
                _ => {
                    if i.code & 0xf8 == TXA {
                        a = x;
                    } else {
                        x = a;
                    }
                }
            }
        }
    }
}

/// A big-endian word, half-word or byte of `frame` at `at`.
fn load(frame: &[u8], at: usize, size: u16) -> Option<u32> {
    let n = match size {
        W => 4,
        H => 2,
        _ => 1,
    };
    let b = frame.get(at..at.checked_add(n)?)?;
    Some(b.iter().fold(0u32, |v, &x| (v << 8) | u32::from(x)))
}

#[cfg(test)]
#[path = "cbpf_tests.rs"]
mod tests;
