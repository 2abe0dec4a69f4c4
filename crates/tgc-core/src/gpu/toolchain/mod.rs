//! The CUDA toolchain: finding it, compiling with NVRTC, and inspecting what
//! came out with ptxas and cuobjdump. No GPU is needed for any of it.
//!
//! `scripts/setup.sh` installs the registry's CUDA 13.0 wheels
//! (`nvidia-cuda-nvrtc`, `-nvcc` for ptxas, `-cuobjdump`, `-nvdisasm`,
//! `-crt`, `-cccl`) into `.toolchain/cuda/` at the repository root; their
//! files land in `nvidia/cu13/{bin,lib,include}`, a CUDA-toolkit layout.
//! [`Toolchain::locate`] looks, in order, at:
//!
//! 1. `$TGC_CUDA_ROOT`, a folder with `bin/`, `lib/` (or `lib64/`) and
//!    `include/` — the wheels' `nvidia/cu13` or a CUDA 13 install such as
//!    `/usr/local/cuda`;
//! 2. `.toolchain/cuda/nvidia/cu13` in the current directory, in
//!    `$CARGO_MANIFEST_DIR` (a build script's or test's crate) and in this
//!    crate's source folder, or in any folder above them.
//!
//! Invariants:
//!
//! - Nothing here panics on a missing or broken toolchain: every failure is
//!   an [`Error`] (a missing toolchain names the places searched and the
//!   set-up command). cudarc panics when it cannot load `libnvrtc`, so
//!   `nvrtc.rs` loads the library by its full path first and checks with
//!   cudarc's non-panicking probe before any cudarc call.
//! - NVRTC is loaded at most once per process (cudarc keeps one library);
//!   a second [`Toolchain`] with another root is refused rather than
//!   silently compiled with the first one's NVRTC.
//! - NVRTC must be CUDA 13.0: the GPU machines' driver (580) rejects PTX of
//!   a newer toolkit (`CUDA_ERROR_UNSUPPORTED_PTX_VERSION`).

mod nvrtc;
mod resources;
mod sass;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use nvrtc::Compiled;
pub use resources::{parse_ptxas_verbose, Resources};
pub use sass::sass_opcodes;

/// The environment variable that overrides where the toolchain is looked for.
pub const ROOT_ENV: &str = "TGC_CUDA_ROOT";
/// Where `scripts/setup.sh` installs the wheels, relative to the repository root.
pub const LOCAL_DIR: &str = ".toolchain/cuda/nvidia/cu13";
/// The command that installs the toolchain.
pub const SETUP_COMMAND: &str = "bash scripts/setup.sh";

/// A real GPU architecture that tgc compiles for (`000` §1.7 targets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    /// Ampere (A100): `mma.sync`, `cp.async`, `ldmatrix`.
    Sm80,
    /// Hopper (H100) with the architecture-specific features (`wgmma`, TMA).
    Sm90a,
}

impl Arch {
    /// The real architecture name of `-arch=` and of ptxas: `sm_80`, `sm_90a`.
    pub fn sm(self) -> &'static str {
        match self {
            Arch::Sm80 => "sm_80",
            Arch::Sm90a => "sm_90a",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.sm())
    }
}

/// What can go wrong with the toolchain. None of these is a bug in tgc's
/// input; all of them name what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable toolchain: `missing` is the first file not found.
    #[error(
        "CUDA toolchain not found ({missing}); searched: {searched}. Run `{SETUP_COMMAND}` \
         at the repository root, or set {ROOT_ENV} to a CUDA 13.0 folder with bin/, lib/ and include/",
        searched = display_paths(.searched)
    )]
    Missing { missing: String, searched: Vec<PathBuf> },
    /// NVRTC could not be loaded, or is not the one this toolchain holds.
    #[error("cannot use NVRTC at {path}: {reason}")]
    Nvrtc { path: PathBuf, reason: String },
    /// NVRTC rejected the source; `log` is its full program log.
    #[error("NVRTC could not compile `{name}` for {arch}:\n{log}")]
    Compile { name: String, arch: Arch, log: String },
    /// A tool ran but failed; `output` is what it printed.
    #[error("{tool} failed ({status}):\n{output}")]
    Tool { tool: String, status: String, output: String },
    /// A tool's output did not read as expected.
    #[error("unexpected {tool} output: {detail}")]
    Parse { tool: &'static str, detail: String },
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
}

