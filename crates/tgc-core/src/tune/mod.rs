//! Offline tuning and its committed cache (`000` §6: a few measured points
//! per kernel, warm-up → repetitions → median, cached per ShapeSet point).
//!
//! `tgc tune` ([`search::tune_point`]) measures each packed CPU kernel of a
//! bound graph under a handful of cache-block sizes ([`Blocks`]) on real
//! buffers and writes the winner to a [`Cache`]: a folder of one JSON
//! [`Record`] per key, meant to be committed beside the graphs (as sqlx
//! commits `.sqlx/`). Builds only read it ([`apply`]): nothing is timed at
//! build time, and a kernel without a record keeps the analytic block sizes
//! of [`crate::cpu::packed::CacheModel`] with a note.
//!
//! **The key** of a kernel is the SHA-256 of its [`KeyInputs`]: the tgc
//! version, the target (`cpu-<arch>`), the C compiler's identity and the
//! kernel's canonical text ([`kernel_text`]: its loop nest with concrete
//! extents and the dtypes and shapes of its buffers, everything the printer
//! prints except the plan). The ShapeSet point enters through the extents,
//! so one record serves every point, layer or graph whose kernel is the
//! same. Any edit that changes the kernel, or a new tgc or compiler,
//! changes its key: the old record no longer matches (stale) and
//! `tgc tune --check` reports the kernel as missing.
//!
//! **Integrity.** [`Cache::open`] refuses, with the file and the reason, a
//! record that does not parse under its schema ([`SCHEMA`], no unknown
//! fields), whose `key` is not the hash of its `inputs` or not its file
//! name, whose `digest` (SHA-256 of the record with an empty digest) does
//! not match, or whose plan is invalid ([`Entry::plan_fault`]) — so a
//! hand-edited plan is refused, never trusted. The same checks serve the
//! GPU templates' records ([`gpu`], in the cache's [`gpu::SUBDIR`]):
//! [`Cache`] holds any [`Entry`].

pub mod gpu;
#[cfg(test)]
mod gpu_tests;
pub mod report;
pub mod search;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::cpu::packed::Blocks;
use crate::cpu::{Kernel, Program};

pub use search::{lowered, tune_point, Measured, PointResult, Progress, TuneOptions, Tuned};

/// The record format; a record of another schema is refused.
pub const SCHEMA: &str = "tgc-tune/1";

/// What a record's key is the hash of.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyInputs {
    /// `CARGO_PKG_VERSION` of tgc-core.
    pub tgc: String,
    /// `cpu-<arch>` (Rust's `target_arch` names).
    pub target: String,
    /// The C compiler's `--version` line ([`Toolchain::compiler`]).
    pub compiler: String,
    /// [`kernel_text`].
    pub kernel: String,
}

impl KeyInputs {
    /// The key: lowercase hex SHA-256 of the inputs' JSON.
    pub fn key(&self) -> String {
        sha256_hex(serde_json::to_string(self).expect("KeyInputs serialises").as_bytes())
    }
}

/// The build context every key shares: target and compiler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toolchain {
    /// `cpu-<arch>`.
    pub target: String,
    /// The compiler's first `--version` line without its first word (the
    /// program's name as invoked: `cc`, `gcc` and `x86_64-linux-gnu-gcc`
    /// name one compiler), e.g. `(Debian 12.2.0-14+deb12u1) 12.2.0`.
    pub compiler: String,
}

impl Toolchain {
    /// The toolchain of this machine: its architecture and the compiler
    /// that `tgc_runtime::cpu::compile_shared` runs
    /// (`tgc_runtime::cpu::c_compiler`).
    ///
    /// Errors: the compiler cannot be run, or prints no version.
    pub fn host() -> Result<Toolchain, String> {
        Toolchain::of(std::env::consts::ARCH, tgc_runtime::cpu::c_compiler().1)
    }

