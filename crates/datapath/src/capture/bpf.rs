//! A classic BPF interpreter for capture filters: the program libpcap compiles from a
//! tcpdump filter (`tcpdump -ddd FILTER` prints it: the count, then `code jt jf k` a line),
//! run on a frame in user space. A program is checked once when loaded ([`Program::new`]:
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

// Instruction classes and fields (linux/filter.h).
const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ST: u16 = 0x02;
const STX: u16 = 0x03;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const MISC: u16 = 0x07;

const W: u16 = 0x00;
const H: u16 = 0x08;
const B: u16 = 0x10;

const IMM: u16 = 0x00;
const ABS: u16 = 0x20;
const IND: u16 = 0x40;
const MEM: u16 = 0x60;
const LEN: u16 = 0x80;
const MSH: u16 = 0xa0;

const ADD: u16 = 0x00;
const SUB: u16 = 0x10;
const MUL: u16 = 0x20;
const DIV: u16 = 0x30;
const OR: u16 = 0x40;
const AND: u16 = 0x50;
const LSH: u16 = 0x60;
const RSH: u16 = 0x70;
const NEG: u16 = 0x80;
const MOD: u16 = 0x90;
const XOR: u16 = 0xa0;

const JA: u16 = 0x00;
const JEQ: u16 = 0x10;
const JGT: u16 = 0x20;
const JGE: u16 = 0x30;
const JSET: u16 = 0x40;

const K: u16 = 0x00;
const X: u16 = 0x08;
const A: u16 = 0x10;

const TAX: u16 = 0x00;
const TXA: u16 = 0x80;

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
#[path = "bpf_tests.rs"]
mod tests;
