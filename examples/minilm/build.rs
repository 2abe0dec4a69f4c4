//! Compiles `graphs/minilm.tgc` (the whole encoder, one graph) to C with the
//! system C compiler, specialised for the batch × sequence buckets of
//! `src/buckets.rs`, with the block sizes `tgc tune` measured (the
//! committed cache `tgc-tune/`, see docs/tuning.md), and writes its typed Rust
//! module, with the model `encoder::Model`, to `$OUT_DIR/minilm_kernels.rs`.

include!("src/buckets.rs");

fn main() {
    // A model: the token ids and the mask are given to each run, the
    // weights are loaded once into its ConstPool.
    let mut kernels = tgc_core::build::Kernels::new().kernel("encoder", "graphs/minilm.tgc").model(&["ids", "mask"]);
    for (b, s) in BUCKETS {
        kernels = kernels.shapes(&[("B", b as i64), ("S", s as i64)]);
    }
    if let Err(e) = kernels.opt_level(3).tuning("tgc-tune").compile("minilm_kernels") {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