    /// The toolchain of target architecture `arch` and the compiler `cmd`
    /// (which gets `--version`).
    ///
    /// Errors: as [`Toolchain::host`].
    pub fn of(arch: &str, mut cmd: std::process::Command) -> Result<Toolchain, String> {
        let shown = format!("{:?}", cmd.get_program());
        let out = cmd.arg("--version").output().map_err(|e| format!("cannot run the C compiler {shown}: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().next().unwrap_or("").trim();
        let version = line.split_once(' ').map_or(line, |(_, rest)| rest).trim();
        if !out.status.success() || version.is_empty() {
            return Err(format!("the C compiler {shown} printed no version"));
        }
        Ok(Toolchain { target: format!("cpu-{arch}"), compiler: version.to_string() })
    }
}

/// The canonical text of kernel `k` of `p`: its loops, reduction or scan,
/// store and value with every buffer renumbered by first appearance, then
/// the dtype and shape of each buffer it touches — what the printer prints,
/// less its name, its Tiny nodes (numbered graph-wide) and its packed plan.
pub fn kernel_text(p: &Program, k: &Kernel) -> String {
    let mut bare = k.clone();
    bare.name.clear();
    bare.nodes.clear();
    bare.packed = None;
    // Renumber buffers and Tiny nodes by first appearance, so the same
    // kernel over other buffers (another layer of a model) has the same text.
    let (text, _) = renumber(&format!("{bare:?}"), "NodeId(");
    let (mut out, order) = renumber(&text, "BufId(");
    for (pos, &b) in order.iter().enumerate() {
        let buf = p.buffer(crate::cpu::BufId(b));
        let shape: Vec<String> = buf.shape.iter().map(|d| d.to_string()).collect();
        let _ = write!(out, "\nbuffer {pos}: {} [{}]", buf.dtype, shape.join(", "));
    }
    out
}

/// `text` with the number after each `prefix` replaced by its rank of first
/// appearance; the numbers in that order.
fn renumber(text: &str, prefix: &str) -> (String, Vec<u32>) {
    let mut order: Vec<u32> = Vec::new();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at + prefix.len()]);
        rest = &rest[at + prefix.len()..];
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        match rest[..digits].parse::<u32>() {
            Ok(n) => {
                let pos = order.iter().position(|&b| b == n).unwrap_or_else(|| {
                    order.push(n);
                    order.len() - 1
                });
                let _ = write!(out, "{pos}");
            }
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    (out, order)
}

/// A ShapeSet point as notes and records show it: `B=8, S=128`.
pub fn point_label(point: &BTreeMap<String, i64>) -> String {
    point.iter().map(|(s, v)| format!("{s}={v}")).collect::<Vec<_>>().join(", ")
}

/// The key inputs of kernel `k` of `p` under `tc`.
pub fn key_inputs(p: &Program, k: &Kernel, tc: &Toolchain) -> KeyInputs {
    KeyInputs {
        tgc: env!("CARGO_PKG_VERSION").to_string(),
        target: tc.target.clone(),
        compiler: tc.compiler.clone(),
        kernel: kernel_text(p, k),
    }
}

/// The kernels of `p` that tuning concerns: packed, with concrete sizes.
pub fn tunable(p: &Program) -> impl Iterator<Item = (usize, &Kernel)> {
    p.kernels.iter().enumerate().filter(|(_, k)| k.packed.is_some() && k.symbols().is_empty())
}

/// One candidate's measurement in a [`Record`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    pub blocks: Blocks,
    /// The median of the repetitions, in nanoseconds (summed over the
    /// kernels that share the key in the tuned graph).
    pub median_ns: u64,
    pub repetitions: usize,
}

/// Where a record was measured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// `model name` of `/proc/cpuinfo`, or `unknown`.
    pub cpu: String,
    /// The kernels' thread pool size during the measurement.
    pub threads: usize,
    pub os: String,
    /// The C compiler's flags for the measured library.
    pub cflags: String,
}

impl Machine {
    /// This machine with `threads` kernel threads.
    pub fn this(threads: usize) -> Machine {
        let cpu = crate::plan::target::cpuinfo("model name").unwrap_or_else(|| "unknown".into());
        Machine { cpu, threads, os: std::env::consts::OS.to_string(), cflags: tgc_runtime::cpu::cflags().join(" ") }
    }
}

/// One tuned kernel: its key and what it is the hash of, the chosen plan
/// and the measurements behind it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// [`SCHEMA`].
    pub schema: String,
    pub key: String,
    pub inputs: KeyInputs,
    /// The chosen block sizes.
    pub plan: Blocks,
    /// The analytic model's block sizes, for comparison.
    pub analytic: Blocks,
    /// Every candidate measured, in the order measured.
    pub timings: Vec<Timing>,
    /// The graph, kernels and ShapeSet point measured, e.g.
    /// `minilm k5, k28 at B=8, S=128`.
    pub measured_on: String,
    pub machine: Machine,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
    /// SHA-256 of the record's JSON with this field empty.
    pub digest: String,
}

