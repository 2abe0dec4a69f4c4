//! SASS, the GPU's machine code, disassembled from a cubin by cuobjdump, and
//! its opcodes: the proof that a kernel took the intended path (`HMMA.16816`
//! for `mma.sync`, `LDGSTS` for `cp.async`, `LDSM` for `ldmatrix`).

use std::collections::BTreeSet;

use super::{Error, Scratch, Toolchain};

impl Toolchain {
    /// The SASS of every function in `cubin` (`cuobjdump -sass`).
    pub fn sass(&self, cubin: &[u8]) -> Result<String, Error> {
        let scratch = Scratch::new()?;
        let input = scratch.write("kernel.cubin", cubin)?;
        self.run("cuobjdump", &["-sass".as_ref(), input.as_os_str()])
    }
}

/// The distinct opcodes (with their modifiers, e.g. `HMMA.16816.F32`,
/// `LDGSTS.E.BYPASS.128`) of cuobjdump's SASS listing: the word after the
/// `/*0040*/` address and an optional `@P0` predicate.
pub fn sass_opcodes(sass: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in sass.lines() {
        let Some((address, rest)) = line.trim_start().split_once("*/") else { continue };
        if !address.starts_with("/*") || !address[2..].chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        let mut words = rest.split_whitespace();
        let Some(mut word) = words.next() else { continue };
        if word.starts_with('@') {
            let Some(next) = words.next() else { continue };
            word = next;
        }
        let opcode = word.trim_end_matches(';');
        if !opcode.is_empty() {
            out.insert(opcode.to_string());
        }
    }
    out
}
