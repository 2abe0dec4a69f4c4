//! ShapeSet buckets through the build helper's C bodies (`000` §8): a call
//! whose `padded` dims are smaller than a point's runs that point's body on
//! zero-filled inputs and gets its outputs cut back. `row_mean` averages
//! over a padded axis, so the bucket shows in the result; the same test
//! for `kernel!`'s Rust bodies is the workspace's `tests/buckets.rs`.

use tgc_build_demo::row_mean;

fn ones(r: usize, c: usize) -> Vec<f32> {
    vec![1.0; r * c]
}

fn mean(r: usize, c: usize) -> Vec<f32> {
    let mut y = vec![0.0f32; r];
    row_mean::run(&ones(r, c), &mut y, r, c).unwrap();
    y
}

#[test]
fn a_call_runs_the_smallest_bucket_that_holds_it() {
    assert_eq!(mean(4, 8), [1.0; 4], "a point exactly");
    assert_eq!(mean(3, 5), [5.0 / 8.0; 3], "3 × 5 in 4 × 8");
    assert_eq!(mean(2, 12), [12.0 / 16.0; 2], "2 × 12 in 4 × 16");
    assert_eq!(mean(5, 3), [1.0; 5], "past every bucket: the generic body");
}
