//! Wall time and peak memory of each compile stage: `tgc compile --timings`
//! prints them, `scripts/bench_compile.sh` tabulates them.
//!
//! Peak memory is the process's resident high-water mark (`VmHWM` of
//! `/proc/self/status`), reset before each stage by writing `5` to
//! `/proc/self/clear_refs` (Linux `proc(5)`), so each stage reports its own
//! peak. Elsewhere, or where the reset is refused, no peak is reported
//! rather than a wrong one.

use std::time::Instant;

/// One stage's measurement.
#[derive(Clone, Debug)]
pub struct StageTime {
    pub stage: String,
    /// Wall time in seconds.
    pub seconds: f64,
    /// The resident high-water mark during the stage, in bytes (`None`
    /// where it cannot be measured).
    pub peak_bytes: Option<u64>,
}

/// The stages measured so far, in order.
#[derive(Clone, Debug, Default)]
pub struct Timings {
    pub stages: Vec<StageTime>,
}

impl Timings {
    /// Runs `f` as stage `stage`, recording its wall time and peak memory.
    pub fn time<T>(&mut self, stage: &str, f: impl FnOnce() -> T) -> T {
        let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        let start = Instant::now();
        let out = f();
        let seconds = start.elapsed().as_secs_f64();
        let peak_bytes = if reset { resident_high_water_mark() } else { None };
        self.stages.push(StageTime { stage: stage.to_string(), seconds, peak_bytes });
        out
    }

    /// A table: one line per stage (seconds, peak MiB), then the total time.
    pub fn report(&self) -> String {
        let width = self.stages.iter().map(|s| s.stage.len()).max().unwrap_or(0).max("stage".len());
        let mut out = format!("{:width$}  {:>9}  {:>9}\n", "stage", "seconds", "peak MiB");
        for s in &self.stages {
            let peak = s.peak_bytes.map_or("-".to_string(), |b| format!("{:.1}", b as f64 / (1 << 20) as f64));
            out.push_str(&format!("{:width$}  {:>9.3}  {:>9}\n", s.stage, s.seconds, peak));
        }
        let total: f64 = self.stages.iter().map(|s| s.seconds).sum();
        out.push_str(&format!("{:width$}  {:>9.3}\n", "total", total));
        out
    }
}

/// `VmHWM` of `/proc/self/status` in bytes.
fn resident_high_water_mark() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each stage is recorded in order with its own time; a stage that
    /// touches 64 MiB reports a peak of at least that where peaks are
    /// measured.
    #[test]
    fn stages_are_recorded_with_time_and_peak() {
        let mut t = Timings::default();
        let sum = t.time("touch", || {
            let v = vec![1u8; 64 << 20];
            v.iter().map(|&b| b as u64).sum::<u64>()
        });
        assert_eq!(sum, 64 << 20);
        t.time("sleep", || std::thread::sleep(std::time::Duration::from_millis(20)));
        let names: Vec<&str> = t.stages.iter().map(|s| s.stage.as_str()).collect();
        assert_eq!(names, ["touch", "sleep"]);
        assert!(t.stages[1].seconds >= 0.02, "{:?}", t.stages[1]);
        if let Some(peak) = t.stages[0].peak_bytes {
            assert!(peak >= 64 << 20, "{peak}");
        }
        let report = t.report();
        assert!(report.starts_with("stage") && report.contains("touch") && report.contains("total"), "{report}");
    }
}
