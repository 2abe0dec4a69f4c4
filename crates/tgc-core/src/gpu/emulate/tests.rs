//! The emulator on small hand-written kernels: the `ldmatrix` fragment
//! layouts of `.x1`/`.x2`/`.x4`, with and without `.trans`, read back lane
//! by lane (PTX ISA "Warp-level matrix load instruction: ldmatrix"), and the
//! faults of single statements (misaligned, out-of-bounds and racing
//! accesses), each naming its statement.

use crate::gpu::dialect::verify::verify;
use crate::gpu::dialect::*;
use crate::gpu::emulate::{run, run_keeping_registers, Arg};
use crate::DType;

/// One warp. `src` (f16 `[rows, 8]` holding `0, 1, 2, …`) is copied row by
/// row into the shared buffer `S` (s0: `for`, s1: `copy.sync`, s2:
/// `bar.sync`), then `rest` runs. Parameters: `src` (f16), `out` (f32).
fn kernel(rows: i64, rest: Vec<Stmt>) -> Kernel {
    let mut k = Kernel::empty("t", Arch::Sm80);
    k.params.push(Param { name: "src".into(), kind: ParamKind::Ptr { dtype: DType::F16, writable: false } });
    k.params.push(Param { name: "out".into(), kind: ParamKind::Ptr { dtype: DType::F32, writable: true } });
    k.smem.push(SmemBuffer { name: "S".into(), offset: 0, size: (rows * 16) as u64, swizzle: Swizzle::IDENTITY });
    k.smem_bytes = (rows * 16) as u64;
    k.regs.push(RegArray { name: "frag".into(), kind: RegKind::B16x2, len: 4 });
    k.regs.push(RegArray { name: "v".into(), kind: RegKind::F32, len: 8 });
    k.vars.push("row".into());
    let row = Expr::Var(VarId(0));
    let copy = Stmt::Mma(MmaStmt::CopySync {
        dst: smem(row.clone() * 16),
        src: GlobalRef { param: ParamId(0), offset: row * 8 },
        bytes: 16,
        src_bytes: Expr::c(16),
    });
    let t = Expr::ThreadIdx(Dim::X);
    k.body = vec![Stmt::For { var: VarId(0), start: t, end: Expr::c(rows), step: 32, unroll: false, body: vec![copy] }];
    k.body.push(Stmt::Barrier);
    k.body.extend(rest);
    k
}

fn smem(offset: Expr) -> SmemRef {
    SmemRef { buf: SmemId(0), offset, swizzle: Swizzle::IDENTITY }
}

fn args(rows: i64) -> Vec<Arg> {
    vec![
        Arg::tensor(DType::F16, &(0..rows * 8).map(|v| v as f64).collect::<Vec<_>>()),
        Arg::tensor(DType::F32, &[0.0; 64]),
    ]
}

fn lane() -> Expr {
    Expr::ThreadIdx(Dim::X)
}

/// Every lane's `frag[i]` after one `ldmatrix`, as its two f16 halves
/// (low, high), indexed `[lane][i]`.
fn ldmatrix(num: LdMatrixNum, trans: bool) -> Vec<Vec<(f64, f64)>> {
    let n = num.count();
    let rows = 8 * n as i64;
    let dst = (0..n).map(|i| RegRef { reg: RegId(0), index: Expr::c(i as i64) }).collect();
    // Lane l gives row l % 8 of matrix l / 8; lanes past 8n give rows the instruction ignores.
    let k = kernel(rows, vec![Stmt::Mma(MmaStmt::LdMatrix { num, trans, dst, src: smem(lane() % rows * 16) })]);
    verify(&k).unwrap();
    let (_, regs) = run_keeping_registers(&k, &mut args(rows)).unwrap();
    let half = |bits: u32| half::f16::from_bits(bits as u16).to_f64();
    (0..32).map(|l| (0..n).map(|i| (half(regs[0][l * 4 + i]), half(regs[0][l * 4 + i] >> 16))).collect()).collect()
}

#[test]
fn ldmatrix_fragment_layouts() {
    for num in [LdMatrixNum::X1, LdMatrixNum::X2, LdMatrixNum::X4] {
        let plain = ldmatrix(num, false);
        let trans = ldmatrix(num, true);
        for l in 0..32 {
            for i in 0..num.count() {
                // Element (r, c) of matrix i holds (8i + r)·8 + c.
                let at = |r: usize, c: usize| ((8 * i + r) * 8 + c) as f64;
                let (g, t) = (l / 4, l % 4);
                assert_eq!(plain[l][i], (at(g, 2 * t), at(g, 2 * t + 1)), "x{} lane {l} matrix {i}", num.count());
                assert_eq!(trans[l][i], (at(2 * t, g), at(2 * t + 1, g)), "x{}.trans lane {l} matrix {i}", num.count());
            }
        }
    }
}

