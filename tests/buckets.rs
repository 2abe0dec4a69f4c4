//! ShapeSet buckets (`000` §8): a call whose `padded` dims are smaller
//! than a ShapeSet point's runs that point's body on zero-filled inputs and
//! gets its outputs cut back — through `kernel!` (Rust bodies) here, and
//! through the build helper (C bodies) in `examples/build-helper`.
//!
//! The graph averages over a padded axis, so the bucket is visible in the
//! result: the mean is over the point's length, zeros included (the graph
//! states that padding is harmless only where it is; here it is not, on
//! purpose).

tgc::kernel!(row_mean:
    graph<R padded, C padded> main(x: f32[R, C]) -> (y: f32[R]) {
        y = mean(x, axes=[1])
        return y
    },
    shapes(R = 4, C in [8, 16])
);

fn ones(r: usize, c: usize) -> Vec<f32> {
    vec![1.0; r * c]
}

#[test]
fn a_call_runs_the_smallest_bucket_that_holds_it() {
    // Exactly a point: the mean of ones.
    let mut y = vec![0.0f32; 4];
    row_mean::run(&ones(4, 8), &mut y, 4, 8).unwrap();
    assert_eq!(y, [1.0; 4]);
    // 3 × 5 fits 4 × 8 (not 4 × 16): five ones and three zeros per row.
    let mut y = vec![0.0f32; 3];
    row_mean::run(&ones(3, 5), &mut y, 3, 5).unwrap();
    assert_eq!(y, [5.0 / 8.0; 3]);
    // 2 × 12 fits only 4 × 16.
    let mut y = vec![0.0f32; 2];
    row_mean::run(&ones(2, 12), &mut y, 2, 12).unwrap();
    assert_eq!(y, [12.0 / 16.0; 2]);
    // Beyond every point: the generic body, no padding.
    let mut y = vec![0.0f32; 5];
    row_mean::run(&ones(5, 3), &mut y, 5, 3).unwrap();
    assert_eq!(y, [1.0; 5]);
    let mut y = vec![0.0f32; 1];
    row_mean::run(&ones(1, 20), &mut y, 1, 20).unwrap();
    assert_eq!(y, [1.0]);
}

#[test]
fn padded_calls_still_check_their_arguments() {
    let mut y = vec![0.0f32; 3];
    let e = row_mean::run(&ones(3, 4), &mut y, 3, 5).unwrap_err();
    assert!(matches!(e, tgc::Error::LengthMismatch { .. }), "{e}");
}
