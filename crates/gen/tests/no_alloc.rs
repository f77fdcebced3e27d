//! The per-packet path allocates nothing: filling batches from templates (every protocol,
//! IMIX, many random flows, VLAN), sending them through a ring, receiving and analyzing them,
//! under an allocator that counts this thread's allocations. (Its own test binary: a global
//! allocator applies to the whole binary.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use cpu::{cycles, Tsc};
use hayate_gen::analyzer::Analyzer;
use hayate_gen::source::Source;
use hayate_gen::template::{Proto, Sizes, Traffic};
use packet::{Batch, Pool};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.realloc(ptr, layout, new)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

#[test]
fn the_packet_path_does_not_allocate() {
    let pool = Pool::with_frames(4096);
    let (a, b) = port::ring::pair("na.a", "na.b", 1024, &pool);
    let mut tx = port::Port::open_tx(&*a, 0).unwrap();
    let mut rx = port::Port::open_rx(&*b, 0).unwrap();
    let tsc = Tsc { hz: 2e9 };
    let cases = [
        (Proto::Udp4, Sizes::Imix, None),
        (Proto::Icmp4, Sizes::Imix, None),
        (Proto::Tcp4, Sizes::Fixed(128), Some(10)),
        (Proto::Udp6, Sizes::Fixed(1518), Some(10)),
    ];
    for (proto, sizes, vlan) in cases {
        let traffic = Traffic {
            proto,
            sizes,
            flows: 100_000,
            random: true,
            vlan,
            ..Traffic::default()
        };
        let t = traffic.compile().unwrap();
        let mut src = Source::new(&traffic, &t, 0);
        let mut an = Analyzer::new(100_000, tsc);
        let mut cache = pool.cache();
        let (mut txb, mut rxb) = (Batch::new(), Batch::new());
        let mut round = |src: &mut Source, an: &mut Analyzer| {
            src.fill(&mut cache, &mut txb, 32, cycles());
            tx.send(&mut txb);
            rx.recv(&mut rxb);
            an.batch(&rxb, cycles());
            rxb.free_into(&mut cache);
        };
        // Warm up: the pool cache takes its first frames from the shared stack.
        for _ in 0..10 {
            round(&mut src, &mut an);
        }
        let before = allocs();
        for _ in 0..10_000 {
            round(&mut src, &mut an);
        }
        assert_eq!(
            allocs() - before,
            0,
            "{proto:?}: allocations on the packet path"
        );
        assert_eq!(an.packets, 10_010 * 32);
        assert_eq!(an.foreign, 0);
        assert_eq!(an.streams()[0].unique, 10_010 * 32);
    }
}
