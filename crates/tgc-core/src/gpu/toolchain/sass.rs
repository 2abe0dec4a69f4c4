//! SASS, the GPU's machine code, disassembled from a cubin by cuobjdump:
//! its functions, their instructions and which of them lie on a loop, the
//! proof that a kernel took the intended path (`HMMA.16816` for
//! `mma.sync`, `LDGSTS` for `cp.async`, `LDSM` for `ldmatrix`) and kept
//! costly instructions out of its loops (no `MEMBAR.ALL.GPU` in a
//! `wgmma` main loop).

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

/// One instruction of a cuobjdump listing, e.g.
/// `/*0640*/ @!P0 BRA 0x610 ;`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// Its byte offset in the function (the `/*0640*/` comment).
    pub address: u32,
    /// The guard predicate without its `@` (`P0`, `!UP1`), if any.
    pub guard: Option<String>,
    /// The opcode with its modifiers (`HMMA.16816.F32`, `BRA.U.ANY`).
    pub opcode: String,
    /// The operands as written, comma-separated, without the `;`.
    pub operands: String,
}

impl Instruction {
    fn base(&self) -> &str {
        self.opcode.split('.').next().unwrap_or_default()
    }

    /// A branch's target address: the last operand of `BRA` (`BRA 0x610`,
    /// `BRA P0, 0x1f60`, `BRA.U.ANY 0xf560`).
    pub fn branch_target(&self) -> Option<u32> {
        if self.base() != "BRA" {
            return None;
        }
        let last = self.operands.rsplit(',').next()?.trim();
        u32::from_str_radix(last.strip_prefix("0x")?, 16).ok()
    }

    /// Whether the next instruction may run after this one: not after an
    /// unconditional `BRA` (no guard, no predicate operand), `EXIT`, `RET`
    /// or indirect jump (`BRX`, `JMX`).
    fn falls_through(&self) -> bool {
        match self.base() {
            "BRA" => self.guard.is_some() || self.operands.contains(','),
            "EXIT" | "RET" | "BRX" | "JMX" => self.guard.is_some(),
            _ => true,
        }
    }
}

/// One function of a cuobjdump listing (`Function : name`) and its
/// instructions in address order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub instructions: Vec<Instruction>,
}

impl Function {
    /// The indices of the instructions that may run right after the one at
    /// index `n`: its `BRA`'s target and the next ([`Instruction::falls_through`]).
    fn successors(&self, n: usize) -> Vec<usize> {
        let ins = &self.instructions;
        let target = ins[n].branch_target().and_then(|t| ins.binary_search_by_key(&t, |i| i.address).ok());
        let next = (ins[n].falls_through() && n + 1 < ins.len()).then_some(n + 1);
        target.into_iter().chain(next).collect()
    }

    /// The instructions that may run after the one at index `from` before
    /// any for which `stop` holds (those stopping ones excluded), in
    /// address order: what a path from `from` reaches along the `BRA`
    /// targets and fall-throughs, e.g. the instructions issued while an
    /// `HGMMA` is in flight, up to the `WARPGROUP.DEPBAR` that waits for it.
    pub fn reachable_until(&self, from: usize, stop: impl Fn(&Instruction) -> bool) -> Vec<&Instruction> {
        let mut seen = vec![false; self.instructions.len()];
        let mut work = self.successors(from);
        while let Some(n) = work.pop() {
            if seen[n] || stop(&self.instructions[n]) {
                continue;
            }
            seen[n] = true;
            work.extend(self.successors(n));
        }
        self.instructions.iter().zip(seen).filter(|(_, s)| *s).map(|(i, _)| i).collect()
    }

