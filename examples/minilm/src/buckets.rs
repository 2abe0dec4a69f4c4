/// The (batch, sequence) shapes the encoder is specialised for (ShapeSet
/// points of `build.rs`, which includes this file), smallest first. A
/// smaller batch runs the smallest bucket that holds it, padded by the
/// encoder (its `B` and `S` are `padded` in `graphs/minilm.tgc`); the last
/// bucket's sequence length is the longest input: longer sentences are
/// truncated to it.
pub const BUCKETS: [(usize, usize); 3] = [(1, 16), (8, 32), (8, 128)];
