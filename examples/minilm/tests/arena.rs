//! The encoder's Memory Arena (`000` §8, `tgc_core::cpu::arena`): at each
//! bucket the generated `encoder::ARENAS` says what the entry point takes
//! for its temporaries against what they would take side by side; this
//! prints both, checks them against the arena of the lowered graph, and
//! asserts sharing pays.

use tgc_core::cpu::arena;
use tgc_core::pipeline::{load, Format};
use tgc_minilm::{encoder, BUCKETS};

#[test]
fn the_arena_is_far_smaller_than_the_temporaries() {
    let g = load(include_str!("../graphs/minilm.tgc"), Format::Dsl, None).expect("minilm.tgc").graph;
    assert_eq!(encoder::ARENAS.len(), BUCKETS.len(), "one arena per bucket");
    for (a, (b, s)) in encoder::ARENAS.iter().zip(BUCKETS) {
        assert_eq!(a.point, [("B", b as i64), ("S", s as i64)]);
        let mib = |n: u64| n as f64 / (1 << 20) as f64;
        println!("{b}×{s}: arena {:.2} MiB, temporaries unshared {:.2} MiB", mib(a.peak_bytes), mib(a.sum_bytes));
        // Six layers of the same shapes: one layer's worth of slots.
        assert!(
            a.peak_bytes * 4 < a.sum_bytes,
            "{b}×{s}: the arena ({} B) is not under a quarter of the sum ({} B)",
            a.peak_bytes,
            a.sum_bytes
        );
        let dims = [("B".to_string(), b as i64), ("S".to_string(), s as i64)].into_iter().collect();
        let program = tgc_core::cpu::lower(&g.bind(&dims).expect("bind")).expect("lowers");
        let plan = arena::plan(&program);
        let none = |_: &str| None;
        assert_eq!(plan.bytes(&none).unwrap() as u64, a.peak_bytes, "{b}×{s}: ARENAS against the lowering");
        assert_eq!(plan.unshared_bytes(&none).unwrap() as u64, a.sum_bytes, "{b}×{s}");
    }
}