fn display_paths(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

/// A located CUDA toolchain: the folder with `bin/ptxas`, `bin/cuobjdump`
/// and `lib/libnvrtc.so.13`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolchain {
    root: PathBuf,
    lib: PathBuf,
}

impl Toolchain {
    /// Finds the toolchain as the module doc describes; [`Error::Missing`]
    /// lists every place tried.
    pub fn locate() -> Result<Toolchain, Error> {
        if let Some(root) = std::env::var_os(ROOT_ENV) {
            return Toolchain::at(PathBuf::from(root));
        }
        let mut starts: Vec<PathBuf> = Vec::new();
        if let Ok(dir) = std::env::current_dir() {
            starts.push(dir);
        }
        if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
            starts.push(PathBuf::from(dir));
        }
        starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        let mut searched = Vec::new();
        for start in &starts {
            for dir in start.ancestors() {
                let candidate = dir.join(LOCAL_DIR);
                if candidate.is_dir() {
                    return Toolchain::at(candidate);
                }
                if !searched.contains(&candidate) {
                    searched.push(candidate);
                }
            }
        }
        Err(Error::Missing { missing: LOCAL_DIR.to_string(), searched })
    }

    /// The toolchain in `root` (a folder with `bin/`, `lib/` or `lib64/`),
    /// if its NVRTC library, ptxas and cuobjdump are there.
    pub fn at(root: impl Into<PathBuf>) -> Result<Toolchain, Error> {
        let root = root.into();
        let missing =
            |what: &Path| Error::Missing { missing: what.display().to_string(), searched: vec![root.clone()] };
        let libs = [root.join("lib/libnvrtc.so.13"), root.join("lib64/libnvrtc.so.13")];
        let lib = libs.iter().find(|p| p.is_file()).ok_or_else(|| missing(&libs[0]))?.clone();
        for tool in ["ptxas", "cuobjdump"] {
            let path = root.join("bin").join(tool);
            if !path.is_file() {
                return Err(missing(&path));
            }
        }
        Ok(Toolchain { root, lib })
    }

    /// The toolchain's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The NVRTC shared library this toolchain loads.
    pub fn nvrtc_library(&self) -> &Path {
        &self.lib
    }

    /// Header folders for NVRTC's `-I`: CUDA's own `include/` and, from the
    /// `cccl` wheel, `include/cccl` (libcu++, CUB), where they exist.
    pub fn include_dirs(&self) -> Vec<PathBuf> {
        [self.root.join("include"), self.root.join("include/cccl")].into_iter().filter(|p| p.is_dir()).collect()
    }

    fn tool(&self, name: &str) -> PathBuf {
        self.root.join("bin").join(name)
    }

    /// Runs `bin/<name>` with `args`; its stdout and stderr together on
    /// success, [`Error::Tool`] with both on a non-zero exit.
    fn run(&self, name: &str, args: &[&std::ffi::OsStr]) -> Result<String, Error> {
        let out = Command::new(self.tool(name))
            .args(args)
            .output()
            .map_err(|source| Error::Io { context: format!("running {}", self.tool(name).display()), source })?;
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            return Err(Error::Tool { tool: name.to_string(), status: out.status.to_string(), output: text });
        }
        Ok(text)
    }
}

/// A scratch folder under the system temp dir, removed on drop: ptxas and
/// cuobjdump read and write files only.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, Error> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tgc-cuda-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|source| Error::Io { context: format!("creating {}", dir.display()), source })?;
        Ok(Scratch(dir))
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, Error> {
        let path = self.0.join(name);
        std::fs::write(&path, bytes)
            .map_err(|source| Error::Io { context: format!("writing {}", path.display()), source })?;
        Ok(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