fn copy_row(row: Expr, bytes: u32, src_offset: Expr) -> Stmt {
    Stmt::Mma(MmaStmt::CpAsync {
        dst: smem(row * 16),
        src: GlobalRef { param: ParamId(0), offset: src_offset },
        bytes,
        src_bytes: Expr::c(bytes as i64),
    })
}

#[test]
fn misaligned_cp_async_names_the_statement() {
    // s3: a 16-byte cp.async from element 1 (byte 2) of `src`.
    let k = kernel(
        8,
        vec![
            copy_row(lane() % 8, 16, Expr::c(1)),
            Stmt::Mma(MmaStmt::CommitGroup),
            Stmt::Mma(MmaStmt::WaitGroup { pending: 0 }),
        ],
    );
    verify(&k).unwrap();
    let e = run(&k, &mut args(8)).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::Misaligned, Some(3)), "{e}");
    assert!(e.message.contains("not 16-byte aligned"), "{e}");
}

#[test]
fn out_of_bounds_shared_and_global_accesses_name_the_statement() {
    let frag = (0..4).map(|i| RegRef { reg: RegId(0), index: Expr::c(i) }).collect();
    // s3: ldmatrix rows 8..40 of a 32-row buffer.
    let k = kernel(
        32,
        vec![Stmt::Mma(MmaStmt::LdMatrix {
            num: LdMatrixNum::X4,
            trans: false,
            dst: frag,
            src: smem((lane() + 8) * 16),
        })],
    );
    let e = run(&k, &mut args(32)).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::OutOfBounds, Some(3)), "{e}");
    assert!(e.message.contains("thread 24") && e.message.contains("outside `S`"), "{e}");
    // s3: a copy from past the end of `src` (8 rows of 8 elements).
    let k = kernel(8, vec![copy_row(lane() % 8, 16, Expr::c(64))]);
    let e = run(&k, &mut args(8)).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::OutOfBounds, Some(3)), "{e}");
    assert!(e.message.contains("outside `src`"), "{e}");
}

/// Thread `l` overwrites the row thread `l + 1` read, with no barrier
/// between: a write-after-read race at the write.
#[test]
fn write_after_read_race_names_the_write() {
    let v = (0..8).map(|i| RegRef { reg: RegId(1), index: Expr::c(i) }).collect();
    let read = Stmt::Mma(MmaStmt::LdShared { dst: v, src: smem(lane() % 8 * 16), dtype: DType::F16 });
    let write = Stmt::Mma(MmaStmt::CopySync {
        dst: smem((lane() + 7) % 8 * 16),
        src: GlobalRef { param: ParamId(0), offset: Expr::c(0) },
        bytes: 16,
        src_bytes: Expr::c(16),
    });
    let k = kernel(8, vec![read.clone(), write.clone()]);
    verify(&k).unwrap();
    let e = run(&k, &mut args(8)).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::Race, Some(4)), "{e}");
    assert!(e.message.contains("read by thread"), "{e}");
    // With a barrier between, the same accesses are fine.
    let k = kernel(8, vec![read, Stmt::Barrier, write]);
    run(&k, &mut args(8)).unwrap();
}

/// Hostile field values give errors, not panics: a swizzle shifting past
/// 64 bits, offsets that overflow when scaled to bytes.
#[test]
fn hostile_values_are_errors() {
    let wild = Swizzle { bits: 70, base: 66, shift: 99 };
    assert_eq!(wild.apply(12345), 12345);
    let k = kernel(8, vec![copy_row(lane() % 8, 16, Expr::c(i64::MAX / 2 + 7))]);
    assert_eq!(run(&k, &mut args(8)).unwrap_err().fault, Fault::OutOfBounds);
    let mut k = kernel(8, vec![copy_row(lane() % 8, 16, Expr::c(0))]);
    if let Some(Stmt::Mma(MmaStmt::CpAsync { dst, .. })) = k.body.last_mut() {
        dst.offset = Expr::c(i64::MAX);
    }
    assert_eq!(run(&k, &mut args(8)).unwrap_err().fault, Fault::OutOfBounds);
}