impl Entry for Record {
    fn key(&self) -> &str {
        &self.key
    }

    fn digest(&self) -> &str {
        &self.digest
    }

    fn set_digest(&mut self, digest: String) {
        self.digest = digest;
    }

    const SCHEMA: &'static str = SCHEMA;

    fn schema(&self) -> &str {
        &self.schema
    }

    fn inputs_key(&self) -> String {
        self.inputs.key()
    }

    fn plan_fault(&self) -> Option<String> {
        let b = self.plan;
        let (mr, nr) = (crate::cpu::packed::MR, crate::cpu::packed::NR);
        if b.mc == 0 || b.nc == 0 || b.kc == 0 || !b.mc.is_multiple_of(mr) || !b.nc.is_multiple_of(nr) {
            return Some(format!("its plan's block sizes are not positive multiples of MR = {mr} and NR = {nr}"));
        }
        None
    }
}

/// A record a [`Cache`] holds, one JSON file `<key>.json` each: the CPU
/// block sizes ([`Record`]) and the GPU plans ([`gpu::GpuRecord`]).
pub trait Entry: Clone + Serialize + serde::de::DeserializeOwned {
    /// Its key: the hash of its key inputs, and its file's name.
    fn key(&self) -> &str;
    /// The digest it carries.
    fn digest(&self) -> &str;
    fn set_digest(&mut self, digest: String);
    /// The schema a record of this type has.
    const SCHEMA: &'static str;
    /// The schema it says it has.
    fn schema(&self) -> &str;
    /// The hash of its key inputs: what its key must be.
    fn inputs_key(&self) -> String;
    /// Why its plan and timings cannot be trusted, if they cannot (checked
    /// after the digest, so a hand edit is reported as one).
    fn plan_fault(&self) -> Option<String>;

    /// Why its schema or key cannot be trusted, if it cannot.
    fn fault(&self) -> Option<String> {
        if self.schema() != Self::SCHEMA {
            return Some(format!("schema `{}` is not `{}`", self.schema(), Self::SCHEMA));
        }
        if self.key() != self.inputs_key() {
            return Some("its key is not the hash of its inputs".into());
        }
        None
    }

    /// The digest it should carry: SHA-256 of its JSON with the digest empty.
    fn compute_digest(&self) -> String {
        let mut bare = self.clone();
        bare.set_digest(String::new());
        sha256_hex(serde_json::to_string(&bare).expect("a record serialises").as_bytes())
    }
}

/// Why a tuning cache cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("tuning cache {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("tuning record {path} is refused: {why}; delete it and run `tgc tune` again")]
    Refused { path: PathBuf, why: String },
}

/// What a build reads its block sizes from: a cache, and the toolchain
/// whose keys it looks up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    pub cache: Cache,
    pub toolchain: Toolchain,
}

impl Tuning {
    /// [`apply`] to `p`, the program of graph `graph` at `at` (e.g. ` at
    /// B=8, S=128`, or empty): the note for its misses, if any.
    pub fn apply(&self, p: &mut Program, graph: &str, at: &str) -> Option<String> {
        miss_note(graph, at, &apply(p, &self.cache, &self.toolchain))
    }
}

/// A folder of records, `<key>.json` each: [`Record`]s (CPU block sizes)
/// by default, [`gpu::GpuRecord`]s in its [`gpu::SUBDIR`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache<R = Record> {
    dir: PathBuf,
    records: BTreeMap<String, R>,
}

