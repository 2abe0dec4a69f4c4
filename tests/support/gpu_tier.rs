// The GPU test tier's two rules (`scripts/gpu_tests.sh`, DESIGN.md), one
// definition `include!`d by every test binary with a GPU part:
// `tests/sm80_kernel.rs`, tgc-runtime's `cuda` tests, the build helper's
// `sm80.rs` and `sm90.rs`, and tgc-cli's `cli.rs`, `gpu_plans.rs` and
// `tune.rs`.

/// Whether the GPU tier is required (`TGC_GPU=1`, set by
/// `scripts/gpu_tests.sh`): a GPU part may then not skip, for want of a
/// device or for any other reason.
pub fn required() -> bool {
    std::env::var("TGC_GPU").is_ok_and(|v| v == "1")
}

/// Records that the GPU comparison `name` ran and agreed: `gpu-compared:
/// NAME` on stderr, and `NAME` as one line appended to the file that
/// `TGC_GPU_RAN_LOG` names, if set (`scripts/gpu_tests.sh` counts those
/// lines and fails below its minimum). One `write` per line, so the lines
/// of tests running on several threads do not interleave.
///
/// Panics when the log cannot be written: a count that silently misses a
/// comparison would fail the script for the wrong reason.
pub fn compared(name: &str) {
    use std::io::Write;
    eprintln!("gpu-compared: {name}");
    if let Some(log) = std::env::var_os("TGC_GPU_RAN_LOG") {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap_or_else(|e| panic!("TGC_GPU_RAN_LOG {}: {e}", std::path::Path::new(&log).display()));
        f.write_all(format!("{name}\n").as_bytes())
            .unwrap_or_else(|e| panic!("TGC_GPU_RAN_LOG {}: {e}", std::path::Path::new(&log).display()));
    }
}
