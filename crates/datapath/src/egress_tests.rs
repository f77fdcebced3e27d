use super::*;
use packet::{Batch, Pool};

const SEC: u64 = 1_000_000_000;

/// A batch of `n` frames of `len` bytes, all in queue `q`.
fn frames(pool: &Pool, n: usize, len: usize, q: u32) -> Batch {
    let mut cache = pool.cache();
    let mut b = Batch::new();
    for _ in 0..n {
        let mut p = cache.alloc_from(&vec![0u8; len]).unwrap();
        p.meta.user = q;
        b.push(p).unwrap();
    }
    b
}

fn egress(text: &str) -> Egress {
    let (_, o) = port::dp_options::split_spec(&format!("null:{text}")).unwrap();
    o.egress
}

/// Offers batches of 32 frames of 1250 bytes (10 kbit each) every `step_ns` for `secs`
/// seconds from t = 1 s, one batch per queue of `queues` in that order each step; returns
/// the frames each queue passed.
fn offer(s: &PortShaper, pool: &Pool, queues: &[u32], step_ns: u64, secs: u64) -> Vec<u64> {
    let batches: Vec<Batch> = queues.iter().map(|&q| frames(pool, 32, 1250, q)).collect();
    let mut passed = vec![0u64; queues.len()];
    let mut t = SEC;
    while t < SEC + secs * SEC {
        for (i, b) in batches.iter().enumerate() {
            passed[i] += u64::from(s.shape(t, b.as_slice()).count_ones());
        }
        t += step_ns;
    }
    for mut b in batches {
        b.free_into(&mut pool.cache());
    }
    passed
}

#[test]
fn a_queues_minimum_holds_under_a_flood_on_another_queue() {
    let pool = Pool::with_frames(128);
    // The port: 10 Mbit/s. Queue 1 guaranteed 2 Mbit/s; queue 2 may take it all.
    let s = PortShaper::new(egress(
        "qos_max_rate=10000,qos_burst=100,queue=1:min_rate=2000:burst=100,queue=2:max_rate=10000:burst=100",
    ));
    // Queue 2 floods first every 100 µs (32 × 10 kbit = 3.2 Gbit/s offered), then queue 1
    // offers as much: the flood has taken the port's room each time queue 1 comes.
    let p = offer(&s, &pool, &[2, 1], 100_000, 2);
    // Queue 1: its 2 s of guarantee (400 frames) and its bucket (10 frames), no less.
    assert!((400..=411).contains(&p[1]), "queue 1 passed {}", p[1]);
    // The port as a whole: 2 s of its cap (2000 frames) and its buckets, no more.
    let total = p[0] + p[1];
    assert!((1990..=2030).contains(&total), "total {total}: {p:?}");
    let q = s.queues();
    assert_eq!(q[0].counts.tx_packets, p[1]);
    assert_eq!(q[0].counts.tx_bytes, p[1] * 1250);
    assert_eq!(q[1].counts.tx_packets, p[0]);
    let offered = 2 * SEC / 100_000 * 32;
    assert_eq!(
        q[1].counts.dropped,
        offered - p[0],
        "every refused frame counted"
    );
}

#[test]
fn a_queues_maximum_caps_it_and_leaves_the_rest_to_others() {
    let pool = Pool::with_frames(128);
    // No port cap: queue 3 is held to 1 Mbit/s, queue 0 (no row) passes everything.
    let s = PortShaper::new(egress("queue=3:max_rate=1000:burst=100"));
    let p = offer(&s, &pool, &[3, 0], 100_000, 2);
    assert!((200..=211).contains(&p[0]), "queue 3 passed {}", p[0]);
    assert_eq!(p[1], 2 * SEC / 100_000 * 32, "queue 0 is not limited");
    let q = s.queues();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].queue, 3);
    assert_eq!(q[0].counts.tx_packets, p[0]);
}

