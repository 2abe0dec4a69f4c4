//! Resource usage per kernel as ptxas reports it with `-v`.

use super::{Arch, Error, Scratch, Toolchain};

/// What one kernel of a cubin uses, from ptxas `-v` (`ptxas info` lines).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// The (mangled) function name.
    pub function: String,
    /// Registers per thread.
    pub registers: u32,
    /// Static shared memory per block, bytes (`smem`; dynamic shared memory
    /// is not known to ptxas).
    pub shared_bytes: u32,
    /// Bytes of registers stored to local memory per thread.
    pub spill_stores: u32,
    /// Bytes loaded back from spills per thread.
    pub spill_loads: u32,
    /// Per-thread stack frame, bytes.
    pub stack_frame: u32,
    /// Named barriers used (`bar.sync` ids).
    pub barriers: u32,
    /// Kernel-parameter constant bank (`cmem[0]`), bytes.
    pub constant_bytes: u32,
}

impl Toolchain {
    /// Assembles `ptx` for `arch` with the toolchain's `ptxas -v` and
    /// returns each entry function's [`Resources`], in ptxas's order.
    pub fn ptxas_resources(&self, ptx: &str, arch: Arch) -> Result<Vec<Resources>, Error> {
        let scratch = Scratch::new()?;
        let input = scratch.write("kernel.ptx", ptx.as_bytes())?;
        let output = scratch.path().join("kernel.cubin");
        let arch_flag = format!("-arch={}", arch.sm());
        let text = self
            .run("ptxas", &["-v".as_ref(), arch_flag.as_ref(), input.as_os_str(), "-o".as_ref(), output.as_os_str()])?;
        parse_ptxas_verbose(&text)
    }
}

/// Parses ptxas `-v` output (also NVRTC's log with `-Xptxas=-v`): per
/// function, a `Compiling entry function 'NAME'` line, then `Function
/// properties` (stack frame, spills) and `Used N registers` lines.
pub fn parse_ptxas_verbose(text: &str) -> Result<Vec<Resources>, Error> {
    let mut out: Vec<Resources> = Vec::new();
    let parse_error = |detail: String| Error::Parse { tool: "ptxas", detail };
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default();
            out.push(Resources { function: name.to_string(), ..Resources::default() });
            continue;
        }
        let Some(current) = out.last_mut() else { continue };
        if line.contains("bytes stack frame") {
            for (value, unit) in numbered(line) {
                match unit.as_str() {
                    "bytes stack frame" => current.stack_frame = value,
                    "bytes spill stores" => current.spill_stores = value,
                    "bytes spill loads" => current.spill_loads = value,
                    _ => {}
                }
            }
        } else if let Some(used) = line.split("Used ").nth(1) {
            for (value, unit) in numbered(used) {
                match unit.as_str() {
                    "registers" => current.registers = value,
                    "barriers" => current.barriers = value,
                    "bytes smem" => current.shared_bytes = value,
                    "bytes cmem[0]" => current.constant_bytes = value,
                    _ => {}
                }
            }
        }
    }
    if out.is_empty() {
        return Err(parse_error(format!("no `Compiling entry function` line in:\n{text}")));
    }
    Ok(out)
}

/// The comma-separated `N unit` items of a ptxas line: the first word of
/// an item that reads as a number, and the words after it (`used 0
/// barriers` and NVRTC's `ptxas . 0 bytes stack frame` lose their prefix).
fn numbered(line: &str) -> Vec<(u32, String)> {
    line.split(',')
        .filter_map(|item| {
            let words: Vec<&str> = item.split_whitespace().collect();
            let at = words.iter().position(|w| w.parse::<u32>().is_ok())?;
            Some((words[at].parse().ok()?, words[at + 1..].join(" ")))
        })
        .collect()
}
