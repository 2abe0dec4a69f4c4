//! The output parsers on text captured from the CUDA 13.0 tools (the sm_80
//! kernel of `tests/toolchain.rs`), and the toolchain search's errors.

use super::*;

/// `ptxas -v -arch=sm_80` on that kernel's PTX (ptxas 13.0.88).
const PTXAS_SM80: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'mma_m16n8k16' for 'sm_80'
ptxas info    : Function properties for mma_m16n8k16
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 20 registers, used 0 barriers, 512 bytes smem, 376 bytes cmem[0]
ptxas info    : Compile time = 3.439 ms
";

/// NVRTC's program log with `-Xptxas=-v`: the same lines, another prefix;
/// a second, made-up kernel that spills and has no shared memory.
const NVRTC_LOG: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'mma_m16n8k16' for 'sm_80'
ptxas info    : Function properties for mma_m16n8k16
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 20 registers, used 0 barriers, 512 bytes smem, 376 bytes cmem[0]
ptxas info    : Compiling entry function '_Z5spillPf' for 'sm_80'
ptxas info    : Function properties for _Z5spillPf
ptxas         .     48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 360 bytes cmem[0]
ptxas info    : Compile time = 2.712 ms
";

/// `cuobjdump -sass` of that kernel, cut.
const SASS_SM80: &str = "
\tcode for sm_80
\t\tFunction : mma_m16n8k16
\t.headerflags\t@\"EF_CUDA_SM80 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)\"
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;       /* 0x00000a00ff017624 */
                                                                                 /* 0x000fe400078e00ff */
        /*00a0*/                   LDGSTS.E.BYPASS.128 [R7], [R4.64] ;           /* 0x0000000004077fae */
                                                                                 /* 0x0003e8000b901c44 */
        /*00b0*/                   LDGDEPBAR ;                                   /* 0x00000000000079af */
        /*0150*/                   LDSM.16.M88.4 R8, [R0] ;                      /* 0x000000000008783b */
        /*0160*/                   HMMA.16816.F32 R8, R8, R12, RZ ;              /* 0x0000000c0808723c */
        /*0170*/                   @!UPT UIADD3 URZ, URZ, URZ, URZ ;             /* 0x0000003f3f3ff290 */
        /*01e0*/                   EXIT ;                                        /* 0x000000000000794d */
        /*01f0*/                   BRA 0x1f0;                                    /* 0xfffffff000007947 */
\t\t..........
";

/// A made-up sm_90a listing in cuobjdump's layout: a k loop from 0x10 to
/// 0x50 whose mbarrier wait retries out of line (0x90, back into the loop
/// at 0x30), fences before and after the loop, and the trailing
/// self-branch ptxas ends every function with.
const SASS_LOOPS: &str = "
\tcode for sm_90a
\t\tFunction : one
        /*0000*/                   EXIT ;                                        /* 0x000000000000794d */
\t\tFunction : ws
        /*0000*/                   MEMBAR.ALL.GPU ;                              /* 0x0000000000007992 */
        /*0010*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ; /* 0x00000002ff0075a7 */
        /*0020*/              @!P0 BRA 0x90 ;                                    /* 0x0000000000188947 */
        /*0030*/                   HGMMA.64x128x16.F32 R24, gdesc[UR8], RZ, !UPT ; /* 0x0060000008187df0 */
        /*0040*/                   MEMBAR.ALL.CTA ;                              /* 0x0000000000007992 */
        /*0050*/               @P1 BRA 0x10 ;                                    /* 0xfffffffc00ec1947 */
        /*0060*/                   MEMBAR.ALL.GPU ;                              /* 0x0000000000007992 */
        /*0070*/                   EXIT ;                                        /* 0x000000000000794d */
        /*0080*/                   BRA 0x80;                                     /* 0xfffffffc00fc7947 */
        /*0090*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2 ; /* 0x00000002ff0075a7 */
        /*00a0*/              @!P0 BRA 0x90 ;                                    /* 0xfffffffc00f88947 */
        /*00b0*/                   BRA 0x30 ;                                    /* 0xfffffff400dc7947 */
";