#[test]
fn a_queue_the_port_lacks_is_a_counted_drop_and_no_queues_is_off() {
    let pool = Pool::with_frames(64);
    let s = PortShaper::new(egress("queue=1:max_rate=1000"));
    assert!(s.is_on());
    let mut b = frames(&pool, 5, 100, 4);
    assert_eq!(s.shape(SEC, b.as_slice()), 0);
    assert_eq!(s.unknown(), 5);
    b.free_into(&mut pool.cache());
    // A batch mixing queues: the queue 9 packet (beyond any id) is dropped, the others pass.
    let mut b = frames(&pool, 3, 100, 1);
    b.as_mut_slice()[1].meta.user = 9;
    assert_eq!(s.shape(SEC, b.as_slice()), 0b101);
    assert_eq!(s.unknown(), 6);
    b.free_into(&mut pool.cache());
    let off = PortShaper::new(Egress::default());
    assert!(!off.is_on());
    s.set(Egress::default());
    assert!(!s.is_on());
    assert!(s.queues().is_empty());
}

#[test]
fn set_changes_the_rates_while_running() {
    let pool = Pool::with_frames(64);
    let shapers = Shapers::default();
    shapers.set(5, egress("queue=1:max_rate=13:burst=13"));
    let s = shapers.port(5);
    let mut b = frames(&pool, 32, 1250, 1);
    assert_eq!(
        s.shape(SEC, b.as_slice()).count_ones(),
        1,
        "a 13-kbit bucket: one frame"
    );
    shapers.set(5, egress("queue=1:max_rate=1000:burst=100"));
    assert_eq!(
        s.shape(SEC, b.as_slice()).count_ones(),
        10,
        "the new bucket"
    );
    assert_eq!(s.queues()[0].counts.tx_packets, 11, "counters kept");
    b.free_into(&mut pool.cache());
    assert!(!shapers.port(6).is_on(), "other ports have no queues");
}

#[test]
fn a_super_packet_costs_the_segments_it_stands_for() {
    let pool = Pool::with_frames(8);
    let mut cache = pool.cache();
    // 14 + 20 + 20 header bytes, then 1000 bytes of payload cut at 100: ten segments of
    // 154 bytes.
    let mut frame = vec![0u8; 1054];
    frame[34 + 12] = 5 << 4;
    let mut p = cache.alloc_from(&frame).unwrap();
    p.meta.l4_off = 34;
    assert_eq!(cost(&p), 1054 * 8000, "a plain frame: its bytes");
    assert!(p.set_gso(Some(packet::gso::Gso {
        v6: false,
        ecn: false,
        mss: 100,
        outer: 0,
    })));
    assert_eq!(cost(&p), 10 * 154 * 8000);
    // Headers that do not parse (no L4 offset): its own length.
    p.meta.l4_off = 0;
    assert_eq!(cost(&p), 1054 * 8000);
    cache.free(p);
}

#[test]
fn a_queues_guarantee_counts_against_its_cap() {
    let pool = Pool::with_frames(128);
    // Queue 1: 2 Mbit/s guaranteed, 5 Mbit/s at most, alone on an uncapped port.
    let s = PortShaper::new(egress("queue=1:min_rate=2000:max_rate=5000:burst=100"));
    let p = offer(&s, &pool, &[1], 100_000, 2);
    // 2 s of its cap (1000 frames) and its buckets, not cap and guarantee added (1400).
    assert!((1000..=1021).contains(&p[0]), "queue 1 passed {}", p[0]);
}

#[test]
fn a_queue_id_up_to_0xefff_is_policed_by_its_own_rates() {
    let pool = Pool::with_frames(64);
    let s = PortShaper::new(egress(
        "queue=61439:max_rate=1000:burst=20,queue=300:max_rate=100000",
    ));
    // 20 kbit: two frames of 10 kbit pass at once, the rest of 32 are dropped.
    let b = frames(&pool, 32, 1250, 0xefff);
    assert_eq!(s.shape(SEC, b.as_slice()).count_ones(), 2);
    let q = s.queues();
    assert_eq!((q[0].queue, q[1].queue), (300, 0xefff));
    assert_eq!((q[1].counts.tx_packets, q[1].counts.dropped), (2, 30));
    let b2 = frames(&pool, 4, 1250, 0xf000);
    assert_eq!(s.shape(SEC, b2.as_slice()), 0);
    assert_eq!(s.unknown(), 4);
    for mut b in [b, b2] {
        b.free_into(&mut pool.cache());
    }
}
