//! The body of the `ovsdb_update` fuzz target (`fuzz/fuzz_targets/ovsdb_update.rs`), here so
//! that a stable test runs it too: arbitrary bytes through the stream decoder, every message
//! that comes out through the update parser and into a replica; nothing may panic, and a
//! replica built from parsed updates holds exactly the rows they inserted last.

use crate::replica::Replica;
use crate::rpc::{Decoder, Message};
use crate::update;

/// Runs the decoder, the update parser and the replica on `data`. Panics only if the code
/// under test misbehaves.
pub fn fuzz_update(data: &[u8]) {
    let mut dec = Decoder::default();
    // Cut the input in two, as a socket might.
    let cut = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut replica = Replica::default();
    for part in [&data[..cut], &data[cut..]] {
        dec.push(part);
        while let Ok(Some(m)) = dec.next_message() {
            let params = match m {
                Message::Notification { params, .. } => params,
                Message::Request { params, .. } => params,
                Message::Response { result, .. } => result,
            };
            let parsed = update::parse_notification(&params)
                .map(|(_, u)| u)
                .or_else(|_| update::parse(&params));
            if let Ok(u) = parsed {
                replica.apply(&u);
                for (table, rows) in &u {
                    for (uuid, ru) in rows {
                        assert_eq!(replica.row(table, uuid).is_some(), ru.new.is_some());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn seeds() {
        super::fuzz_update(
            br#"{"id":null,"method":"update","params":["m",{"T":{"u":{"new":{"a":1}}}}]}"#,
        );
        super::fuzz_update(br#"{"id":1,"result":{"T":{"u":{"old":{"a":1}}}},"error":null}"#);
        super::fuzz_update(b"\x05{\"a\"[}]\"");
        for n in 0..64u8 {
            let v: Vec<u8> = (0..n)
                .map(|i| b"{}[]\"\\:,a1 "[(usize::from(i) * 7 + usize::from(n)) % 11])
                .collect();
            super::fuzz_update(&v);
        }
    }
}