#[test]
fn ptxas_verbose_output_reads_as_resources() {
    let expected = Resources {
        function: "mma_m16n8k16".to_string(),
        registers: 20,
        shared_bytes: 512,
        barriers: 0,
        constant_bytes: 376,
        ..Resources::default()
    };
    assert_eq!(parse_ptxas_verbose(PTXAS_SM80).unwrap(), vec![expected.clone()]);
    let spill = Resources {
        function: "_Z5spillPf".to_string(),
        registers: 255,
        barriers: 1,
        constant_bytes: 360,
        stack_frame: 48,
        spill_stores: 40,
        spill_loads: 36,
        shared_bytes: 0,
    };
    assert_eq!(parse_ptxas_verbose(NVRTC_LOG).unwrap(), vec![expected, spill]);
}

#[test]
fn ptxas_output_without_a_kernel_is_an_error() {
    let err = parse_ptxas_verbose("ptxas info    : 0 bytes gmem\n").unwrap_err();
    assert!(matches!(err, Error::Parse { tool: "ptxas", .. }), "{err}");
}

#[test]
fn sass_opcodes_skip_addresses_encodings_and_predicates() {
    let opcodes: Vec<String> = sass_opcodes(SASS_SM80).into_iter().collect();
    assert_eq!(
        opcodes,
        [
            "BRA",
            "EXIT",
            "HMMA.16816.F32",
            "IMAD.MOV.U32",
            "LDGDEPBAR",
            "LDGSTS.E.BYPASS.128",
            "LDSM.16.M88.4",
            "UIADD3"
        ]
    );
}

#[test]
fn a_folder_without_nvrtc_is_missing_with_the_install_commands() {
    let err = Toolchain::at("/nonexistent/cu13").unwrap_err();
    let Error::Missing { missing, searched } = &err else { panic!("{err}") };
    assert_eq!(missing, "/nonexistent/cu13/lib/libnvrtc.so.13");
    assert_eq!(searched.len(), 1);
    assert_eq!(searched[0].0, PathBuf::from("/nonexistent/cu13"));
    let text = err.to_string();
    assert!(text.contains(SETUP_COMMAND) && text.contains(INSTALL_COMMAND), "{text}");
}

