//! The CUDA toolchain: finding it, compiling with NVRTC, and inspecting what
//! came out with ptxas and cuobjdump. No GPU is needed for any of it.
//!
//! The toolchain is the registry's CUDA 13.0 wheels ([`WHEELS`]:
//! `nvidia-cuda-nvrtc`, `-nvcc` for ptxas, `-cuobjdump`, `-nvdisasm`,
//! `-crt`, `-cccl`), whose files land in `nvidia/cu13/{bin,lib,include}`,
//! a CUDA-toolkit layout, or a CUDA 13.0 install. `scripts/setup.sh`
//! installs the wheels into `.toolchain/cuda/` at this repository's root;
//! `tgc toolchain install DIR` installs them anywhere (a user's crate).
//! [`Toolchain::locate`] looks, in order, at:
//!
//! 1. `$TGC_CUDA_ROOT`, a folder with `bin/`, `lib/` (or `lib64/`) and
//!    `include/` — the wheels' `nvidia/cu13` or a CUDA 13 install; when
//!    set, nothing else is tried;
//! 2. `.toolchain/cuda/nvidia/cu13` in the current directory, in
//!    `$CARGO_MANIFEST_DIR` (a build script's or test's crate) and in this
//!    crate's source folder, or in any folder above them;
//! 3. `$CUDA_HOME`, `$CUDA_PATH` and `/usr/local/cuda` (a system install);
//! 4. `nvidia/cu13` in the active Python environment's site-packages
//!    (`$VIRTUAL_ENV`, then what `python3`'s `sysconfig` and `site` name:
//!    `pip install` of the wheels there).
//!
//! A place that exists but lacks a file is passed over with why; when no
//! place has a toolchain, [`Error::Missing`] lists every place and why,
//! with the commands that install one.
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

pub use nvrtc::{ptxas_advisories, Compiled};
pub use resources::{parse_ptxas_verbose, Resources};
pub use sass::{sass_functions, sass_opcodes, Function, Instruction};

/// The environment variable that overrides where the toolchain is looked for.
pub const ROOT_ENV: &str = "TGC_CUDA_ROOT";
/// Where `scripts/setup.sh` installs the wheels, relative to the repository root.
pub const LOCAL_DIR: &str = ".toolchain/cuda/nvidia/cu13";
/// The command that installs the toolchain in this repository.
pub const SETUP_COMMAND: &str = "bash scripts/setup.sh";
/// The command that installs the toolchain into a folder of the user's
/// choice (then `TGC_CUDA_ROOT=DIR/nvidia/cu13`).
pub const INSTALL_COMMAND: &str = "tgc toolchain install DIR";
/// The pinned wheels of the toolchain (`scripts/setup.sh`'s list): CUDA
/// 13.0 because the GPU machines' driver (580) rejects PTX of a newer
/// toolkit; cuobjdump and nvdisasm have no 13.0 wheel (the first is
/// 13.2.51), and only read cubins, so a newer one is harmless.
pub const WHEELS: &[&str] = &[
    "nvidia-cuda-nvrtc==13.0.88",
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-cccl==13.0.85",
    "nvidia-cuda-cuobjdump==13.2.51",
    "nvidia-cuda-nvdisasm==13.2.51",
];
/// Where the wheels put the toolkit inside the folder pip installs into.
pub const WHEEL_SUBDIR: &str = "nvidia/cu13";

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
    /// No usable toolchain: `missing` is the first file not found (of the
    /// last place tried), `searched` every place with why it was passed
    /// over.
    #[error(
        "CUDA toolchain not found ({missing}); searched:\n{searched}\nInstall the CUDA 13.0 wheels with \
         `{INSTALL_COMMAND}` and set {ROOT_ENV}=DIR/{WHEEL_SUBDIR} (in tgc's repository: `{SETUP_COMMAND}`), or set \
         {ROOT_ENV} to a CUDA 13.0 folder with bin/, lib/ and include/",
        searched = display_places(.searched)
    )]
    Missing { missing: String, searched: Vec<(PathBuf, String)> },
    /// NVRTC could not be loaded, or is not the one this toolchain holds.
    #[error("cannot use NVRTC at {path}: {reason}")]
    Nvrtc { path: PathBuf, reason: String },
    /// NVRTC rejected the source; `log` is its full program log.
    #[error("NVRTC could not compile `{name}` for {arch}:\n{log}")]
    Compile { name: String, arch: Arch, log: String },
    /// NVRTC compiled the source, but ptxas reported a C75xx advisory in
    /// the log: it changed the code behind the source's back, e.g. C7519,
    /// a `warpgroup.arrive` injected before a `wgmma` whose operands were
    /// written after the last `wgmma.fence` (a stall the source did not
    /// ask for). `advisories` are those lines of `log`.
    #[error(
        "ptxas changed `{name}` for {arch} behind its source (a C75xx advisory, an error for tgc's kernels):\n{}",
        advisories.join("\n")
    )]
    Advisory { name: String, arch: Arch, advisories: Vec<String>, log: String },
    /// A tool ran but failed; `output` is what it printed.
    #[error("{tool} failed ({status}):\n{output}")]
    Tool { tool: String, status: String, output: String },
    /// A tool's output did not read as expected.
    #[error("unexpected {tool} output: {detail}")]
    Parse { tool: &'static str, detail: String },
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
}

