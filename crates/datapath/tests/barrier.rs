//! The datapath half of an OpenFlow barrier: once the control side has published new tables
//! (the agent then sends the BARRIER reply), the next packet meets them, never a megaflow
//! cached from the old ones. Each thread compares the generation after every receive, before
//! any lookup, so no wait is needed — this test holds that property, for a sleeping and for a
//! busy-polling thread, with a translator that makes every change flush the caches and with
//! the real pipeline, whose flow changes are revalidated instead (megaflows no change can
//! affect are kept; the one the change affects must not answer again).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{mask_of, udp, Fake, Logic};
use datapath::{Datapath, DpConfig, IdleConfig};
use packet::{Batch, Field, Pool};
use pipeline::{
    Action, Control, DpAction, FlowMod, FlowModCommand, Instruction, Match, PipelineConfig,
};
use port::ring;
use port::Port;

/// The outside ends of the switch's ports (rx, tx), indexed by port - 1.
type Outside = Vec<(Box<dyn port::RxQueue>, Box<dyn port::TxQueue>)>;

fn output_to(port: u32) -> Logic {
    Box::new(move |_k, out| {
        out.mask = mask_of(&[Field::InPort]);
        out.actions.push(DpAction::Output(port));
    })
}

fn barrier_holds(cfg: DpConfig) {
    let pool = Pool::with_frames(4096);
    let gen = Arc::new(AtomicU64::new(1));
    let logic = Arc::new(Mutex::new(output_to(2)));
    let mut b = Datapath::builder().pool(pool.clone()).config(cfg);
    let mut outside: Outside = Vec::new();
    for p in 1..=3u32 {
        let (sw, out) = ring::pair(&format!("bsw{p}"), &format!("bout{p}"), 256, &pool);
        outside.push((out.open_rx(0).unwrap(), out.open_tx(0).unwrap()));
        b = b.port(p, sw);
    }
    let (g, l) = (gen.clone(), logic.clone());
    let mut running = b
        .upcall_factory(move |_| {
            Box::new(Fake {
                gen: g.clone(),
                logic: l.clone(),
                meter: None,
            })
        })
        .threads(vec![None])
        .start()
        .unwrap();
    let mut cache = pool.cache();
    let mut send_and_see = |outside: &mut Outside, sport: u16| -> Option<usize> {
        let mut batch = Batch::new();
        batch
            .push(cache.alloc_from(&udp(sport, [10, 0, 0, 2])).unwrap())
            .unwrap();
        assert_eq!(outside[0].1.send(&mut batch), 1);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            for (i, (rx, _)) in outside.iter_mut().enumerate().skip(1) {
                let mut got = Batch::new();
                if rx.recv(&mut got) > 0 {
                    got.free_into(&mut cache);
                    return Some(i + 1);
                }
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        None
    };
    for round in 0..20u16 {
        let (old, new): (usize, u32) = if round % 2 == 0 { (2, 3) } else { (3, 2) };
        assert_eq!(send_and_see(&mut outside, 1000 + round), Some(old));
        // The control side: new tables, then a new generation; the reply would go out now.
        *logic.lock().unwrap() = output_to(new);
        gen.fetch_add(1, Ordering::SeqCst);
        assert_eq!(
            send_and_see(&mut outside, 1000 + round),
            Some(new as usize),
            "round {round}: a packet after the barrier met a stale megaflow"
        );
    }
    running.stop();
}

#[test]
fn barrier_reaches_a_sleeping_thread() {
    barrier_holds(DpConfig::default());
}

#[test]
fn barrier_reaches_a_busy_polling_thread() {
    barrier_holds(DpConfig {
        idle: IdleConfig {
            sleep: false,
            ..IdleConfig::default()
        },
        ..DpConfig::default()
    });
}

fn in_port_to(port: u32, command: FlowModCommand) -> FlowMod {
    let mut m = Match::ANY;
    m.set_exact(Field::InPort, 1);
    FlowMod {
        command,
        ..FlowMod::add(
            0,
            100,
            m,
            vec![Instruction::ApplyActions(vec![Action::Output {
                port,
                max_len: 0,
            }])],
        )
    }
}

/// The same rounds on the real pipeline: each barrier publishes a change no packet meets
/// (kept megaflows) beside the one that redirects the stream (revalidated away).
fn barrier_holds_on_the_pipeline(cfg: DpConfig, tag: &str) {
    let pool = Pool::with_frames(4096);
    let (mut control, cell) = Control::new(PipelineConfig::default());
    control
        .flow_mod(&in_port_to(2, FlowModCommand::Add))
        .unwrap();
    control.publish();
    let mut b = Datapath::builder()
        .pool(pool.clone())
        .config(cfg)
        .pipeline(cell);
    let mut outside: Outside = Vec::new();
    for p in 1..=3u32 {
        let (sw, out) = ring::pair(
            &format!("r{tag}sw{p}"),
            &format!("r{tag}out{p}"),
            256,
            &pool,
        );
        outside.push((out.open_rx(0).unwrap(), out.open_tx(0).unwrap()));
        b = b.port(p, sw);
    }
    let mut running = b.threads(vec![None]).start().unwrap();
    let mut cache = pool.cache();
    let mut send_and_see = |outside: &mut Outside, sport: u16| -> Option<usize> {
        let mut batch = Batch::new();
        batch
            .push(cache.alloc_from(&udp(sport, [10, 0, 0, 2])).unwrap())
            .unwrap();
        assert_eq!(outside[0].1.send(&mut batch), 1);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            for (i, (rx, _)) in outside.iter_mut().enumerate().skip(1) {
                let mut got = Batch::new();
                if rx.recv(&mut got) > 0 {
                    got.free_into(&mut cache);
                    return Some(i + 1);
                }
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        None
    };
    for round in 0..20u16 {
        let (old, new): (usize, u32) = if round % 2 == 0 { (2, 3) } else { (3, 2) };
        assert_eq!(send_and_see(&mut outside, 1000 + round), Some(old));
        let mut other = Match::ANY;
        other.set_exact(Field::InPort, 3);
        control
            .flow_mod(&FlowMod::add(0, 100 + round, other, vec![]))
            .unwrap();
        control
            .flow_mod(&in_port_to(new, FlowModCommand::ModifyStrict))
            .unwrap();
        // The barrier: publish, then the reply would go out.
        control.publish();
        assert_eq!(
            send_and_see(&mut outside, 1000 + round),
            Some(new as usize),
            "round {round}: a packet after the barrier met a stale megaflow"
        );
    }
    let st = running.stats();
    assert_eq!(st.cache_flushes, 0, "{st:?}");
    assert!(st.megaflow_invalidated >= 20, "{st:?}");
    running.stop();
}

#[test]
fn barrier_reaches_a_sleeping_thread_on_the_pipeline() {
    barrier_holds_on_the_pipeline(DpConfig::default(), "s");
}

#[test]
fn barrier_reaches_a_busy_polling_thread_on_the_pipeline() {
    barrier_holds_on_the_pipeline(
        DpConfig {
            idle: IdleConfig {
                sleep: false,
                ..IdleConfig::default()
            },
            ..DpConfig::default()
        },
        "b",
    );
}