/// A folder laid out like the wheels' `nvidia/cu13`, with empty files
/// (`Toolchain::at` checks that they exist), under a fresh temp folder.
fn fake_toolchain(name: &str, complete: bool) -> PathBuf {
    let root = std::env::temp_dir().join(format!("tgc-toolchain-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("lib")).unwrap();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::write(root.join("lib/libnvrtc.so.13"), b"").unwrap();
    std::fs::write(root.join("bin/ptxas"), b"").unwrap();
    if complete {
        std::fs::write(root.join("bin/cuobjdump"), b"").unwrap();
    }
    root
}

/// The search takes the first place that holds a whole toolchain, passing
/// over a missing folder and one without cuobjdump; when none does, the
/// error names every place (once) and why, and the commands that install
/// one.
#[test]
fn the_search_takes_the_first_whole_toolchain_and_says_why_it_passed_others() {
    let gone = PathBuf::from("/nonexistent/tgc/cuda");
    let partial = fake_toolchain("partial", false);
    let whole = fake_toolchain("whole", true);
    let t = Toolchain::first_of(&[gone.clone(), partial.clone(), whole.clone()]).unwrap();
    assert_eq!(t.root(), whole);
    let err = Toolchain::first_of(&[gone.clone(), partial.clone(), gone.clone()]).unwrap_err();
    let Error::Missing { searched, .. } = &err else { panic!("{err}") };
    let places: Vec<&PathBuf> = searched.iter().map(|(p, _)| p).collect();
    assert_eq!(places, [&gone, &partial]);
    assert_eq!(searched[0].1, "no such folder");
    assert!(searched[1].1.contains("bin/cuobjdump"), "{}", searched[1].1);
    let text = err.to_string();
    for want in [gone.display().to_string(), partial.display().to_string(), INSTALL_COMMAND.to_string()] {
        assert!(text.contains(&want), "{want} not in {text}");
    }
    for dir in [partial, whole] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// `scripts/setup.sh` installs the same pinned wheels as `tgc toolchain
/// install` (its `CUDA_WHEELS` line is `WHEELS`).
#[test]
fn setup_sh_pins_the_same_wheels() {
    let setup = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/setup.sh")).unwrap();
    let line = setup.lines().find_map(|l| l.strip_prefix("CUDA_WHEELS=")).expect("a CUDA_WHEELS line");
    assert_eq!(line.trim_matches('"'), WHEELS.join(" "));
}

#[test]
fn arch_names_are_ptxas_names() {
    assert_eq!(Arch::Sm80.to_string(), "sm_80");
    assert_eq!(Arch::Sm90a.sm(), "sm_90a");
}

/// The folder ptxas and cuobjdump work in (issue 54 item 1) is new for each
/// call, private (mode 0700; it was `tgc-cuda-<pid>-<n>`, made with the
/// umask's mode), and removed with its files on drop.
#[cfg(unix)]
#[test]
fn the_tools_scratch_folder_is_fresh_private_and_removed() {
    use std::os::unix::fs::PermissionsExt;
    let (a, b) = (Scratch::new().unwrap(), Scratch::new().unwrap());
    assert_ne!(a.path(), b.path());
    assert_eq!(std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777, 0o700);
    let file = a.write("kernel.ptx", b"//").unwrap();
    assert_eq!(file.parent(), Some(a.path()));
    let dir = a.path().to_path_buf();
    drop(a);
    assert!(!dir.exists());
}

#[test]
fn sass_functions_read_guards_opcodes_operands_and_branch_targets() {
    let fs = sass_functions(SASS_LOOPS);
    assert_eq!(
        fs.iter().map(|f| (f.name.as_str(), f.instructions.len())).collect::<Vec<_>>(),
        [("one", 1), ("ws", 12)]
    );
    let i = &fs[1].instructions[2];
    assert_eq!(
        (i.address, i.guard.as_deref(), i.opcode.as_str(), i.operands.as_str(), i.branch_target()),
        (0x20, Some("!P0"), "BRA", "0x90", Some(0x90))
    );
    let hgmma = &fs[1].instructions[3];
    assert_eq!((hgmma.opcode.as_str(), hgmma.operands.as_str()), ("HGMMA.64x128x16.F32", "R24, gdesc[UR8], RZ, !UPT"));
    assert_eq!(hgmma.branch_target(), None);
    assert_eq!(fs[1].instructions[8].branch_target(), Some(0x80), "`BRA 0x80;` without a space");
}

/// The loop, its out-of-line retry and the trailing self-branch are on
/// cycles; the fences before and after the loop are not, although the
/// retry's branch back into the loop (0xb0 → 0x30) spans the second.
#[test]
fn on_cycles_is_the_loops_and_their_out_of_line_code() {
    let fs = sass_functions(SASS_LOOPS);
    let looped: Vec<u32> = fs[1].on_cycles().iter().map(|i| i.address).collect();
    assert_eq!(looped, [0x10, 0x20, 0x30, 0x40, 0x50, 0x80, 0x90, 0xa0, 0xb0]);
    assert_eq!(fs[0].on_cycles(), Vec::<&Instruction>::new());
}

/// From the `HGMMA` (index 3), up to a `MEMBAR.ALL.CTA`: its fall-through
/// stops there; from 0x20's branch the retry, and its way back to 0x30,
/// are reached too; the instructions after the fence are not.
#[test]
fn reachable_until_follows_branches_and_stops_at_the_stop() {
    let fs = sass_functions(SASS_LOOPS);
    let reached = |from: usize, stop: &str| -> Vec<u32> {
        fs[1].reachable_until(from, |i| i.opcode == stop).iter().map(|i| i.address).collect()
    };
    assert_eq!(reached(3, "MEMBAR.ALL.CTA"), Vec::<u32>::new());
    assert_eq!(reached(2, "MEMBAR.ALL.CTA"), [0x30, 0x90, 0xa0, 0xb0]);
    assert_eq!(reached(0, "EXIT"), [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x90, 0xa0, 0xb0]);
}

#[test]
fn ptxas_advisories_are_the_c75xx_lines_of_a_log() {
    // NVRTC's log of an sm90 attention kernel (CUDA 13.0.88), with a
    // front-end warning and a made-up C7510 and C751 (not a code) beside.
    let log = "\
att(119): warning #177-D: variable \"qf\" was declared but never referenced
ptxas info    : (C7519) warpgroup.arrive is injected in around line 958 by compiler to allow use of registers in GMMA in function 'att_attention'
ptxas warning : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized
ptxas info    : (C751) not an advisory code
nvlink info : (C7519) from another tool
";
    let got = ptxas_advisories(log);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].starts_with("ptxas info    : (C7519) warpgroup.arrive"), "{got:?}");
    assert!(got[1].starts_with("ptxas warning : (C7510)"), "{got:?}");
    assert!(ptxas_advisories("").is_empty());
}