    /// The instructions that lie on a cycle of the function's control
    /// flow (a strongly connected component of more than one block, or a
    /// block that branches to itself): a loop's body, the out-of-line code
    /// it branches to and back from (an mbarrier's retry), an enclosing
    /// loop's too. The edges are each `BRA`'s target and the fall-through
    /// ([`Instruction::falls_through`]); a `CALL`'s callee is not entered
    /// (the call falls through) and an indirect jump's targets are not
    /// followed, so a loop closed only through either is not seen.
    pub fn on_cycles(&self) -> Vec<&Instruction> {
        let ins = &self.instructions;
        let index_of = |address: u32| ins.binary_search_by_key(&address, |i| i.address).ok();
        // Basic blocks: a leader at the start, at each branch target and
        // after each branch or block end.
        let mut leaders = BTreeSet::from([0]);
        for (n, i) in ins.iter().enumerate() {
            if let Some(t) = i.branch_target().and_then(index_of) {
                leaders.insert(t);
            }
            if i.branch_target().is_some() || !i.falls_through() {
                leaders.insert(n + 1);
            }
        }
        leaders.retain(|&l| l < ins.len());
        let starts: Vec<usize> = leaders.into_iter().collect();
        let block_of = |n: usize| starts.partition_point(|&s| s <= n) - 1;
        let ends: Vec<usize> = (0..starts.len()).map(|b| starts.get(b + 1).map_or(ins.len(), |&e| e)).collect();
        let succs: Vec<Vec<usize>> =
            (0..starts.len()).map(|b| self.successors(ends[b] - 1).into_iter().map(block_of).collect()).collect();
        let looped = cyclic_blocks(&succs);
        (0..starts.len()).filter(|&b| looped[b]).flat_map(|b| &ins[starts[b]..ends[b]]).collect()
    }
}

/// For each node of a graph given by its successor lists, whether it lies
/// on a cycle: Tarjan's strongly connected components, iteratively (no
/// recursion however long the function).
fn cyclic_blocks(succs: &[Vec<usize>]) -> Vec<bool> {
    let n = succs.len();
    let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut out, mut next) = (Vec::new(), vec![false; n], 0);
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, how many of its successors were visited)
        let mut work = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if let Some(&w) = succs[v].get(*k) {
                *k += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                let cyclic = component.len() > 1 || succs[v].contains(&v);
                for w in component {
                    out[w] = cyclic;
                }
            }
        }
    }
    out
}

/// The functions of cuobjdump's SASS listing, each from its
/// `Function : name` line to the next; lines that are not an instruction
/// (headers, the encodings' second words) are skipped.
pub fn sass_functions(sass: &str) -> Vec<Function> {
    let mut out: Vec<Function> = Vec::new();
    for line in sass.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("Function : ") {
            out.push(Function { name: name.trim().to_string(), instructions: Vec::new() });
            continue;
        }
        let (Some(f), Some(i)) = (out.last_mut(), instruction(line)) else { continue };
        f.instructions.push(i);
    }
    out
}

/// An instruction line: `/*addr*/`, an optional `@P0` guard, the opcode,
/// the operands up to `;`, then the encoding's comment.
fn instruction(line: &str) -> Option<Instruction> {
    let rest = line.strip_prefix("/*")?;
    let (address, rest) = rest.split_once("*/")?;
    let address = u32::from_str_radix(address, 16).ok()?;
    let text = rest.split_once(';').map_or(rest, |(t, _)| t).trim();
    let mut words = text.splitn(2, char::is_whitespace);
    let mut first = words.next()?;
    let mut rest = words.next().unwrap_or_default().trim();
    let guard = match first.strip_prefix('@') {
        Some(g) => {
            let g = g.to_string();
            let mut words = rest.splitn(2, char::is_whitespace);
            first = words.next()?;
            rest = words.next().unwrap_or_default().trim();
            Some(g)
        }
        None => None,
    };
    (!first.is_empty()).then(|| Instruction { address, guard, opcode: first.to_string(), operands: rest.to_string() })
}

/// The distinct opcodes (with their modifiers, e.g. `HMMA.16816.F32`,
/// `LDGSTS.E.BYPASS.128`) of every function of cuobjdump's SASS listing.
pub fn sass_opcodes(sass: &str) -> BTreeSet<String> {
    sass_functions(sass).into_iter().flat_map(|f| f.instructions).map(|i| i.opcode).collect()
}
