//! Compiling CUDA C++ with NVRTC through `cudarc::nvrtc`: PTX from cudarc's
//! result API, cubin from `nvrtcGetCUBIN` in `cudarc::nvrtc::sys` (cudarc's
//! safe API returns PTX only).

use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cudarc::nvrtc::{result, sys};

use super::{Arch, Error, Toolchain};

/// The output of one NVRTC compilation for one real architecture.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The PTX NVRTC generated (`.target sm_80` / `sm_90a`, PTX ISA 9.0):
    /// the fallback a driver can JIT — for sm_80 on any newer GPU, for the
    /// architecture-specific sm_90a only on sm_90a.
    pub ptx: String,
    /// The ELF cubin for the real architecture (`sm_80`, `sm_90a`).
    pub cubin: Vec<u8>,
    /// NVRTC's program log (warnings; empty when there are none).
    pub log: String,
}

/// The NVRTC libraries this process loaded, by full path; kept open so that
/// the later `dlopen`s by name — cudarc's of `libnvrtc.so.13`, NVRTC's own of
/// `libnvrtc-builtins.so.13.0` — find them by their sonames.
struct Loaded {
    path: PathBuf,
    _builtins: libloading::Library,
    _library: libloading::Library,
}

static LOADED: OnceLock<Result<Loaded, String>> = OnceLock::new();

/// The library NVRTC loads by name on its first compilation (its soname).
const BUILTINS: &str = "libnvrtc-builtins.so.13.0";

type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;

/// Loads NVRTC from `path` once per process and checks that cudarc uses
/// that very library and that it is CUDA 13.0.
fn load(path: &Path) -> Result<(), Error> {
    let loaded = LOADED.get_or_init(|| open(path));
    let fail = |reason: String| Error::Nvrtc { path: path.to_path_buf(), reason };
    match loaded {
        Err(reason) => Err(fail(reason.clone())),
        Ok(l) if l.path != path => Err(fail(format!(
            "this process already uses NVRTC from {} (cudarc loads one NVRTC per process)",
            l.path.display()
        ))),
        Ok(_) => Ok(()),
    }
}

fn open(path: &Path) -> Result<Loaded, String> {
    let builtins = path.with_file_name(BUILTINS);
    // SAFETY: loading NVRTC and its builtins runs no initialisers beyond the
    // C runtime's.
    let builtins = unsafe { libloading::Library::new(&builtins) }.map_err(|e| e.to_string())?;
    // SAFETY: as above.
    let library = unsafe { libloading::Library::new(path) }.map_err(|e| e.to_string())?;
    // SAFETY: a symbol lookup; the pointer is only compared and called with
    // its documented signature `nvrtcResult nvrtcVersion(int*, int*)`.
    let ours = unsafe { library.get::<VersionFn>(b"nvrtcVersion") }.map_err(|e| e.to_string())?;
    let ours: VersionFn = *ours;
    // cudarc panics if it finds no library by name; this probe does not.
    // SAFETY: dlopen of candidate names, closed again.
    if !unsafe { sys::is_culib_present() } {
        return Err("cudarc finds no libnvrtc by name although it is loaded".to_string());
    }
    // SAFETY: present, checked above, so `culib` does not panic.
    let theirs = unsafe { sys::culib().get::<VersionFn>(b"nvrtcVersion") }.map_err(|e| e.to_string())?;
    if *theirs as usize != ours as usize {
        let dir = path.parent().unwrap_or(path);
        return Err(format!(
            "cudarc loaded another libnvrtc by name (a system CUDA?); put {} first in LD_LIBRARY_PATH",
            dir.display()
        ));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-parameters, as documented.
    let status = unsafe { ours(&mut major, &mut minor) };
    if status != 0 || (major, minor) != (13, 0) {
        return Err(format!(
            "NVRTC reports version {major}.{minor} (status {status}); tgc needs CUDA 13.0, the GPU driver's version: \
             install it with `{}` and set {}=DIR/{}",
            super::INSTALL_COMMAND,
            super::ROOT_ENV,
            super::WHEEL_SUBDIR
        ));
    }
    Ok(Loaded { path: path.to_path_buf(), _builtins: builtins, _library: library })
}

/// An NVRTC program, destroyed on drop.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by `create_program`, destroyed only here.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

fn api_error(path: &Path, call: &str, e: result::NvrtcError) -> Error {
    Error::Nvrtc { path: path.to_path_buf(), reason: format!("{call}: {e}") }
}

fn c_string(what: &str, s: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::Nvrtc { path: PathBuf::new(), reason: format!("{what} contains a NUL byte") })
}

