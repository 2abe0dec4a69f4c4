//! The committed tuning cache `tgc-tune/` (written by `tgc tune`, read by
//! `build.rs`) has a valid record for every packed kernel of every bucket:
//! the check `tgc tune --check` makes, for the buckets of `src/buckets.rs`.
//! It fails when the graph, tgc or the C compiler changed since the cache
//! was written; the message says how to tune again.

use std::collections::BTreeMap;
use std::path::Path;

use tgc_core::pipeline::{load, Format};
use tgc_core::tune::{self, Cache, Toolchain};
use tgc_minilm::BUCKETS;

#[test]
fn every_bucket_of_the_encoder_has_a_tuning_record() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(dir.join("graphs/minilm.tgc")).unwrap();
    let graph = load(&text, Format::Dsl, None).unwrap().graph;
    let cache = Cache::open(&dir.join("tgc-tune")).unwrap_or_else(|e| panic!("{e}"));
    let tc = Toolchain::host().unwrap();
    let mut missing = Vec::new();
    let mut kernels = 0;
    for (b, s) in BUCKETS {
        let point = BTreeMap::from([("B".to_string(), b as i64), ("S".to_string(), s as i64)]);
        let mut p = tgc_core::cpu::lower(&graph.bind(&point).unwrap()).unwrap();
        kernels += tune::tunable(&p).count();
        missing.extend(tune::apply(&mut p, &cache, &tc).into_iter().map(|m| format!("{b}×{s} {}", m.kernel)));
    }
    assert!(kernels > 0);
    assert!(
        missing.is_empty(),
        "no tuning record for {} (C compiler {:?}): run `target/release/tgc tune examples/minilm/graphs/minilm.tgc \
         --point B=1,S=16 --point B=8,S=32 --point B=8,S=128 --cache examples/minilm/tgc-tune`",
        missing.join(", "),
        tc.compiler
    );
}