fn display_places(places: &[(PathBuf, String)]) -> String {
    let shown: Vec<String> = places.iter().map(|(p, why)| format!("  {}: {why}", p.display())).collect();
    shown.join("\n")
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
        let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(root) = env(ROOT_ENV) {
            return Toolchain::at(PathBuf::from(root));
        }
        let mut starts: Vec<PathBuf> = Vec::new();
        if let Ok(dir) = std::env::current_dir() {
            starts.push(dir);
        }
        starts.extend(env("CARGO_MANIFEST_DIR").map(PathBuf::from));
        starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        let mut places: Vec<PathBuf> = Vec::new();
        for start in &starts {
            for dir in start.ancestors() {
                places.push(dir.join(LOCAL_DIR));
            }
        }
        places.extend(["CUDA_HOME", "CUDA_PATH"].into_iter().filter_map(env).map(PathBuf::from));
        places.push(PathBuf::from("/usr/local/cuda"));
        let venv = env("VIRTUAL_ENV").map(PathBuf::from);
        places.extend(venv.iter().flat_map(|v| site_packages_of(v)).map(|d| d.join(WHEEL_SUBDIR)));
        let python = env("PYTHON").unwrap_or_else(|| "python3".into());
        places.extend(python_site_packages(&python).into_iter().map(|d| d.join(WHEEL_SUBDIR)));
        Toolchain::first_of(&places)
    }

    /// The toolchain of the first of `places` that holds one
    /// ([`Toolchain::at`]); [`Error::Missing`] with every place and why
    /// (a place listed twice is tried once).
    pub fn first_of(places: &[PathBuf]) -> Result<Toolchain, Error> {
        let mut searched: Vec<(PathBuf, String)> = Vec::new();
        let mut missing = String::new();
        for place in places {
            if searched.iter().any(|(p, _)| p == place) {
                continue;
            }
            if !place.is_dir() {
                searched.push((place.clone(), "no such folder".into()));
                continue;
            }
            match Toolchain::at(place.clone()) {
                Ok(t) => return Ok(t),
                Err(Error::Missing { missing: m, .. }) => {
                    searched.push((place.clone(), format!("no {m}")));
                    missing = m;
                }
                Err(e) => return Err(e),
            }
        }
        if missing.is_empty() {
            missing = format!("no folder with {WHEEL_SUBDIR}'s bin/ and lib/");
        }
        Err(Error::Missing { missing, searched })
    }

    /// Installs [`WHEELS`] with `python`'s pip into `dir` (pip creates it;
    /// pip's own progress on the terminal, no pip cache written)
    /// and returns the toolchain in `dir/nvidia/cu13`, which
    /// `TGC_CUDA_ROOT` should name. Nothing is written outside `dir`.
    ///
    /// Errors: [`Error::Io`] when pip cannot be run or the library link
    /// cannot be made; [`Error::Tool`] when pip fails (its messages are
    /// above); [`Error::Missing`] when the install lacks a file.
    pub fn install(dir: &Path, python: &std::ffi::OsStr) -> Result<Toolchain, Error> {
        let status = Command::new(python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "--only-binary=:all:"])
            .arg("--no-cache-dir")
            .arg("--target")
            .arg(dir)
            .args(WHEELS)
            // --target installs are not the system environment; this only
            // silences pip's PEP 668 guard on distributions that set it.
            .env("PIP_BREAK_SYSTEM_PACKAGES", "1")
            .env("PIP_ROOT_USER_ACTION", "ignore")
            .status()
            .map_err(|source| Error::Io { context: format!("running {} -m pip", python.to_string_lossy()), source })?;
        if !status.success() {
            return Err(Error::Tool {
                tool: format!("{} -m pip install", python.to_string_lossy()),
                status: status.to_string(),
                output: "(pip's messages are above)".into(),
            });
        }
        let root = dir.join(WHEEL_SUBDIR);
        // cudarc dlopens `libnvrtc.so` before `libnvrtc.so.13`: the
        // unversioned name lets LD_LIBRARY_PATH pick this copy.
        let link = root.join("lib/libnvrtc.so");
        #[cfg(unix)]
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink("libnvrtc.so.13", &link)
                .map_err(|source| Error::Io { context: format!("linking {}", link.display()), source })?;
        }
        Toolchain::at(root)
    }

    /// The toolchain in `root` (a folder with `bin/`, `lib/` or `lib64/`),
    /// if its NVRTC library, ptxas and cuobjdump are there.
    pub fn at(root: impl Into<PathBuf>) -> Result<Toolchain, Error> {
        let root = root.into();
        let missing = |what: &Path| Error::Missing {
            missing: what.display().to_string(),
            searched: vec![(root.clone(), format!("no {}", what.display()))],
        };
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

/// `lib/python3.*/site-packages` folders of the Python environment at
/// `prefix` (a virtual environment), sorted.
fn site_packages_of(prefix: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(prefix.join("lib")) else { return Vec::new() };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path().join("site-packages"))
        .collect();
    dirs.sort();
    dirs
}