impl<R: Entry> Cache<R> {
    /// Reads every `*.json` of `dir` (none when `dir` does not exist) and
    /// checks each record (see the module doc).
    ///
    /// Errors: [`CacheError::Io`] for a folder or file that cannot be read;
    /// [`CacheError::Refused`] for the first record that fails a check.
    pub fn open(dir: &Path) -> Result<Cache<R>, CacheError> {
        let io = |source| CacheError::Io { path: dir.to_path_buf(), source };
        let mut cache = Cache { dir: dir.to_path_buf(), records: BTreeMap::new() };
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(cache),
            Err(e) => return Err(io(e)),
        };
        let mut paths: Vec<PathBuf> = entries
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<Vec<PathBuf>, _>>()
            .map_err(io)?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for path in paths {
            let refused = |why: String| CacheError::Refused { path: path.clone(), why };
            let meta = std::fs::metadata(&path).map_err(|source| CacheError::Io { path: path.clone(), source })?;
            if meta.len() > MAX_RECORD_BYTES {
                return Err(refused(format!("{} bytes is more than a record's {MAX_RECORD_BYTES}", meta.len())));
            }
            let text =
                std::fs::read_to_string(&path).map_err(|source| CacheError::Io { path: path.clone(), source })?;
            let record: R = serde_json::from_str(&text).map_err(|e| refused(format!("not a record: {e}")))?;
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            if let Some(why) = record.fault() {
                return Err(refused(why));
            }
            if record.key() != stem {
                return Err(refused(format!("its key {} is not its file name", record.key())));
            }
            if record.digest() != record.compute_digest() {
                return Err(refused("its digest does not match its content (edited by hand?)".into()));
            }
            if let Some(why) = record.plan_fault() {
                return Err(refused(why));
            }
            cache.records.insert(record.key().to_string(), record);
        }
        Ok(cache)
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Each record's file, `<dir>/<key>.json`, in key order.
    pub fn paths(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.records.keys().map(|k| self.dir.join(format!("{k}.json")))
    }

    pub fn get(&self, key: &str) -> Option<&R> {
        self.records.get(key)
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Adds or replaces `record` (its digest recomputed) and writes its file,
    /// whole or not at all ([`tgc_runtime::files::write_atomic`]: a tuning
    /// run killed part way leaves no torn record to refuse later).
    ///
    /// Errors: [`CacheError::Io`] when the folder or file cannot be written.
    pub fn put(&mut self, mut record: R) -> Result<PathBuf, CacheError> {
        record.set_digest(record.compute_digest());
        std::fs::create_dir_all(&self.dir).map_err(|source| CacheError::Io { path: self.dir.clone(), source })?;
        let path = self.dir.join(format!("{}.json", record.key()));
        let mut text = serde_json::to_string_pretty(&record).expect("a record serialises");
        text.push('\n');
        tgc_runtime::files::write_atomic(&path, text.as_bytes())
            .map_err(|source| CacheError::Io { path: path.clone(), source })?;
        self.records.insert(record.key().to_string(), record);
        Ok(path)
    }
}

/// The largest record file read (a record is a few kilobytes; a bigger file
/// is not one).
pub const MAX_RECORD_BYTES: u64 = 4 << 20;

/// A tunable kernel of a program with no record in the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Miss {
    /// The kernel's name (`k5`).
    pub kernel: String,
    pub key: String,
}

/// Gives every tunable kernel of `p` ([`tunable`]) its record's block sizes;
/// returns the kernels that have no record (they keep the analytic sizes).
pub fn apply(p: &mut Program, cache: &Cache, tc: &Toolchain) -> Vec<Miss> {
    let mut misses = Vec::new();
    let found: Vec<(usize, Option<Blocks>, String)> = tunable(p)
        .map(|(i, k)| {
            let key = key_inputs(p, k, tc).key();
            (i, cache.get(&key).map(|r| r.plan), key)
        })
        .collect();
    for (i, plan, key) in found {
        match plan {
            Some(b) => p.kernels[i].packed.as_mut().expect("tunable kernels are packed").blocks = b,
            None => misses.push(Miss { kernel: p.kernels[i].name.clone(), key }),
        }
    }
    misses
}

/// The note a build prints for the misses of one program.
pub fn miss_note(graph: &str, at: &str, misses: &[Miss]) -> Option<String> {
    const SHOWN: usize = 6;
    let first = misses.first()?;
    let mut names: Vec<&str> = misses.iter().take(SHOWN).map(|m| m.kernel.as_str()).collect();
    if misses.len() > SHOWN {
        names.push("…");
    }
    let count =
        if misses.len() == 1 { "1 packed kernel".to_string() } else { format!("{} packed kernels", misses.len()) };
    Some(format!(
        "graph `{graph}`{at}: no tuning record for {count} ({}; first key {}): analytic block sizes; run `tgc tune`",
        names.join(", "),
        &first.key[..16]
    ))
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// `secs` after the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (the civil-date
/// algorithm of H. Hinnant, "chrono-Compatible Low-Level Date Algorithms").
pub fn utc_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}