impl Toolchain {
    /// Compiles `source` (CUDA C++, a program named `name` in NVRTC's log)
    /// for `arch` with NVRTC: `-arch=sm_XX`, `-I` for [`Toolchain::include_dirs`],
    /// then `options` (NVRTC's, e.g. `-lineinfo`, `-DTILE=64`).
    ///
    /// Errors: [`Error::Nvrtc`] when NVRTC cannot be loaded or is not 13.0,
    /// [`Error::Compile`] with the log when the source does not compile,
    /// [`Error::Advisory`] when it compiles but ptxas reports a C75xx
    /// advisory ([`ptxas_advisories`]).
    pub fn compile(&self, source: &str, name: &str, arch: Arch, options: &[&str]) -> Result<Compiled, Error> {
        load(&self.lib)?;
        let lib = &self.lib;
        let src = c_string("the source", source)?;
        let c_name = c_string("the program name", name)?;
        let program =
            Program(result::create_program(&src, Some(&c_name)).map_err(|e| api_error(lib, "nvrtcCreateProgram", e))?);
        let mut all = vec![format!("-arch={}", arch.sm())];
        all.extend(self.include_dirs().iter().map(|d| format!("-I{}", d.display())));
        all.extend(options.iter().map(|o| o.to_string()));
        let c_options = all.iter().map(|o| c_string("an option", o)).collect::<Result<Vec<_>, _>>()?;
        let pointers: Vec<*const c_char> = c_options.iter().map(|o| o.as_ptr()).collect();
        // SAFETY: a live program; `pointers` point into `c_options`, alive
        // for the call.
        let status = unsafe { sys::nvrtcCompileProgram(program.0, pointers.len() as c_int, pointers.as_ptr()) };
        // SAFETY: a live program.
        let log = unsafe { result::get_program_log(program.0) }.map_err(|e| api_error(lib, "nvrtcGetProgramLog", e))?;
        let log = text(&log);
        match status {
            sys::nvrtcResult::NVRTC_SUCCESS => {}
            sys::nvrtcResult::NVRTC_ERROR_COMPILATION => {
                return Err(Error::Compile { name: name.to_string(), arch, log });
            }
            other => return Err(api_error(lib, "nvrtcCompileProgram", result::NvrtcError(other))),
        }
        let advisories = ptxas_advisories(&log);
        if !advisories.is_empty() {
            return Err(Error::Advisory { name: name.to_string(), arch, advisories, log });
        }
        // SAFETY: a live, compiled program.
        let ptx = unsafe { result::get_ptx(program.0) }.map_err(|e| api_error(lib, "nvrtcGetPTX", e))?;
        let cubin = get_cubin(&program).map_err(|e| api_error(lib, "nvrtcGetCUBIN", e))?;
        Ok(Compiled { ptx: text(&ptx), cubin, log })
    }
}

/// The lines of an NVRTC log that are ptxas advisories numbered C75xx
/// (`ptxas info    : (C7519) warpgroup.arrive is injected …`): the notes
/// by which ptxas says it added synchronisation or serialised `wgmma`s
/// the source did not ask for.
pub fn ptxas_advisories(log: &str) -> Vec<String> {
    let is_code = |c: &str| {
        let b = c.as_bytes();
        b.len() >= 7 && c.starts_with("(C75") && b[4].is_ascii_digit() && b[5].is_ascii_digit() && b[6] == b')'
    };
    log.lines()
        .filter(|l| l.contains("ptxas") && l.match_indices("(C75").any(|(i, _)| is_code(&l[i..])))
        .map(|l| l.trim().to_string())
        .collect()
}

fn get_cubin(program: &Program) -> Result<Vec<u8>, result::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: a live, compiled program; the buffer has the size NVRTC reported.
    unsafe {
        sys::nvrtcGetCUBINSize(program.0, &mut size).result()?;
        let mut cubin = vec![0u8; size];
        sys::nvrtcGetCUBIN(program.0, cubin.as_mut_ptr().cast()).result()?;
        Ok(cubin)
    }
}

/// NVRTC's NUL-terminated text as a `String`.
fn text(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).trim_end().to_string()
}