/// The site-packages folders `python` reports (`sysconfig`'s purelib and
/// platlib, `site`'s user folder); none when it cannot be run.
fn python_site_packages(python: &std::ffi::OsStr) -> Vec<PathBuf> {
    let script = "import site, sysconfig\np = sysconfig.get_paths()\nprint(p['purelib']); print(p['platlib']); \
                  print(site.getusersitepackages())";
    let Ok(out) = Command::new(python).args(["-c", script]).output() else { return Vec::new() };
    if !out.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(PathBuf::from).collect()
}

/// A fresh private folder under the system temp dir
/// ([`tgc_runtime::files::scratch_dir`]), removed on drop: ptxas and
/// cuobjdump read and write files only.
struct Scratch(tgc_runtime::files::TempDir);

impl Scratch {
    fn new() -> Result<Scratch, Error> {
        let dir = tgc_runtime::files::scratch_dir("cuda").map_err(|source| Error::Io {
            context: format!("creating a scratch folder in {}", std::env::temp_dir().display()),
            source,
        })?;
        Ok(Scratch(dir))
    }

    /// The folder.
    fn path(&self) -> &Path {
        self.0.path()
    }

    fn write(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, Error> {
        let path = self.path().join(name);
        std::fs::write(&path, bytes)
            .map_err(|source| Error::Io { context: format!("writing {}", path.display()), source })?;
        Ok(path)
    }
}
