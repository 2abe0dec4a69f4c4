/// The (batch, sequence) shapes the encoder is specialised for (ShapeSet
/// points of `build.rs`, which includes this file), smallest first. A batch
/// of sentences is padded to the first bucket that holds it (see
/// `bucket_for`); the last bucket's sequence length is the longest input:
/// longer sentences are truncated to it.
pub const BUCKETS: [(usize, usize); 3] = [(1, 16), (8, 32), (8, 128)];
