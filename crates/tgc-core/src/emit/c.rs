//! The C11 printer: one self-contained translation unit per graph (or per
//! batch of graphs, [`emit_c_units`]), in the SCoP-clean style of `spec/003`
//! — one `static` function per kernel with `restrict` pointers,
//! `#pragma scop` / `#pragma endscop` around each loop nest (but one with a
//! `GATHER`'s read, whose subscript is a value: not a SCoP), affine `int64_t`
//! subscripts, `floord` for floor division as isl and CLooG name it (a
//! function here, not their macro, which repeats its argument), min/max
//! through helper functions (NaN-propagating, as the interpreter).
//!
//! The exported function is
//! `int32_t SYMBOL(const void* const* inputs, void* const* outputs, const int64_t* dims, const tgc_rt* rt)`:
//! `inputs` in `Graph::inputs()` order, `outputs` in `Graph::outputs` order,
//! `dims` in `Graph::symbols` order, then the run-time tile sizes of a tile
//! plan ([`Program::tiles`], [`emit_c_units_with`]; none by default); buffers are dense row-major, f16 and
//! bf16 as `uint16_t` bit patterns, bool as `uint8_t`; `rt` is the runtime
//! table of `tgc_runtime::cpu_rt` (thread pool, micro-kernel; declared in
//! the unit as `tgc_rt`), which kernels on the packed contraction template
//! ([`crate::cpu::packed`]) call. It returns 0, 1 when
//! an allocation fails, 2 when the dims break a check of
//! [`Program::checks`] (nothing is written then).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::cpu::loop_ir::{
    BufId, Expr, Kernel, Nest, Program, Reduction, Role, RowGroup, Scan, SCAN_BLOCK, SCAN_LANES,
};
use crate::cpu::packed::{self, Contraction, PackOrder, Side, MR, NR};
use crate::cpu::{arena, lanes, rows};
use crate::cpu::{lower_with, Options};
use crate::diag;
use crate::diag::Diagnostic;
use crate::sym::Dim;
use crate::tiny::{BinaryOp, Graph, ReduceOp, Rel, UnaryOp};
use crate::DType;
use tgc_runtime::cpu_rt::{Isa as RtIsa, C_DECL};

use super::{
    aff, bare, bound, comment_text, dim, guard, kernel_summary, sym_name, window_start, Lang, Panel, A_PANEL, B_PANEL,
};

/// Generates the C translation unit of `g`, exporting `symbol`.
///
/// Errors: `Unsupported` when `symbol` is not a C identifier or collides with
/// a generated name; any error of [`lower`].
pub fn emit_c(g: &Graph, symbol: &str) -> Result<String, Diagnostic> {
    emit_c_units(&[(g, symbol)])
}

/// Generates one C translation unit exporting every `(graph, symbol)` pair,
/// so that one compiler run builds them all: the comment blocks of the
/// graphs, the includes and the helpers once, then each graph's kernels and
/// entry point in order. With one pair it is [`emit_c`].
///
/// Errors: `Unsupported` when a symbol is not a C identifier, or when two
/// functions of the unit (entry points, kernels `tgc_k<n>_SYMBOL`) would have
/// the same name; the first error of [`lower`], naming its graph when there
/// are several.
pub fn emit_c_units(units: &[(&Graph, &str)]) -> Result<String, Diagnostic> {
    emit_c_units_with(units, &Options::default())
}

/// [`emit_c_units`], lowering under `opts` ([`lower_with`]): with a tile
/// plan, each entry point reads its tile sizes from `dims` after the
/// graph's symbols ([`Program::tiles`]).
pub fn emit_c_units_with(units: &[(&Graph, &str)], opts: &Options) -> Result<String, Diagnostic> {
    let mut programs = Vec::new();
    for &(g, symbol) in units {
        check_symbol(symbol)?;
        let p = lower_with(g, opts).map_err(|mut e| {
            if units.len() > 1 {
                e.message = format!("graph `{}`: {}", g.name, e.message);
            }
            e
        })?;
        programs.push((g, p, symbol));
    }
    emit_c_programs(&programs)
}

/// `Unsupported` unless `symbol` can name the generated entry point.
fn check_symbol(symbol: &str) -> Result<(), Diagnostic> {
    let ok = symbol.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && symbol.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let helper = HELPERS.iter().chain(&RUN_HELPERS).any(|(n, _)| *n == symbol);
    if !ok || C_RESERVED.contains(&symbol) || helper {
        return Err(diag!(Unsupported, "`{symbol}` cannot name the generated C function"));
    }
    Ok(())
}

/// [`emit_c_units_with`] for programs the caller has lowered already
/// (`programs[k].1` must be the lowering of `programs[k].0`), so a caller
/// that needs the [`Program`] too lowers once.
///
/// Errors: `Unsupported` as [`emit_c_units`] says.
pub fn emit_c_programs(programs: &[(&Graph, Program, &str)]) -> Result<String, Diagnostic> {
    check_names(programs)?;
    Ok(print(programs, Marks::None))
}

/// [`emit_c_programs`] with each entry point taking a clock callback, for
/// the tuner (`crate::tune`): `int32_t SYMBOL(inputs, outputs, dims, rt,
/// void (*mark)(void* ctx, int64_t call), void* ctx)` calls `mark(ctx, -1)`
/// before its first function and `mark(ctx, c)` after function `c` of
/// [`Program::calls`], so the caller times each call on real buffers.
///
/// Errors: as [`emit_c_programs`].
pub fn emit_c_marked(programs: &[(&Graph, Program, &str)]) -> Result<String, Diagnostic> {
    check_names(programs)?;
    Ok(print(programs, Marks::Calls))
}

/// `Unsupported` when a symbol cannot name an entry point or two functions
/// of the unit would share a name.
fn check_names(programs: &[(&Graph, Program, &str)]) -> Result<(), Diagnostic> {
    let mut names = BTreeSet::new();
    for (_, p, symbol) in programs {
        let symbol = *symbol;
        check_symbol(symbol)?;
        let kernels = p.kernels.iter().map(|k| format!("tgc_{}_{symbol}", k.name));
        for name in kernels.chain([symbol.to_string()]) {
            if !names.insert(name.clone()) {
                return Err(diag!(Unsupported, "two functions of the C unit would be named `{name}`"));
            }
        }
    }
    Ok(())
}

/// Whether entry points report their calls to a clock callback
/// ([`emit_c_marked`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Marks {
    None,
    Calls,
}

/// C keywords, and names from the included headers the unit uses, that the
/// exported function must not take. Kernels are `tgc_k<n>_SYMBOL`, longer than
/// `SYMBOL` and unlike every helper; locals (`s_*`, `in*`, `out*`, `tmp*`)
/// may shadow `SYMBOL` inside its own body, harmlessly.
const C_RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "_Bool",
    "floord",
    "malloc",
    "free",
    "memcpy",
    "main",
    "exp2f",
    "log2f",
    "sqrtf",
    "fmaf",
    "fmaxf",
    "fminf",
    "NAN",
    "INFINITY",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "size_t",
    "tgc_rt",
    "tgc_max_i64",
    "tgc_fresh",
    "tgc_exp2f_lane",
    "tgc_exp2f_scalar",
    "tgc_exp2f_v4",
    "tgc_exp2f_v8c",
    "tgc_exp2f_v8",
    "tgc_exp2f_v16",
    "tgc_f32x8",
    "tgc_f32x16",
    "tgc_f32x8u",
    "tgc_f32x16u",
    "tgc_i32x8",
    "tgc_i32x16",
    "tgc_exp2f_x8",
    "tgc_exp2f_x16",
    "tgc_max_run_exact",
    "tgc_max_run_v16",
    "tgc_max_run_v8",
    "tgc_min_run_exact",
    "tgc_min_run_v16",
    "tgc_min_run_v8",
];

/// Helper functions, emitted when used, in this order.
const HELPERS: &[(&str, &str)] = &[
    // The intrinsics of the vector variants below (x86-64 with GCC 12 or later).
    ("tgc_immintrin", "#if defined(TGC_VECTOR_ABI)\n#include <immintrin.h>\n#endif"),
    (
        "tgc_exp2f",
        "/* 2^x within 2 ulp of the correctly rounded value (within 1 ulp of glibc's exp2f for
 * every f32), in operations a vectoriser packs (no call, no branch): 2^x = 2^n * 2^r
 * with n = x rounded to the nearest integer and r = x - n in [-1/2, 1/2], after |x|
 * is clamped to 160 (which changes no finite result) by a minimum whose NaN operand
 * wins, so NaN comes out NaN without a select. Adding 1.5*2^23 rounds the clamped
 * x, ties to even, and leaves n in the sum's low bits (no float-to-int conversion,
 * undefined for NaN). 2^r is the degree-6 minimax polynomial for the relative error
 * on [-1/2, 1/2] in fused Horner steps (fmaf: one instruction in the AVX-512 and
 * x86-64-v3 clones); 2^n is two exponent-field scalings so results below 2^-126
 * round once into the subnormals. tgc_runtime::cpu_rt::exp2 is the same operations,
 * for the Rust path. */
static inline float tgc_exp2f_lane(float x)
{
    const float a = fabsf(x);
    const float c = copysignf(160.0f < a ? 160.0f : a, x);
    const float t = c + 12582912.0f;
    const float r = c - (t - 12582912.0f);
    float p = 1.5345812e-04f;
    p = fmaf(p, r, 1.3399931e-03f);
    p = fmaf(p, r, 9.618489e-03f);
    p = fmaf(p, r, 5.5503286e-02f);
    p = fmaf(p, r, 2.4022646e-01f);
    p = fmaf(p, r, 6.931472e-01f);
    p = fmaf(p, r, 1.0f);
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    const int32_t n = (int32_t)(tb - 0x4b400000u), n1 = n >> 1, n2 = n - n1;
    const uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    return (p * s1) * s2;
}

#if defined(TGC_VECTOR_ABI)
/* With TGC_CLONES, tgc_exp2f is a function of the x86-64 vector function ABI (as glibc's
 * libmvec is): a vectorised loop calls a variant per 4, 8 or 16 lanes, written here with
 * the instructions that GCC cannot be brought to choose from the lane code above:
 * vminps/vmaxps for the clamp (NaN kept: the second operand wins), and with AVX-512F
 * vrndscaleps for n and vscalefps for p * 2^n (one rounding, so subnormal results come
 * out as the two scalings give them). Every variant gives tgc_exp2f_lane's bits for every
 * f32, NaN payloads included (checked over all 2^32 inputs, 2026-11-29); the baseline
 * variants (SSE2, AVX without FMA) run the lane code lane by lane. Static: each
 * translation unit has its own copies, under the names the vectoriser calls. The AVX2 and
 * AVX-512F variants are also inlined into the explicit vector loops of tgc_exp2f_x8/x16
 * (declared inline, and AVX2's compiled for x86-64-v3 as the function it goes into: GCC
 * inlines no function of another -march). */
__attribute__((simd(\"notinbranch\"), const, nothrow)) float tgc_exp2f(float x);
__attribute__((used)) static float tgc_exp2f_scalar(float x) __asm__(\"tgc_exp2f\");
static float tgc_exp2f_scalar(float x) { return tgc_exp2f_lane(x); }
__attribute__((used)) static __m128 tgc_exp2f_v4(__m128 x) __asm__(\"_ZGVbN4v_tgc_exp2f\");
static __m128 tgc_exp2f_v4(__m128 x)
{
    float v[4];
    memcpy(v, &x, sizeof v);
    for (int i = 0; i < 4; i += 1) v[i] = tgc_exp2f_lane(v[i]);
    memcpy(&x, v, sizeof x);
    return x;
}
__attribute__((used, target(\"avx\"))) static __m256 tgc_exp2f_v8c(__m256 x) __asm__(\"_ZGVcN8v_tgc_exp2f\");
__attribute__((target(\"avx\"))) static __m256 tgc_exp2f_v8c(__m256 x)
{
    float v[8];
    memcpy(v, &x, sizeof v);
    for (int i = 0; i < 8; i += 1) v[i] = tgc_exp2f_lane(v[i]);
    memcpy(&x, v, sizeof x);
    return x;
}
__attribute__((used, target(\"arch=x86-64-v3\"))) static __m256 tgc_exp2f_v8(__m256 x) __asm__(\"_ZGVdN8v_tgc_exp2f\");
__attribute__((target(\"arch=x86-64-v3\"))) static inline __m256 tgc_exp2f_v8(__m256 x)
{
    const __m256 m = _mm256_set1_ps(12582912.0f);
    const __m256 c = _mm256_max_ps(_mm256_set1_ps(-160.0f), _mm256_min_ps(_mm256_set1_ps(160.0f), x));
    const __m256 t = _mm256_add_ps(c, m);
    const __m256 r = _mm256_sub_ps(c, _mm256_sub_ps(t, m));
    __m256 p = _mm256_set1_ps(1.5345812e-04f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3399931e-03f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(9.618489e-03f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.5503286e-02f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(2.4022646e-01f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(6.931472e-01f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i n = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4b400000));
    const __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1), bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
__attribute__((used, target(\"avx512f\"))) static __m512 tgc_exp2f_v16(__m512 x) __asm__(\"_ZGVeN16v_tgc_exp2f\");
__attribute__((target(\"avx512f\"))) static inline __m512 tgc_exp2f_v16(__m512 x)
{
    const __m512 c = _mm512_max_ps(_mm512_set1_ps(-160.0f), _mm512_min_ps(_mm512_set1_ps(160.0f), x));
    const __m512 n = _mm512_roundscale_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_sub_ps(c, n);
    __m512 p = _mm512_set1_ps(1.5345812e-04f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3399931e-03f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(9.618489e-03f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.5503286e-02f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.4022646e-01f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.931472e-01f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
#else
static inline float tgc_exp2f(float x) { return tgc_exp2f_lane(x); }
#endif",
    ),
    (
        "tgc_f32xn",
        "/* Vectors of 8 and 16 floats (GCC and Clang vector extensions) for explicitly vectorised
 * loops (emit::c's Isa, a pooled epilogue's windows), with the int32 lanes of their compares
 * (selects of bits); the _u types load and store at any float's address. */
typedef float tgc_f32x8 __attribute__((vector_size(32)));
typedef float tgc_f32x16 __attribute__((vector_size(64)));
typedef int32_t tgc_i32x8 __attribute__((vector_size(32)));
typedef int32_t tgc_i32x16 __attribute__((vector_size(64)));
typedef float tgc_f32x8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef float tgc_f32x16u __attribute__((vector_size(64), aligned(4), may_alias));",
    ),
    (
        "tgc_even_f32xn",
        "/* The elements 0, 2, ..., 2w - 2 from p: two loads of w floats, at p and at p + w - 1 (no
 * element past the last one taken), and one shuffle of their even and odd lanes. */
#if defined(__clang__)
#define TGC_EVEN8(p) ((tgc_f32x8)__builtin_shufflevector(*(const tgc_f32x8u*)(p), *(const tgc_f32x8u*)((p) + 7), 0, 2, 4, 6, 9, 11, 13, 15))
#define TGC_EVEN16(p) ((tgc_f32x16)__builtin_shufflevector(*(const tgc_f32x16u*)(p), *(const tgc_f32x16u*)((p) + 15), 0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31))
#else
#define TGC_EVEN8(p) ((tgc_f32x8)__builtin_shuffle(*(const tgc_f32x8u*)(p), *(const tgc_f32x8u*)((p) + 7), (tgc_i32x8){0, 2, 4, 6, 9, 11, 13, 15}))
#define TGC_EVEN16(p) ((tgc_f32x16)__builtin_shuffle(*(const tgc_f32x16u*)(p), *(const tgc_f32x16u*)((p) + 15), (tgc_i32x16){0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31}))
#endif",
    ),
    (
        "tgc_exp2f_xn",
        "/* tgc_exp2f of every lane of a vector, the same bits: its vector variants, to be inlined into
 * the AVX-512F and AVX2 copies of a function (emit::c's Isa). */
#if defined(TGC_VECTOR_ABI)
__attribute__((target(\"avx512f\"), always_inline)) static inline tgc_f32x16 tgc_exp2f_x16(tgc_f32x16 x) { return (tgc_f32x16)tgc_exp2f_v16((__m512)x); }
__attribute__((target(\"arch=x86-64-v3\"), always_inline)) static inline tgc_f32x8 tgc_exp2f_x8(tgc_f32x8 x) { return (tgc_f32x8)tgc_exp2f_v8((__m256)x); }
#endif",
    ),
    (
        "tgc_where_f32",
        "/* WHERE as a select of bits, no branch: both operands are evaluated, as the interpreter
 * does and as a vector loop must (an operand never reads out of bounds: the padding's guards
 * are ternaries inside it). A ternary would let GCC sink a tgc_exp2f into the arm that uses
 * it, and a branch around a call is a loop that GCC leaves scalar (52 ms instead of 1.1 ms
 * for exp(x) - 1 where x < 0 over 4096x1024 on one thread, 2026-11-29). Any nonzero c is true. */
static inline float tgc_where_f32(uint8_t c, float a, float b)
{
    uint32_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    const uint32_t m = 0u - (uint32_t)(c != 0), r = (ua & m) | (ub & ~m);
    float y;
    memcpy(&y, &r, sizeof y);
    return y;
}",
    ),
    (
        "tgc_where_i32",
        "/* tgc_where_f32 for int32_t. */
static inline int32_t tgc_where_i32(uint8_t c, int32_t a, int32_t b)
{
    const uint32_t m = 0u - (uint32_t)(c != 0);
    return (int32_t)(((uint32_t)a & m) | ((uint32_t)b & ~m));
}",
    ),
    (
        "tgc_where_u8",
        "/* tgc_where_f32 for bool (one byte). */
static inline uint8_t tgc_where_u8(uint8_t c, uint8_t a, uint8_t b)
{
    const uint8_t m = (uint8_t)(0u - (unsigned)(c != 0));
    return (uint8_t)((a & m) | (b & (uint8_t)~m));
}",
    ),
    (
        "tgc_f16_to_f32",
        "static inline float tgc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0x1fu) {
        x = sign | 0x7f800000u | (m << 13);
    } else if (e != 0) {
        x = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) {
        x = sign;
    } else { /* subnormal: normalise */
        e = 113u;
        while (!(m & 0x400u)) {
            m <<= 1;
            e -= 1;
        }
        x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}",
    ),
    (
        "tgc_f32_to_f16",
        "/* Round to nearest even; overflow to infinity; NaN stays NaN. */
static inline uint16_t tgc_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u;
    if (ax >= 0x47800000u) return sign | 0x7c00u;
    if (ax >= 0x38800000u) { /* normal: rebias, round the 13 dropped bits */
        uint32_t r = ax - 0x38000000u;
        r += 0x0fffu + ((r >> 13) & 1u);
        return sign | (uint16_t)(r >> 13);
    }
    if (ax < 0x33000000u) return sign;
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) r += 1u;
    return sign | (uint16_t)r;
}",
    ),
    (
        "tgc_bf16_to_f32",
        "static inline float tgc_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}",
    ),
    (
        "tgc_f32_to_bf16",
        "/* Round to nearest even; NaN stays NaN. */
static inline uint16_t tgc_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}",
    ),
    ("tgc_round_f16", "static inline float tgc_round_f16(float x) { return tgc_f16_to_f32(tgc_f32_to_f16(x)); }"),
    ("tgc_round_bf16", "static inline float tgc_round_bf16(float x) { return tgc_bf16_to_f32(tgc_f32_to_bf16(x)); }"),
    (
        "tgc_f32_to_i32",
        "/* CAST to i32 (tgc_runtime::DType::cast): truncation toward zero, saturating at INT32_MIN and
 * INT32_MAX, NaN to 0; C's conversion is undefined outside the range. */
static inline int32_t tgc_f32_to_i32(float x)
{
    if (x != x) return 0;
    if (x >= 2147483648.0f) return INT32_MAX;
    if (x < -2147483648.0f) return INT32_MIN;
    return (int32_t)x;
}",
    ),
    ("tgc_max_f32", "/* NaN if either is NaN (`a` if it is one, else `b`), as the interpreter; `b` on a tie;\n * one select of two compares, which vectorises to four instructions. */\nstatic inline float tgc_max_f32(float a, float b) { return (a > b || a != a) ? a : b; }"),
    ("tgc_min_f32", "/* NaN if either is NaN (`a` if it is one, else `b`), as the interpreter; `b` on a tie;\n * one select of two compares, which vectorises to four instructions. */\nstatic inline float tgc_min_f32(float a, float b) { return (a < b || a != a) ? a : b; }"),
    ("tgc_relu_f32", "static inline float tgc_relu_f32(float x) { return x < 0.0f ? 0.0f : x; }"),
    ("tgc_add_i32", "static inline int32_t tgc_add_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }"),
    ("tgc_sub_i32", "static inline int32_t tgc_sub_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }"),
    ("tgc_mul_i32", "static inline int32_t tgc_mul_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }"),
    ("tgc_neg_i32", "static inline int32_t tgc_neg_i32(int32_t a) { return (int32_t)(0u - (uint32_t)a); }"),
    ("tgc_max_i32", "static inline int32_t tgc_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }"),
    ("tgc_min_i32", "static inline int32_t tgc_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }"),
    ("tgc_v8f", "/* Eight floats in one register (GCC and Clang vector extensions). */\ntypedef float tgc_v8f __attribute__((vector_size(32)));\ntypedef int32_t tgc_v8i __attribute__((vector_size(32)));\n#if defined(__clang__)\n#define TGC_SHIFT8(z, v, d) ((d) == 1 ? __builtin_shufflevector(z, v, 0, 8, 9, 10, 11, 12, 13, 14) : (d) == 2 ? __builtin_shufflevector(z, v, 0, 1, 8, 9, 10, 11, 12, 13) : __builtin_shufflevector(z, v, 0, 1, 2, 3, 8, 9, 10, 11))\n#else\n#define TGC_SHIFT8(z, v, d) ((d) == 1 ? __builtin_shuffle(z, v, (tgc_v8i){0, 8, 9, 10, 11, 12, 13, 14}) : (d) == 2 ? __builtin_shuffle(z, v, (tgc_v8i){0, 1, 8, 9, 10, 11, 12, 13}) : __builtin_shuffle(z, v, (tgc_v8i){0, 1, 2, 3, 8, 9, 10, 11}))\n#endif"),
    ("tgc_scan8_add", "/* v[0..8] becomes its inclusive sum plus acc (loop_ir::SCAN_LANES; Hillis and Steele 1986): in one\n * register, v plus itself shifted up by 1, 2, then 4 lanes, -0.0 shifted in (which adds nothing). */\nstatic inline void tgc_scan8_add(float* v, float acc)\n{\n    const tgc_v8f z = {-0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f, -0.0f};\n    tgc_v8f s;\n    memcpy(&s, v, sizeof s);\n    s = s + TGC_SHIFT8(z, s, 1);\n    s = s + TGC_SHIFT8(z, s, 2);\n    s = s + TGC_SHIFT8(z, s, 4);\n    s = s + acc;\n    memcpy(v, &s, sizeof s);\n}"),
    ("tgc_scan8_mul", "/* v[0..8] becomes its inclusive product times acc, as tgc_scan8_add with 1 shifted in. */\nstatic inline void tgc_scan8_mul(float* v, float acc)\n{\n    const tgc_v8f z = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};\n    tgc_v8f s;\n    memcpy(&s, v, sizeof s);\n    s = s * TGC_SHIFT8(z, s, 1);\n    s = s * TGC_SHIFT8(z, s, 2);\n    s = s * TGC_SHIFT8(z, s, 4);\n    s = s * acc;\n    memcpy(v, &s, sizeof s);\n}"),
    ("tgc_gather_at", "/* GATHER's position for index value v on an axis of size d (tiny::op::gather_position):\n * negative counts from the end, then clamped to [0, d). */\nstatic inline int64_t tgc_gather_at(int32_t v, int64_t d) { int64_t i = v < 0 ? (int64_t)v + d : (int64_t)v; return i < 0 ? 0 : i >= d ? d - 1 : i; }"),
];

/// `tgc_max_run_f32` and `tgc_min_run_f32` ([`RUN_HELPERS`]): this text with
/// `OP` replaced by `max` or `min`, printed after [`HELPERS`] (it calls
/// `tgc_OP_f32` and the intrinsics of `tgc_immintrin`).
const RUN_F32: &str = "/* acc[j % 32] = tgc_OP_f32(acc[j % 32], x[j]) for j = 0, 1, ..., n - 1 in turn: a MAX or MIN
 * reduction of a run of n floats in the 32 lanes of cpu::lanes, exactly as the printed lane
 * loop computes it. Where the CPU has AVX-512F or AVX2 the lanes are vector registers updated
 * by vOPps, which is tgc_OP_f32 for every pair but one with a NaN (its second operand wins,
 * not the first); the run's NaNs are watched by one unordered compare per two vectors, and a
 * run that has one (or an acc that has one) is done again lane by lane. Softmax 4096x1024, one
 * thread of a Zen 4 EPYC: 1.69 -> 1.55 ms (scratch driver, best of 40, 2026-11-29), the four
 * instructions of tgc_OP_f32's select being one chain per vector of lanes. */
TGC_CLONES static void tgc_OP_run_exact(const float* restrict x, int64_t n, float* restrict acc)
{
    const int64_t full = n / 32 * 32;
    for (int64_t r = 0; r < full; r += 32)
        for (int64_t l = 0; l < 32; l += 1) acc[l] = tgc_OP_f32(acc[l], x[r + l]);
    for (int64_t l = 0; full + l < n; l += 1) acc[l] = tgc_OP_f32(acc[l], x[full + l]);
}
#if defined(TGC_VECTOR_ABI)
__attribute__((target(\"avx512f\"))) static void tgc_OP_run_v16(const float* restrict x, int64_t n, float* restrict acc)
{
    __m512 a0 = _mm512_loadu_ps(acc), a1 = _mm512_loadu_ps(acc + 16);
    __mmask16 nan = _mm512_cmp_ps_mask(a0, a1, _CMP_UNORD_Q);
    const int64_t full = n / 32 * 32;
    for (int64_t r = 0; r < full; r += 32) {
        const __m512 x0 = _mm512_loadu_ps(x + r), x1 = _mm512_loadu_ps(x + r + 16);
        nan |= _mm512_cmp_ps_mask(x0, x1, _CMP_UNORD_Q);
        a0 = _mm512_OP_ps(a0, x0);
        a1 = _mm512_OP_ps(a1, x1);
    }
    if (nan) {
        tgc_OP_run_exact(x, n, acc);
        return;
    }
    float t[32];
    _mm512_storeu_ps(t, a0);
    _mm512_storeu_ps(t + 16, a1);
    for (int64_t l = 0; full + l < n; l += 1) t[l] = tgc_OP_f32(t[l], x[full + l]);
    memcpy(acc, t, sizeof t);
}
__attribute__((target(\"avx2\"))) static void tgc_OP_run_v8(const float* restrict x, int64_t n, float* restrict acc)
{
    /* Four named vectors, not an array: GCC 12 kept an array of them in memory, stored in
     * halves and loaded whole, and the run took 2.4 ms instead of 0.3 (4096x1024). */
    __m256 a0 = _mm256_loadu_ps(acc), a1 = _mm256_loadu_ps(acc + 8), a2 = _mm256_loadu_ps(acc + 16), a3 = _mm256_loadu_ps(acc + 24);
    __m256 nan = _mm256_or_ps(_mm256_cmp_ps(a0, a1, _CMP_UNORD_Q), _mm256_cmp_ps(a2, a3, _CMP_UNORD_Q));
    const int64_t full = n / 32 * 32;
    for (int64_t r = 0; r < full; r += 32) {
        const __m256 x0 = _mm256_loadu_ps(x + r), x1 = _mm256_loadu_ps(x + r + 8);
        const __m256 x2 = _mm256_loadu_ps(x + r + 16), x3 = _mm256_loadu_ps(x + r + 24);
        nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(x0, x1, _CMP_UNORD_Q), _mm256_cmp_ps(x2, x3, _CMP_UNORD_Q)));
        a0 = _mm256_OP_ps(a0, x0);
        a1 = _mm256_OP_ps(a1, x1);
        a2 = _mm256_OP_ps(a2, x2);
        a3 = _mm256_OP_ps(a3, x3);
    }
    if (_mm256_movemask_ps(nan)) {
        tgc_OP_run_exact(x, n, acc);
        return;
    }
    float t[32];
    _mm256_storeu_ps(t, a0);
    _mm256_storeu_ps(t + 8, a1);
    _mm256_storeu_ps(t + 16, a2);
    _mm256_storeu_ps(t + 24, a3);
    for (int64_t l = 0; full + l < n; l += 1) t[l] = tgc_OP_f32(t[l], x[full + l]);
    memcpy(acc, t, sizeof t);
}
#endif
static void tgc_OP_run_f32(const float* restrict x, int64_t n, float* restrict acc)
{
#if defined(TGC_VECTOR_ABI)
    __builtin_cpu_init();
    if (TGC_MAX_ISA >= 2 && __builtin_cpu_supports(\"avx512f\")) {
        tgc_OP_run_v16(x, n, acc);
        return;
    }
    if (TGC_MAX_ISA >= 1 && __builtin_cpu_supports(\"avx2\")) {
        tgc_OP_run_v8(x, n, acc);
        return;
    }
#endif
    tgc_OP_run_exact(x, n, acc);
}";

/// The helpers made from [`RUN_F32`], and the operation of each.
const RUN_HELPERS: [(&str, &str); 2] = [("tgc_max_run_f32", "max"), ("tgc_min_run_f32", "min")];
const _: () = assert!(
    RtIsa::Avx512.level() == 2 && RtIsa::Avx2.level() == 1,
    "RUN_F32 and CLONES test TGC_MAX_ISA against these levels"
);
const _: () = assert!(lanes::LANES == 32, "RUN_F32 is written for the 32 lanes of cpu::lanes");

/// The `#pragma scop` line that opens the nests of `ks` and the
/// `#pragma endscop` line that closes them, or none where one of them
/// gathers (a subscript that is a value is not affine: not a SCoP).
fn scop_pragmas(ks: &[&Kernel]) -> (&'static str, &'static str) {
    if ks.iter().all(|k| k.gathers().is_empty()) {
        ("#pragma scop\n", "#pragma endscop\n")
    } else {
        ("", "")
    }
}

/// Which helpers a helper calls.
fn helper_deps(name: &str) -> &'static [&'static str] {
    match name {
        "tgc_round_f16" => &["tgc_f16_to_f32", "tgc_f32_to_f16"],
        "tgc_round_bf16" => &["tgc_bf16_to_f32", "tgc_f32_to_bf16"],
        "tgc_scan8_add" | "tgc_scan8_mul" => &["tgc_v8f"],
        "tgc_exp2f" => &["tgc_immintrin"],
        "tgc_exp2f_xn" => &["tgc_immintrin", "tgc_exp2f", "tgc_f32xn"],
        "tgc_even_f32xn" => &["tgc_f32xn"],
        "tgc_max_run_f32" => &["tgc_immintrin", "tgc_max_f32"],
        "tgc_min_run_f32" => &["tgc_immintrin", "tgc_min_f32"],
        _ => &[],
    }
}

/// The C type a value of `dt` is computed in.
fn compute_ty(dt: DType) -> &'static str {
    match dt {
        DType::F16 | DType::BF16 | DType::F32 => "float",
        DType::I32 => "int32_t",
        DType::Bool => "uint8_t",
    }
}

/// The C type a buffer of `dt` stores (f16 and bf16 as their bits, bool
/// as one byte holding 0 or 1): the kernels' and the model header's.
pub(crate) fn storage_ty(dt: DType) -> &'static str {
    match dt {
        DType::F16 | DType::BF16 => "uint16_t",
        DType::F32 => "float",
        DType::I32 => "int32_t",
        DType::Bool => "uint8_t",
    }
}

/// The printer's state: the program and the helpers used so far.
struct Printer<'a> {
    g: &'a Graph,
    p: &'a Program,
    used: BTreeSet<&'static str>,
    /// The local temporaries of the row group being printed: held as one
    /// row, addressed by [`rows::row_subscript`].
    local: BTreeSet<BufId>,
    /// The instruction set of the copy being printed ([`Printer::per_isa`]),
    /// whose lane loops may then be explicit vectors
    /// ([`Printer::vector_lanes`], [`Printer::vector_points`]); `None`
    /// elsewhere.
    isa: Option<Isa>,
    /// Whether a lane loop of the function being printed came out as
    /// explicit vectors.
    vectorised: bool,
}

/// An instruction set a function (a row function or a plain kernel) is
/// printed for when a lane loop of it computes `EXP2` (`004` §SIMD lowering: vector code with a scalar tail):
/// then, where `TGC_VECTOR_ABI` is defined (x86-64, GCC 12 or later), the
/// function is printed once per `Isa`, each copy's lane loop as explicit
/// vectors of [`Isa::width`] floats calling that width's `tgc_exp2f_x*`,
/// beside the usual print under `TGC_CLONES` (`NAME_portable`), and a
/// dispatcher runs the copy the CPU can. GCC's own vectoriser calls
/// `tgc_exp2f`'s vector variant out of line and keeps the lanes in memory
/// around the call; with the variant inlined into explicit vectors,
/// softmax 4096×1024 on one thread of a Zen 4 EPYC went from 1.61 to 1.31
/// ms, and from 2.81 to 2.10 ms in the AVX2 copy (scratch driver, same
/// bits). The variants are written in each ISA's intrinsics,
/// which only a function compiled for that ISA can inline: hence copies,
/// not `target_clones`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    /// AVX-512F (`tgc_exp2f_v16`: `vrndscaleps`, `vscalefps`).
    Avx512,
    /// x86-64-v3: AVX2 with FMA (`tgc_exp2f_v8`).
    Avx2,
}

impl Isa {
    /// Floats in one vector of this ISA (`plan::target::f32_lanes`).
    fn width(self) -> usize {
        crate::plan::target::f32_lanes(self.runtime()) as usize
    }

    /// The suffix of this ISA's copy of a function.
    fn suffix(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2",
        }
    }

    /// The runtime's name for this ISA, whose [`RtIsa::level`] is the
    /// `TGC_MAX_ISA` from which the dispatcher may run this copy.
    fn runtime(self) -> RtIsa {
        match self {
            Isa::Avx512 => RtIsa::Avx512,
            Isa::Avx2 => RtIsa::Avx2,
        }
    }

    /// The attribute that compiles a copy for this ISA (the targets of two
    /// of `TGC_CLONES`'s clones).
    fn attribute(self) -> &'static str {
        match self {
            Isa::Avx512 => "__attribute__((target(\"avx512f\")))",
            Isa::Avx2 => "__attribute__((target(\"arch=x86-64-v3\")))",
        }
    }
}

impl Printer<'_> {
    fn call(&mut self, helper: &'static str, args: &[String]) -> String {
        self.used.insert(helper);
        format!("{helper}({})", args.join(", "))
    }

    fn literal(&self, value: f64, dt: DType) -> String {
        match dt {
            DType::F16 | DType::BF16 | DType::F32 => {
                let v = value as f32;
                if v.is_nan() {
                    "NAN".into()
                } else if v.is_infinite() {
                    if v > 0.0 {
                        "INFINITY".into()
                    } else {
                        "(-INFINITY)".into()
                    }
                } else if v.is_sign_negative() {
                    format!("({v:?}f)")
                } else {
                    format!("{v:?}f")
                }
            }
            DType::I32 => match value as i32 {
                i32::MIN => "INT32_MIN".into(),
                v if v < 0 => format!("({v})"),
                v => v.to_string(),
            },
            DType::Bool => if value != 0.0 { "1" } else { "0" }.into(),
        }
    }

    /// `x` (computed as `from`) rounded to the precision of `to`.
    fn round_to(&mut self, x: String, to: DType) -> String {
        match to {
            DType::F16 => self.call("tgc_round_f16", &[x]),
            DType::BF16 => self.call("tgc_round_bf16", &[x]),
            _ => x,
        }
    }

    fn cast(&mut self, x: String, from: DType, to: DType) -> String {
        use DType::*;
        match (from, to) {
            _ if from == to => x,
            (F16 | BF16 | F32, F32) => x,
            (F16 | BF16 | F32, F16 | BF16) => self.round_to(x, to),
            (F16 | BF16 | F32, I32) => self.call("tgc_f32_to_i32", &[x]),
            (F16 | BF16 | F32, Bool) => format!("(uint8_t)({x} != 0.0f)"),
            (I32, F16 | BF16 | F32) => self.round_to(format!("(float){x}"), to),
            (I32, Bool) => format!("(uint8_t)({x} != 0)"),
            (Bool, F16 | BF16 | F32) => format!("(float){x}"),
            (Bool, I32) => format!("(int32_t){x}"),
            (I32 | Bool, _) => x,
        }
    }

    fn unary(&mut self, op: UnaryOp, x: String, dt: DType) -> String {
        if dt == DType::I32 {
            return match op {
                UnaryOp::Neg => self.call("tgc_neg_i32", &[x]),
                _ => self.call("tgc_max_i32", &[x, "0".into()]),
            };
        }
        match op {
            UnaryOp::Neg => format!("(-{x})"),
            UnaryOp::Relu => self.call("tgc_relu_f32", &[x]),
            UnaryOp::Exp2 => self.call("tgc_exp2f", &[x]),
            UnaryOp::Log2 => format!("log2f({x})"),
            UnaryOp::Sqrt => format!("sqrtf({x})"),
            UnaryOp::Rsqrt => format!("(1.0f / sqrtf({x}))"),
            UnaryOp::Recip => format!("(1.0f / {x})"),
        }
    }

    /// `op(a, b)` on operands of dtype `dt` (also the accumulator updates).
    fn binary(&mut self, op: BinaryOp, a: String, b: String, dt: DType) -> String {
        let infix = |o: &str| format!("({a} {o} {b})");
        match (op, dt) {
            (BinaryOp::Cmplt, _) => format!("(uint8_t){}", infix("<")),
            (BinaryOp::Cmpeq, _) => format!("(uint8_t){}", infix("==")),
            (BinaryOp::Add, DType::I32) => self.call("tgc_add_i32", &[a, b]),
            (BinaryOp::Sub, DType::I32) => self.call("tgc_sub_i32", &[a, b]),
            (BinaryOp::Mul, DType::I32) => self.call("tgc_mul_i32", &[a, b]),
            (BinaryOp::Max, DType::I32) => self.call("tgc_max_i32", &[a, b]),
            (BinaryOp::Min, DType::I32) => self.call("tgc_min_i32", &[a, b]),
            (BinaryOp::Add | BinaryOp::Max, DType::Bool) => format!("(uint8_t){}", infix("|")),
            (BinaryOp::Min | BinaryOp::Mul, DType::Bool) => format!("(uint8_t){}", infix("&")),
            (BinaryOp::Add, _) => infix("+"),
            (BinaryOp::Sub, _) => infix("-"),
            (BinaryOp::Mul, _) => infix("*"),
            (BinaryOp::Fdiv, _) => infix("/"),
            (BinaryOp::Max, _) => self.call("tgc_max_f32", &[a, b]),
            (BinaryOp::Min, _) => self.call("tgc_min_f32", &[a, b]),
        }
    }

    /// The new value of the accumulator `acc` of `k`'s sum `id` (as for
    /// [`packed::fused_factors`]) after one more `value`: one `fmaf` for the
    /// packed template's sums of products, else `op`.
    fn update(&mut self, k: &Kernel, id: Option<u32>, op: ReduceOp, acc: String, value: &Expr, dt: DType) -> String {
        match packed::fused_factors(k, id, value) {
            Some((x, y)) => format!("fmaf({}, {}, {acc})", self.expr(x), self.expr(y)),
            None => {
                let x = self.expr(value);
                self.binary(op.combine(), acc, x, dt)
            }
        }
    }

    /// The stored element `at` of a buffer of `dtype` in its compute type
    /// (f16/bf16 bits widened to float).
    fn widen(&mut self, at: String, dtype: DType) -> String {
        match dtype {
            DType::F16 => self.call("tgc_f16_to_f32", &[at]),
            DType::BF16 => self.call("tgc_bf16_to_f32", &[at]),
            DType::F32 | DType::I32 | DType::Bool => at,
        }
    }

    /// An expression. Every printed expression is a primary, postfix, unary or
    /// cast expression, or parenthesised, so it is safe as any operand.
    fn expr(&mut self, e: &Expr) -> String {
        match e {
            Expr::Load { buf, index, dtype } => {
                let at = format!("{}[{}]", self.p.buffer(*buf).name, bare(aff(&self.subscript(*buf, index), Lang::C)));
                self.widen(at, *dtype)
            }
            Expr::Gather { buf, base, stride, extent, at, dtype } => {
                let v = self.expr(at);
                let pos = self.call("tgc_gather_at", &[v, aff(extent, Lang::C)]);
                let index = format!("{} + {} * {pos}", aff(base, Lang::C), aff(stride, Lang::C));
                self.widen(format!("{}[{index}]", self.p.buffer(*buf).name), *dtype)
            }
            Expr::Const { value, dtype } => self.literal(*value, *dtype),
            Expr::Acc { dtype } => self.round_to("acc".into(), *dtype),
            Expr::Reduce { id, dtype, .. } => self.round_to(format!("acc{id}"), *dtype),
            Expr::Unary { op, x } => {
                let xs = self.expr(x);
                self.unary(*op, xs, x.dtype())
            }
            Expr::Binary { op, a, b } => {
                let (sa, sb) = (self.expr(a), self.expr(b));
                self.binary(*op, sa, sb, a.dtype())
            }
            Expr::Cast { to, x } => {
                let xs = self.expr(x);
                self.cast(xs, x.dtype(), *to)
            }
            Expr::Where { cond, a, b } => {
                let args = [self.expr(cond), self.expr(a), self.expr(b)];
                let helper = match compute_ty(a.dtype()) {
                    "float" => "tgc_where_f32",
                    "int32_t" => "tgc_where_i32",
                    _ => "tgc_where_u8",
                };
                self.call(helper, &args)
            }
            Expr::Select { valid, then, otherwise } => {
                format!("(({}) ? {} : {})", guard(valid, Lang::C), self.expr(then), self.expr(otherwise))
            }
        }
    }

    fn kernel(&mut self, k: &Kernel, symbol: &str) -> String {
        let p = self.p;
        let mut s = String::new();
        let _ = writeln!(s, "/* {} */", kernel_summary(self.g, p, k));
        if let Some(c) = packed::of(k) {
            self.packed(&mut s, k, c, symbol);
            return s;
        }
        if let Some(sc) = &k.scan {
            self.scan(&mut s, k, sc, symbol);
            return s;
        }
        // A plain nest of a row group's form runs its rows on the pool.
        if rows::can_join(k) {
            self.row_tasks(&mut s, &format!("tgc_{}_{symbol}", k.name), &[k], &[]);
            return s;
        }
        let (bufs, syms) = ctx_fields(p, &[k], &[]);
        let params = kernel_params(&bufs, &syms);
        let (open, close) = scop_pragmas(&[k]);
        let name = format!("tgc_{}_{symbol}", k.name);
        let args: Vec<String> = bufs.iter().chain(&syms).map(|(_, n)| n.clone()).collect();
        self.per_isa(&mut s, &name, "void", &params, &args, &mut |pr, suffix| {
            let attribute = pr.isa.map_or("TGC_CLONES", Isa::attribute);
            let mut f = format!("{attribute} static void {name}{suffix}({})\n{{\n{open}", params.join(", "));
            pr.nest(&mut f, k, &k.nest(), 1);
            f.push_str(close);
            f.push_str("}\n");
            f
        });
        s
    }

    /// A row group ([`crate::cpu::rows`]): its kernels' row tasks, one
    /// function named by [`group_name`].
    fn group(&mut self, g: &RowGroup, symbol: &str) -> String {
        let p = self.p;
        let ks: Vec<&Kernel> = p.kernels[g.kernels.clone()].iter().collect();
        let mut s = String::new();
        let local: Vec<&str> = g.local.iter().map(|&b| p.buffer(b).name.as_str()).collect();
        let _ = writeln!(
            s,
            "/* Row by row over i0: {}; one row of {} per task. */",
            ks.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", "),
            if local.is_empty() { "nothing".to_string() } else { local.join(", ") }
        );
        for k in &ks {
            let _ = writeln!(s, "/* {} */", kernel_summary(self.g, p, k));
        }
        self.row_tasks(&mut s, &group_name(p, g, symbol), &ks, &g.local);
        s
    }

    /// Plain kernels sharing their outermost loop `i0` (one kernel, or a row
    /// group's) on the pool: `NAME_rows` runs every kernel's nest inside
    /// each row `∈ [pk_lo, pk_hi)` (a point of `i0`, or of a lone kernel's
    /// flattened [`rows::part_loops`]), holding one row of each `local`
    /// temporary; `NAME_task` runs one part; `NAME` splits the rows into
    /// parts of about [`MIN_TASK_POINTS`] loop points, at most one a
    /// thread, and runs them on `rt`'s pool, or on the caller's thread when
    /// there is one part. With local temporaries the functions return 1
    /// when a part cannot allocate its rows, else 0; without, they return
    /// nothing.
    fn row_tasks(&mut self, s: &mut String, name: &str, ks: &[&Kernel], local: &[BufId]) {
        let p = self.p;
        let (bufs, syms) = ctx_fields(p, ks, local);
        let params = kernel_params(&bufs, &syms);
        let ret = if local.is_empty() { "void" } else { "int32_t" };
        let mut rows_params = params.clone();
        rows_params.extend(["const int64_t pk_lo".to_string(), "const int64_t pk_hi".to_string()]);
        let direct: Vec<String> = bufs.iter().chain(&syms).map(|(_, n)| n.clone()).collect();
        let mut args = direct.clone();
        args.extend(["pk_lo".to_string(), "pk_hi".to_string()]);
        if !local.is_empty() {
            rows_params.push("const tgc_rt* rt".into());
            args.push("rt".into());
        }
        self.per_isa(s, &format!("{name}_rows"), ret, &rows_params, &args, &mut |pr, suffix| {
            pr.rows_function(name, suffix, ret, ks, local, &rows_params, &syms)
        });
        let failed = if local.is_empty() { "" } else { "    const tgc_rt* rt;\n    int32_t failed;\n" };
        ctx_struct(s, name, &bufs, &syms, &format!("    int64_t nt;\n{failed}"));
        let extent = dim(&Dim::product(&ks[0].loops[..part_loops(ks)]), Lang::C);
        let _ = writeln!(s, "static void {name}_task(void* pk_vctx, int64_t pk_t)\n{{");
        let cst = if local.is_empty() { "const " } else { "" };
        let _ = writeln!(s, "    {cst}struct {name}_ctx* pk_ctx = ({cst}struct {name}_ctx*)pk_vctx;");
        for (_, n) in &syms {
            let _ = writeln!(s, "    const int64_t {n} = pk_ctx->{n};");
        }
        let _ = writeln!(s, "    const int64_t pk_e = {extent};");
        let mut args: Vec<String> = bufs.iter().map(|(_, n)| format!("pk_ctx->{n}")).collect();
        args.extend(syms.iter().map(|(_, n)| n.clone()));
        args.extend(["pk_e * pk_t / pk_ctx->nt".to_string(), "pk_e * (pk_t + 1) / pk_ctx->nt".to_string()]);
        if !local.is_empty() {
            args.push("pk_ctx->rt".into());
        }
        if local.is_empty() {
            let _ = writeln!(s, "    {name}_rows({});\n}}\n", args.join(", "));
        } else {
            let _ = writeln!(
                s,
                "    if ({name}_rows({})) __atomic_store_n(&pk_ctx->failed, 1, __ATOMIC_RELAXED);\n}}\n",
                args.join(", ")
            );
        }
        let mut work = Vec::new();
        for k in ks {
            let mut w: Vec<Dim> = k.loops.clone();
            w.extend(k.reduce.iter().flat_map(|r| r.loops.iter().cloned()));
            for e in k.computed_at() {
                if let Expr::Reduce { loops, .. } = e {
                    w.extend(loops.iter().cloned());
                }
            }
            work.push(dim(&Dim::product(&w), Lang::C));
        }
        let work = if work.len() == 1 { work.remove(0) } else { format!("({})", work.join(" + ")) };
        let mut params = params;
        params.push("const tgc_rt* rt".into());
        let serial = if local.is_empty() {
            format!("{name}_rows({}, 0, pk_e);\n        return;", direct.join(", "))
        } else {
            format!("return {name}_rows({}, 0, pk_e, rt);", direct.join(", "))
        };
        let _ = writeln!(
            s,
            "static {ret} {name}({})
{{
    /* About {MIN_TASK_POINTS} loop points a part, at most one part a thread. */
    const int64_t pk_e = {extent};
    int64_t pk_nt = {work} / {MIN_TASK_POINTS};
    if (pk_nt > rt->threads) pk_nt = rt->threads;
    if (pk_nt > pk_e) pk_nt = pk_e;
    if (pk_nt <= 1) {{
        {serial}
    }}
    struct {name}_ctx pk_ctx;",
            params.join(", "),
        );
        for n in &direct {
            let _ = writeln!(s, "    pk_ctx.{n} = {n};");
        }
        if local.is_empty() {
            let _ = writeln!(s, "    pk_ctx.nt = pk_nt;\n    rt->parallel_for(rt, pk_nt, {name}_task, &pk_ctx);\n}}");
        } else {
            let _ = writeln!(
                s,
                "    pk_ctx.nt = pk_nt;\n    pk_ctx.rt = rt;\n    pk_ctx.failed = 0;\n    rt->parallel_for(rt, pk_nt, {name}_task, &pk_ctx);\n    return pk_ctx.failed;\n}}"
            );
        }
    }

    /// The function `NAME` that `print(self, suffix)` prints as
    /// `NAME{suffix}` under [`Printer::isa`]: once with no ISA (suffix
    /// `""`) when no lane loop of it comes out as explicit vectors, else an
    /// AVX-512F and an AVX2 copy (where `TGC_VECTOR_ABI` is defined), the
    /// usual one as `NAME_portable`, and [`isa_dispatcher`] as `NAME`,
    /// which takes `params` and passes `args` on.
    fn per_isa(
        &mut self,
        s: &mut String,
        name: &str,
        ret: &str,
        params: &[String],
        args: &[String],
        print: &mut dyn FnMut(&mut Self, &str) -> String,
    ) {
        self.vectorised = false;
        let mut copies = String::new();
        for isa in [Isa::Avx512, Isa::Avx2] {
            self.isa = Some(isa);
            copies.push_str(&print(self, &format!("_{}", isa.suffix())));
        }
        self.isa = None;
        if self.vectorised {
            let _ = write!(s, "#if defined(TGC_VECTOR_ABI)\n{copies}#endif\n");
            s.push_str(&print(self, "_portable"));
            isa_dispatcher(s, name, ret, params, args);
        } else {
            s.push_str(&print(self, ""));
        }
    }

    /// `NAME_rows` of [`Printer::row_tasks`] named `NAME_rows{suffix}`, for
    /// [`Printer::isa`] (`None`: under `TGC_CLONES`), returning `ret` and
    /// taking `params` (the row range and, with `local` rows, the runtime
    /// last).
    #[allow(clippy::too_many_arguments)]
    fn rows_function(
        &mut self,
        name: &str,
        suffix: &str,
        ret: &str,
        ks: &[&Kernel],
        local: &[BufId],
        params: &[String],
        syms: &[Field],
    ) -> String {
        let p = self.p;
        let mut s = String::new();
        let s = &mut s;
        let attribute = self.isa.map_or("TGC_CLONES", Isa::attribute);
        let _ = writeln!(s, "{attribute} static {ret} {name}_rows{suffix}({})\n{{", params.join(", "));
        // The outermost extent is the caller's: its symbols may be unused here.
        for (_, n) in syms {
            let _ = writeln!(s, "    (void){n};");
        }
        let row_bufs: Vec<Scratch> = local
            .iter()
            .map(|&id| {
                let b = p.buffer(id);
                Scratch::elements(storage_ty(b.dtype), &b.name, &dim(&rows::row_len(p, id), Lang::C), "one row")
            })
            .collect();
        if !local.is_empty() {
            open_scratch(s, 4, "rt", &row_bufs, "return 1;");
        }
        let (open, close) = scop_pragmas(ks);
        s.push_str(open);
        if let [k] = ks {
            // A lone kernel: rows over its first part_loops loops, flattened.
            let d = part_loops(ks);
            let mut body = k.nest();
            for _ in 0..d {
                let Nest::Loop(_, inner) = body else { unreachable!("a kernel on the pool has its part loops") };
                body = *inner;
            }
            s.push_str("    for (int64_t pk_row = pk_lo; pk_row < pk_hi; pk_row += 1) {\n");
            decode(s, k, "pk_row", &(0..d).collect::<Vec<_>>(), 2);
            self.nest(s, k, &body, 2);
            s.push_str("    }\n");
            s.push_str(close);
            s.push_str("}\n\n");
            return std::mem::take(s);
        }
        let _ = writeln!(s, "    for (int64_t i0 = pk_lo; i0 < pk_hi; i0 += 1) {{");
        self.local = local.iter().copied().collect();
        // The last kernel one row late, in the loop of the two before it.
        let deferred = rows::defers_into_producer_loop(ks).then(|| ks[ks.len() - 1]);
        let run = if deferred.is_some() { &ks[..ks.len() - 1] } else { ks };
        let mut i = 0;
        while i < run.len() {
            let k = run[i];
            let Nest::Loop(_, body) = k.nest() else { unreachable!("a kernel on the pool has an outermost loop") };
            if ks.len() == 1 {
                self.nest(s, k, &body, 2);
            } else if let Some(&next) = run.get(i + 1).filter(|&&n| rows::reduces_in_producer_loop(k, n)) {
                let late = deferred.filter(|_| i + 2 == run.len());
                match late {
                    Some(l) => {
                        let _ = writeln!(
                            s,
                            "        {{ /* {}, {} in its loop; {} of the row before, chunk by chunk ahead of it */",
                            k.name, next.name, l.name
                        );
                    }
                    None => {
                        let _ = writeln!(s, "        {{ /* {}, {} in its loop */", k.name, next.name);
                    }
                }
                let r = next.reduce.as_ref().expect("reduces_in_producer_loop takes a reduction");
                self.split_reduction(s, next, r, Some(k), late, 3);
                self.store(s, next, 3);
                s.push_str("        }\n");
                i += 1;
            } else {
                let _ = writeln!(s, "        {{ /* {} */", k.name);
                self.nest(s, k, &body, 3);
                s.push_str("        }\n");
            }
            i += 1;
        }
        s.push_str("    }\n");
        if let Some(l) = deferred {
            let Nest::Loop(_, body) = l.nest() else { unreachable!("a deferred kernel has an outermost loop") };
            let _ = writeln!(
                s,
                "    if (pk_hi > pk_lo) {{ /* {} of the last row */\n        const int64_t i0 = pk_hi - 1;",
                l.name
            );
            self.nest(s, l, &body, 2);
            s.push_str("    }\n");
        }
        self.local.clear();
        s.push_str(close);
        if local.is_empty() {
            s.push_str("}\n\n");
        } else {
            let _ = writeln!(s, "    {}\n    return 0;\n}}\n", close_scratch("rt"));
        }
        std::mem::take(s)
    }

    /// A kernel on the packed contraction template ([`crate::cpu::packed`]):
    /// a context struct, a task function (one batch point × a part of `M` ×
    /// `nc` columns: per K block the `b` panel once, then per `mc` rows the
    /// `a` panel and the micro-kernels; then the epilogue) and the kernel
    /// function, which sizes the tasks for the thread count (`rt`'s, capped
    /// by the plan's [`packed::Blocks::threads`]) and runs them on `rt`'s
    /// pool. It returns 1 when a task could not allocate its panels.
    fn packed(&mut self, s: &mut String, k: &Kernel, c: Contraction, symbol: &str) {
        let p = self.p;
        let pk = c.packed;
        let Some(r) = &k.reduce else { return };
        let name = format!("tgc_{}_{symbol}", k.name);
        let (bufs, syms) = ctx_fields(p, &[k], &[]);
        let extent = |axes: &[usize]| dim(&packed::extent(k, axes), Lang::C);
        let (m_ext, n_ext, batch_ext) = (extent(&pk.m), extent(&pk.n), extent(&pk.batch));
        let k_inner = dim(&Dim::product(&c.k_loops[1..]), Lang::C);
        let k_outer = dim(&c.k_loops[0], Lang::C);
        // A pooled kernel's window: how many columns make one output point.
        let window = c.pooled.map(|_| dim(&Dim::product(&r.loops), Lang::C));

        ctx_struct(
            s,
            &name,
            &bufs,
            &syms,
            "    const tgc_rt* rt;\n    int64_t mpart, nc, kc, mt, nt;\n    int32_t failed;\n",
        );

        // The task.
        let _ = writeln!(s, "TGC_CLONES static void {name}_task(void* pk_vctx, int64_t pk_t)\n{{");
        let _ = writeln!(s, "    struct {name}_ctx* pk_ctx = (struct {name}_ctx*)pk_vctx;");
        for (ty, n) in &bufs {
            let _ = writeln!(s, "    {ty} restrict {n} = pk_ctx->{n};");
        }
        for (_, n) in &syms {
            let _ = writeln!(s, "    const int64_t {n} = pk_ctx->{n};");
        }
        let _ = writeln!(
            s,
            "    const tgc_rt* pk_rt = pk_ctx->rt;
    const int64_t pk_mpart = pk_ctx->mpart, pk_nc = pk_ctx->nc, pk_kc = pk_ctx->kc, pk_mc = {mc};
    const int64_t pk_M = {m_ext}, pk_N = {n_ext};{window}
    const int64_t pk_n0 = pk_t % pk_ctx->nt * pk_nc;
    pk_t /= pk_ctx->nt;
    const int64_t pk_m0 = pk_t % pk_ctx->mt * pk_mpart;
    pk_t /= pk_ctx->mt;",
            mc = pk.blocks.mc,
            window = window.as_ref().map_or(String::new(), |w| format!("\n    const int64_t pk_w = {w};")),
        );
        for &v in pk.batch.iter().rev() {
            let _ =
                writeln!(s, "    const int64_t i{v} = pk_t % {e};\n    pk_t /= {e};", e = dim(&k.loops[v], Lang::C));
        }
        let _ = writeln!(
            s,
            "    const int64_t pk_mb = pk_M - pk_m0 < pk_mpart ? pk_M - pk_m0 : pk_mpart;
    const int64_t pk_nb = pk_N - pk_n0 < pk_nc ? pk_N - pk_n0 : pk_nc;
    const int64_t pk_mp = (pk_mb + {MR} - 1) / {MR} * {MR}, pk_np = (pk_nb + {NR} - 1) / {NR} * {NR};
    const int64_t pk_ldc = pk_np / {NR} % 2 == 1 ? pk_np : pk_np + {NR}; /* cpu_rt::sums_stride */
    const int64_t pk_kin = {k_inner};
    const int64_t pk_kstep = pk_kc / pk_kin > 0 ? pk_kc / pk_kin : 1;"
        );
        let direct = pk.a_order == PackOrder::Direct;
        let mut panels = Vec::new();
        if !direct {
            let a_len = "(pk_mp < pk_mc ? pk_mp : pk_mc) * pk_kstep * pk_kin";
            panels.push(Scratch::elements("float", "pk_a", a_len, "the a panel"));
        }
        panels.push(Scratch::elements("float", "pk_b", "pk_np * pk_kstep * pk_kin", "the b panel"));
        panels.push(Scratch::elements("float", "pk_c", "pk_mp * pk_ldc", "the sums"));
        let fail = "__atomic_store_n(&pk_ctx->failed, 1, __ATOMIC_RELAXED);\n        return;";
        open_scratch(s, 4, "pk_rt", &panels, fail);
        let _ = writeln!(
            s,
            "    for (int64_t pk_ko = 0; pk_ko < {k_outer}; pk_ko += pk_kstep) {{
        const int64_t pk_ke = pk_ko + pk_kstep < {k_outer} ? pk_ko + pk_kstep : {k_outer};
        const int64_t pk_kb = (pk_ke - pk_ko) * pk_kin;"
        );
        // The `b` panel once per K block; the `a` panel per `mc` rows.
        self.pack(s, k, &c, &B_PANEL);
        s.push_str(
            "        for (int64_t pk_ic = 0; pk_ic < pk_mp; pk_ic += pk_mc) {
        const int64_t pk_icb = pk_mp - pk_ic < pk_mc ? pk_mp - pk_ic : pk_mc;\n",
        );
        let call = if direct {
            self.direct_call(&c)
        } else {
            self.pack(s, k, &c, &A_PANEL);
            "                pk_rt->ukernel(pk_kb, pk_a + pk_ir * pk_kb, pk_b + pk_jr * pk_kb, pk_c + (pk_ic + pk_ir) * pk_ldc + pk_jr, pk_ldc, pk_nb - pk_jr, pk_ko > 0);\n".to_string()
        };
        let _ = write!(
            s,
            "        for (int64_t pk_jr = 0; pk_jr < pk_np; pk_jr += {NR})
            for (int64_t pk_ir = 0; pk_ir < pk_icb; pk_ir += {MR}) {{
{call}            }}
        }}
    }}
    for (int64_t pk_i = 0; pk_i < pk_mb; pk_i++) {{\n"
        );
        decode(s, k, "pk_m0 + pk_i", &pk.m, 2);
        match c.pooled {
            None => {
                // Groups of EPILOGUE_GROUP columns: their values into a local
                // array by a loop of constant trip count, which GCC's -O2
                // vectoriser takes (its "very cheap" model refuses a loop
                // that needs a scalar remainder, and a store through the
                // output's subscript was a "complicated access pattern"),
                // then stored; the remaining columns one by one.
                let g = EPILOGUE_GROUP;
                let ty = compute_ty(self.p.buffer(k.out).dtype);
                let _ = writeln!(
                    s,
                    "        int64_t pk_j = 0;
        for (; pk_j + {g} <= pk_nb; pk_j += {g}) {{
            {ty} pk_v[{g}];
            for (int64_t pk_jj = 0; pk_jj < {g}; pk_jj++) {{"
                );
                decode(s, k, "pk_n0 + pk_j + pk_jj", &pk.n, 4);
                unused(s, &pk.n, 4);
                let v = self.expr(&k.value);
                let _ = writeln!(
                    s,
                    "                const float acc = pk_c[pk_i * pk_ldc + pk_j + pk_jj];
                pk_v[pk_jj] = {v};
            }}
            for (int64_t pk_jj = 0; pk_jj < {g}; pk_jj++) {{"
                );
                decode(s, k, "pk_n0 + pk_j + pk_jj", &pk.n, 4);
                unused(s, &pk.n, 4);
                self.store_value(s, k, "pk_v[pk_jj]".into(), 4);
                s.push_str("            }\n        }\n        for (; pk_j < pk_nb; pk_j++) {\n");
                decode(s, k, "pk_n0 + pk_j", &pk.n, 3);
                s.push_str("            const float acc = pk_c[pk_i * pk_ldc + pk_j];\n");
                self.store(s, k, 3);
            }
            Some(id) => {
                // Each window's columns, folded in the reduce loops' order:
                // EPILOGUE_GROUP windows at a time, the window's points
                // outermost and the group's windows innermost, so the group
                // is that many independent folds (GCC leaves the loop
                // scalar; one window at a time, the folds were one chain of
                // dependent steps, 18% of the conv of `bench_cpu` at 64
                // channels, 56×56, on one thread of an AVX-512 EPYC);
                // then the remaining windows one by one.
                let (out_n, window) = pk.n.split_at(pk.n.len() - r.loops.len());
                let init = self.literal(r.op.identity(r.dtype), r.dtype);
                let ty = compute_ty(r.dtype);
                let g = EPILOGUE_GROUP;
                let _ = writeln!(
                    s,
                    "        int64_t pk_g = 0;
        for (; pk_g + {g} * pk_w <= pk_nb; pk_g += {g} * pk_w) {{
            {ty} pk_v[{g}];"
                );
                let across: Vec<u32> = out_n.iter().map(|&v| v as u32).collect();
                match self.vector_fold(r, &VecAt { w: g, unit: None, across: &across, acc: Some(id) }) {
                    // The group's windows as the lanes of one vector: each
                    // point of the windows gathered from the sums (a
                    // stride of `pk_w`), its value and fold lane by lane.
                    // GCC kept the scalar folds' selects as branches, which
                    // the data mispredicts: the conv of `bench_cpu` at 64
                    // channels, 56×56, one thread of a Zen 4 EPYC, 2.68 ->
                    // 2.49 ms (same bits).
                    Some((x, fold)) => {
                        let lanes: Vec<String> = (0..g).map(|l| format!("pk_cc[{l} * pk_w + pk_j]")).collect();
                        let inits = vec![init.clone(); g].join(", ");
                        let _ = writeln!(
                            s,
                            "            {{
                const float* restrict pk_cc = &pk_c[pk_i * pk_ldc + pk_g];
                tgc_f32x{g} pk_vv = {{ {inits} }};
                for (int64_t pk_j = 0; pk_j < pk_w; pk_j++) {{"
                        );
                        decode(s, k, "pk_j", window, 5);
                        unused(s, window, 5);
                        let _ = writeln!(
                            s,
                            "                    const tgc_f32x{g} acc{id} = {{ {} }};
                    const tgc_f32x{g} pk_x = {x};
                    pk_vv = {fold};
                }}
                memcpy(pk_v, &pk_vv, sizeof pk_vv);
            }}",
                            lanes.join(", ")
                        );
                    }
                    None => {
                        let _ = writeln!(
                            s,
                            "            for (int64_t pk_gg = 0; pk_gg < {g}; pk_gg++) pk_v[pk_gg] = {init};
            for (int64_t pk_j = 0; pk_j < pk_w; pk_j++) {{"
                        );
                        decode(s, k, "pk_j", window, 4);
                        unused(s, window, 4);
                        s.push_str(&format!("                for (int64_t pk_gg = 0; pk_gg < {g}; pk_gg++) {{\n"));
                        decode(s, k, "(pk_n0 + pk_g) / pk_w + pk_gg", out_n, 5);
                        unused(s, out_n, 5);
                        let _ = writeln!(
                            s,
                            "                    const float acc{id} = pk_c[pk_i * pk_ldc + pk_g + pk_gg * pk_w + pk_j];"
                        );
                        let x = self.expr(&r.value);
                        let update = self.binary(r.op.combine(), "pk_v[pk_gg]".into(), x, r.dtype);
                        let _ = writeln!(
                            s,
                            "                    pk_v[pk_gg] = {update};\n                }}\n            }}"
                        );
                    }
                }
                let _ = writeln!(s, "            for (int64_t pk_gg = 0; pk_gg < {g}; pk_gg++) {{");
                decode(s, k, "(pk_n0 + pk_g) / pk_w + pk_gg", out_n, 4);
                let _ = writeln!(s, "                const {ty} acc = pk_v[pk_gg];");
                self.store(s, k, 4);
                let _ = writeln!(
                    s,
                    "            }}
        }}
        for (; pk_g < pk_nb; pk_g += pk_w) {{
            {ty} acc = {init};"
                );
                decode(s, k, "(pk_n0 + pk_g) / pk_w", out_n, 3);
                s.push_str("            for (int64_t pk_j = pk_g; pk_j < pk_g + pk_w; pk_j++) {\n");
                decode(s, k, "pk_j - pk_g", window, 4);
                unused(s, window, 4);
                let _ = writeln!(s, "                const float acc{id} = pk_c[pk_i * pk_ldc + pk_j];");
                let x = self.expr(&r.value);
                let update = self.binary(r.op.combine(), "acc".into(), x, r.dtype);
                let _ = writeln!(s, "                acc = {update};\n            }}");
                self.store(s, k, 3);
            }
        }
        s.push_str("        }\n    }\n");
        let _ = write!(s, "    {}\n}}\n\n", close_scratch("pk_rt"));

        // The kernel function.
        let mut params = kernel_params(&bufs, &syms);
        params.push("const tgc_rt* rt".into());
        let blocks = pk.blocks;
        let _ = writeln!(s, "static int32_t {name}({})\n{{\n    struct {name}_ctx pk_ctx;", params.join(", "));
        for (_, n) in bufs.iter().chain(&syms) {
            let _ = writeln!(s, "    pk_ctx.{n} = {n};");
        }
        let _ = writeln!(
            s,
            "    pk_ctx.rt = rt;
    pk_ctx.failed = 0;
    tgc_rt pk_pool = *rt;{cap}
    const int64_t pk_M = {m_ext}, pk_N = {n_ext}, pk_batch = {batch_ext};
    /* Each thread gets at least MIN_TASK_MACS multiply-adds (cpu_rt::split_threads). */
    const double pk_most = (double)pk_batch * (double)pk_M * (double)pk_N * (double)({k_all}) / {min_macs:.1};
    if ((double)pk_pool.threads > pk_most) pk_pool.threads = pk_most >= 2.0 ? (int64_t)pk_most : 1;
    /* A task: all of M, nc columns. Fewer tasks than threads: one side in
       parts first, then the other; then parts of even size. Every task packs
       all of the other side's panel, so the side first is the one that packs
       less twice (cpu_rt::packed_tasks): {first}. */
    int64_t pk_mpart = (pk_M + {MR} - 1) / {MR} * {MR}, pk_nc = (pk_N + {NR} - 1) / {NR} * {NR};
    if (pk_nc > {nc}) pk_nc = {nc};
    for (int pk_side = 0; pk_side < 2; pk_side++) {{
        const int pk_rows = (pk_side == 0) == ({rows_first});
        while (pk_batch * ((pk_M + pk_mpart - 1) / pk_mpart) * ((pk_N + pk_nc - 1) / pk_nc) < pk_pool.threads
               && (pk_rows ? pk_mpart > {MR} : pk_nc > {NR})) {{
            if (pk_rows)
                pk_mpart = (pk_mpart / 2 + {MR} - 1) / {MR} * {MR};
            else
                pk_nc = (pk_nc / 2 + {NR} - 1) / {NR} * {NR};
        }}
    }}
    const int64_t pk_mparts = (pk_M + pk_mpart - 1) / pk_mpart, pk_nparts = (pk_N + pk_nc - 1) / pk_nc;
    pk_mpart = ((pk_M + pk_mparts - 1) / pk_mparts + {MR} - 1) / {MR} * {MR};
    pk_nc = ((pk_N + pk_nparts - 1) / pk_nparts + {NR} - 1) / {NR} * {NR};
{whole}    pk_ctx.mpart = pk_mpart;
    pk_ctx.nc = pk_nc;
    pk_ctx.kc = {kc};
    pk_ctx.mt = (pk_M + pk_mpart - 1) / pk_mpart;
    pk_ctx.nt = (pk_N + pk_nc - 1) / pk_nc;
    rt->parallel_for(&pk_pool, pk_batch * pk_ctx.mt * pk_ctx.nt, {name}_task, &pk_ctx);
    return pk_ctx.failed;
}}",
            nc = blocks.nc,
            kc = blocks.kc,
            first = if direct { "N, as a is read in place" } else { "the larger of M and N" },
            rows_first = if direct { "0" } else { "pk_M > pk_N" },
            k_all = dim(&Dim::product(c.k_loops), Lang::C),
            min_macs = tgc_runtime::cpu_rt::MIN_TASK_MACS,
            cap = match blocks.threads {
                0 => String::new(),
                n =>
                    format!("\n    /* The plan's thread cap. */\n    if (pk_pool.threads > {n}) pk_pool.threads = {n};"),
            },
            whole = window.map_or(String::new(), |w| format!(
                "    /* Whole windows a task. */\n    pk_nc = (pk_nc + {w} - 1) / ({w}) * ({w});\n"
            )),
        );
    }

    /// The micro-kernel call of a [`PackOrder::Direct`] `a`: the factor's
    /// load at row `pk_m0 + pk_ic + pk_ir` and the K block's first point,
    /// its row stride, and the rows of the tile that are valid.
    fn direct_call(&mut self, c: &Contraction) -> String {
        let (buf, index, row) = c.direct_a().expect("called for an `a` read in place");
        let index = self.subscript(buf, index);
        let lda = dim(index.coeff(row as u32).expect("packed::direct admits a load that reads its row loop"), Lang::C);
        let mut out = format!("                const int64_t i{row} = pk_m0 + pk_ic + pk_ir;\n");
        for j in 0..c.k_loops.len() {
            let at = if j == 0 { "pk_ko" } else { "0" };
            let _ = writeln!(out, "                const int64_t i{v} = {at};", v = c.k_first + j);
        }
        let _ = writeln!(
            out,
            "                pk_rt->ukernel_direct(pk_kb, &{}[{}], {lda}, pk_mb - pk_ic - pk_ir, pk_b + pk_jr * pk_kb, pk_c + (pk_ic + pk_ir) * pk_ldc + pk_jr, pk_ldc, pk_nb - pk_jr, pk_ko > 0);",
            self.p.buffer(buf).name,
            bare(aff(&index, Lang::C))
        );
        out
    }

    /// Packs `e` into a panel for the K block `pk_ko..pk_ke` (`pk_kb`
    /// values a row): row `j` (a point of `axes` at `origin + j`) at
    /// `j / width · pk_kb · width + q · width + j % width` for the `q`-th K
    /// point, zero past `valid` rows — in `order` ([`PackOrder`]).
    fn pack(&mut self, s: &mut String, k: &Kernel, c: &Contraction, panel: &Panel) {
        let Panel { side, name, rows, valid, origin, width } = *panel;
        let (e, axes, order) = c.factor(side);
        if let Some(cp) = c.copy(k, side, &self.p.buffers, packed::COPY_RUN) {
            return self.pack_copy(s, k, c, panel, &cp);
        }
        let k_loops = |s: &mut String, depth: usize| pack_k_loops(s, c, depth);
        let close = close_loops;
        match order {
            PackOrder::Direct => unreachable!("a factor read in place is not packed"),
            PackOrder::DepthInner => {
                let _ = writeln!(
                    s,
                    "        for (int64_t pk_j = 0; pk_j < {rows}; pk_j++) {{
            float* restrict pk_dst = {name} + pk_j / {width} * pk_kb * {width} + pk_j % {width};
            if (pk_j < {valid}) {{"
                );
                decode(s, k, &format!("{origin} + pk_j"), axes, 4);
                if side == Side::B {
                    if let Some(wc) = c.window_copy(k, &self.p.buffers) {
                        self.pack_window(s, c, panel, &wc);
                    }
                }
                s.push_str("                int64_t pk_q = 0;\n");
                let fill = |s: &mut String, x: &str, at: usize| fill_row(s, c, x, width, at);
                let x = self.expr(e);
                match c.interior(side) {
                    Some(int) => {
                        // A row whose every guard holds takes the guard-free value.
                        let _ = writeln!(s, "                if ({}) {{", guard(&int.rows, Lang::C));
                        fill(s, &self.expr(&int.value), 5);
                        s.push_str("                } else {\n");
                        fill(s, &x, 5);
                        s.push_str("                }\n");
                    }
                    None => fill(s, &x, 4),
                }
                let _ = writeln!(
                    s,
                    "            }} else {{
                for (int64_t pk_q = 0; pk_q < pk_kb; pk_q++) pk_dst[pk_q * {width}] = 0.0f;
            }}
        }}"
                );
            }
            PackOrder::Grouped => {
                let _ = writeln!(
                    s,
                    "        for (int64_t pk_jb = 0; pk_jb < {rows}; pk_jb += {width}) {{
            float* restrict pk_base = {name} + pk_jb * pk_kb;
            const int64_t pk_jn = {valid} - pk_jb;
            int64_t pk_q = 0;"
                );
                let depth = k_loops(s, 3);
                let _ = writeln!(s, "{:w$}float* restrict pk_dst = pk_base + pk_q * {width};", "", w = depth * 4);
                self.pack_group(s, k, e, panel, axes, depth);
                let _ = writeln!(s, "{:w$}pk_q += 1;", "", w = depth * 4);
                close(s, depth, 2);
            }
            PackOrder::WidthInner => {
                s.push_str("        {\n            int64_t pk_q = 0;\n");
                let depth = k_loops(s, 3);
                let w = depth * 4;
                let _ = writeln!(
                    s,
                    "{:w$}for (int64_t pk_jb = 0; pk_jb < {rows}; pk_jb += {width}) {{
{:w$}    float* restrict pk_dst = {name} + pk_jb * pk_kb + pk_q * {width};
{:w$}    const int64_t pk_jn = {valid} - pk_jb;",
                    "", "", ""
                );
                self.pack_group(s, k, e, panel, axes, depth + 1);
                let _ = writeln!(s, "{:w$}}}\n{:w$}pk_q += 1;", "", "");
                close(s, depth, 3);
                s.push_str("        }\n");
            }
        }
    }

    /// In the row-by-row packing of a pooled kernel's `b` panel, at the
    /// decoded pixel `pk_j` (indentation 4): when it is the first of a
    /// pooling window inside the image whose pixels lie in one group of
    /// `width` rows, the whole window ([`packed::WindowCopy`]) — at each K
    /// point one `memcpy` of `run` values per row of the window (GCC moves
    /// a pair as one 64-bit load and store) —, then on past the window.
    fn pack_window(&mut self, s: &mut String, c: &Contraction, panel: &Panel, wc: &packed::WindowCopy) {
        let width = panel.width;
        let (points, run) = (wc.points, wc.run);
        let rest = self.subscript(wc.copy.buf, &wc.copy.rest);
        let _ = writeln!(
            s,
            "                if ({}) {{
                    /* A pooling window inside the image, a run of {run} values per row of it. */
                    const int64_t pk_wb = {};
                    int64_t pk_q = 0;",
            window_start(wc, panel, Lang::C),
            bare(aff(&wc.copy.row, Lang::C))
        );
        let depth = pack_k_loops(s, c, 5);
        let w = depth * 4;
        let src = &self.p.buffer(wc.copy.buf).name;
        let _ = writeln!(s, "{:w$}const float* restrict pk_src = &{src}[pk_wb + {}];", "", bare(aff(&rest, Lang::C)));
        for (r, off) in wc.offsets.iter().enumerate() {
            let _ = writeln!(
                s,
                "{:w$}memcpy(pk_dst + pk_q * {width} + {}, pk_src + {}, {run} * sizeof(float));",
                "",
                r * run,
                bare(aff(off, Lang::C))
            );
        }
        let _ = writeln!(s, "{:w$}pk_q += 1;", "");
        close_loops(s, depth, 5);
        let _ = writeln!(
            s,
            "                    pk_j += {};
                    continue;
                }}",
            points - 1
        );
    }

    /// A [`PackOrder::DepthInner`] factor that is a copy
    /// ([`packed::Contraction::copy`]), one group of `width` rows at a
    /// time: each row's part of the subscript computed once (`pk_off`),
    /// then at each K point every row's value loaded from `buf + rest` at
    /// its part and stored beside the others — a block of [`packed::COPY_RUN`]
    /// interior rows with consecutive parts (a plain conv's pixels along
    /// a row) as one vector move. A row outside the interior (a pixel on
    /// the border) or past the valid rows copies an interior row's values
    /// there and is packed again row by row afterwards, as the plain
    /// `DepthInner` order does; a group without an interior row is packed
    /// row by row.
    fn pack_copy(&mut self, s: &mut String, k: &Kernel, c: &Contraction, panel: &Panel, cp: &packed::RowCopy) {
        let Panel { side, name, rows, valid, origin, width } = *panel;
        let (e, axes, _) = c.factor(side);
        let run = packed::COPY_RUN;
        let src = &self.p.buffer(cp.buf).name;
        let interior = if cp.interior.is_empty() { "1".to_string() } else { guard(&cp.interior, Lang::C) };
        let blocks = if width % run == 0 { width / run } else { 0 };
        let _ = writeln!(
            s,
            "        for (int64_t pk_jb = 0; pk_jb < {rows}; pk_jb += {width}) {{
            /* Each row's part of the subscript (pk_ok: the row is interior); rows to pack one by one. */
            int64_t pk_off[{width}], pk_edge[{width}], pk_ne = 0, pk_in = -1;
            int pk_ok[{width}];
            for (int64_t pk_jj = 0; pk_jj < {width}; pk_jj++) {{
                pk_ok[pk_jj] = 0;
                if (pk_jb + pk_jj < {valid}) {{"
        );
        decode(s, k, &format!("{origin} + pk_jb + pk_jj"), axes, 5);
        let _ = writeln!(
            s,
            "                    if ({interior}) {{
                        pk_off[pk_jj] = {row};
                        pk_ok[pk_jj] = 1;
                        pk_in = pk_jj;
                    }}",
            row = bare(aff(&cp.row, Lang::C))
        );
        unused(s, axes, 5);
        let _ = writeln!(
            s,
            "                }}
                if (!pk_ok[pk_jj]) pk_edge[pk_ne++] = pk_jj;
            }}
            if (pk_in >= 0) {{
                /* The other rows copy an interior row's values, packed again below. */
                for (int64_t pk_e = 0; pk_e < pk_ne; pk_e++) pk_off[pk_edge[pk_e]] = pk_off[pk_in];"
        );
        if blocks > 0 {
            let _ = writeln!(
                s,
                "                /* Blocks of {run} interior rows whose parts are consecutive: one vector move. */
                int pk_vec[{blocks}];
                for (int64_t pk_m = 0; pk_m < {blocks}; pk_m++) {{
                    pk_vec[pk_m] = 1;
                    for (int64_t pk_t = 0; pk_t < {run}; pk_t++) {{
                        const int64_t pk_jj = pk_m * {run} + pk_t;
                        pk_vec[pk_m] &= pk_ok[pk_jj] && pk_off[pk_jj] == pk_off[pk_m * {run}] + pk_t;
                    }}
                }}"
            );
        }
        let _ = writeln!(s, "                float* restrict pk_dst = {name} + pk_jb * pk_kb;");
        let depth = pack_k_loops(s, c, 4);
        let w = depth * 4;
        let rest = self.subscript(cp.buf, &cp.rest);
        let _ = writeln!(s, "{:w$}const float* restrict pk_src = &{src}[{}];", "", bare(aff(&rest, Lang::C)));
        if blocks > 0 {
            let _ = writeln!(
                s,
                "{:w$}for (int64_t pk_m = 0; pk_m < {blocks}; pk_m++) {{
{:w$}    float* restrict pk_to = pk_dst + pk_m * {run};
{:w$}    const int64_t* pk_at = pk_off + pk_m * {run};
{:w$}    if (pk_vec[pk_m]) {{
{:w$}        memcpy(pk_to, pk_src + pk_at[0], {run} * sizeof(float));
{:w$}    }} else {{
{:w$}        for (int64_t pk_t = 0; pk_t < {run}; pk_t++) pk_to[pk_t] = pk_src[pk_at[pk_t]];
{:w$}    }}
{:w$}}}",
                "", "", "", "", "", "", "", "", ""
            );
        } else {
            let _ = writeln!(
                s,
                "{:w$}for (int64_t pk_jj = 0; pk_jj < {width}; pk_jj++) pk_dst[pk_jj] = pk_src[pk_off[pk_jj]];",
                ""
            );
        }
        let _ = writeln!(s, "{:w$}pk_dst += {width};", "");
        close_loops(s, depth, 4);
        let _ = writeln!(
            s,
            "            }} else {{
                for (int64_t pk_jj = 0; pk_jj < {width}; pk_jj++) pk_edge[pk_jj] = pk_jj;
                pk_ne = {width};
            }}
            for (int64_t pk_e = 0; pk_e < pk_ne; pk_e++) {{
                const int64_t pk_j = pk_jb + pk_edge[pk_e];
                float* restrict pk_dst = {name} + pk_jb * pk_kb + pk_edge[pk_e];
                if (pk_j < {valid}) {{"
        );
        decode(s, k, &format!("{origin} + pk_j"), axes, 5);
        s.push_str("                    int64_t pk_q = 0;\n");
        let x = self.expr(e);
        fill_row(s, c, &x, width, 5);
        let _ = writeln!(
            s,
            "                }} else {{
                    for (int64_t pk_q = 0; pk_q < pk_kb; pk_q++) pk_dst[pk_q * {width}] = 0.0f;
                }}
            }}
        }}"
        );
    }

    /// One K point's values of the group of rows at `pk_jb` (`pk_jn` of
    /// them valid) into `pk_dst[0..width]`, at indentation `depth`: a full
    /// group into a local array by a loop of constant trip count, then
    /// copied — GCC's -O2 vectoriser (its "very cheap" model, no run-time
    /// alias checks) takes the loop only when the stores cannot alias the
    /// loads; the last group row by row, zero past the valid rows.
    fn pack_group(&mut self, s: &mut String, k: &Kernel, e: &Expr, panel: &Panel, axes: &[usize], depth: usize) {
        let Panel { origin, width, .. } = *panel;
        let w = depth * 4;
        let x = self.expr(e);
        let _ = writeln!(s, "{:w$}if (pk_jn >= {width}) {{", "");
        match self.vector_group(e, axes, width) {
            // A whole group as vectors of PACK_VECTOR rows, where the
            // factor has a vector form along its one row loop: GCC's -O2
            // vectoriser left the row loop scalar when the factor chose
            // between sources (a `Concat`'s pieces under a 1×1
            // convolution).
            Some(vx) => {
                let v = axes[0];
                for h in 0..width / PACK_VECTOR {
                    let at = h * PACK_VECTOR;
                    let row = if h == 0 { String::new() } else { format!(" + {at}") };
                    let _ = writeln!(
                        s,
                        "{:w$}    {{\n{:w$}        const int64_t i{v} = {origin} + pk_jb{row};\n{:w$}        *(tgc_f32x{PACK_VECTOR}u*)&pk_dst[{at}] = {vx};\n{:w$}    }}",
                        "", "", "", ""
                    );
                }
            }
            None => {
                let _ = writeln!(
                    s,
                    "{:w$}    float pk_v[{width}];\n{:w$}    for (int64_t pk_jj = 0; pk_jj < {width}; pk_jj++) {{",
                    "", ""
                );
                decode(s, k, &format!("{origin} + pk_jb + pk_jj"), axes, depth + 2);
                let _ = writeln!(
                    s,
                    "{:w$}        pk_v[pk_jj] = {x};\n{:w$}    }}\n{:w$}    memcpy(pk_dst, pk_v, sizeof pk_v);",
                    "", "", ""
                );
            }
        }
        let _ = writeln!(
            s,
            "{:w$}}} else {{
{:w$}    int64_t pk_jj = 0;
{:w$}    for (; pk_jj < pk_jn; pk_jj++) {{",
            "", "", ""
        );
        decode(s, k, &format!("{origin} + pk_jb + pk_jj"), axes, depth + 2);
        let _ = writeln!(
            s,
            "{:w$}        pk_dst[pk_jj] = {x};
{:w$}    }}
{:w$}    for (; pk_jj < {width}; pk_jj++) pk_dst[pk_jj] = 0.0f;
{:w$}}}",
            "", "", "", ""
        );
    }

    /// A panel group's factor `e` as a vector of [`PACK_VECTOR`] rows
    /// ([`Printer::vexpr`]), the group's first row at its one row loop:
    /// `None` where the rows are several loops, the group width is not a
    /// multiple of the vector, or `e` has no vector form.
    fn vector_group(&mut self, e: &Expr, axes: &[usize], width: usize) -> Option<String> {
        let (&[v], true) = (axes, width.is_multiple_of(PACK_VECTOR)) else { return None };
        self.vector_value(e, &VecAt { w: PACK_VECTOR, unit: Some(v as u32), across: &[], acc: None })
    }

    /// The store of the kernel's value at the current output point.
    fn store(&mut self, s: &mut String, k: &Kernel, depth: usize) {
        let v = self.expr(&k.value);
        self.store_value(s, k, v, depth);
    }

    /// The store of `v` (a compute-type value of the output's dtype) at the
    /// current output point.
    fn store_value(&mut self, s: &mut String, k: &Kernel, v: String, depth: usize) {
        let out = self.p.buffer(k.out);
        let stored = match out.dtype {
            DType::F16 => self.call("tgc_f32_to_f16", &[v]),
            DType::BF16 => self.call("tgc_f32_to_bf16", &[v]),
            _ => v,
        };
        let at = self.subscript(k.out, &k.store_index);
        let _ = writeln!(s, "{:w$}{}[{}] = {stored};", "", out.name, bare(aff(&at, Lang::C)), w = depth * 4);
    }

    /// The subscript `index` of `buf` as printed: within the row of a local
    /// temporary, else unchanged.
    fn subscript(&self, buf: BufId, index: &crate::affine::AffExpr) -> crate::affine::AffExpr {
        if self.local.contains(&buf) {
            rows::row_subscript(index)
        } else {
            index.clone()
        }
    }

    /// A scan kernel ([`Scan`], the block order of `loop_ir`): `NAME_part`
    /// runs the items `[pk_lo, pk_hi)` of (row, block) pairs — a row being
    /// a point of the loops other than the scanned one — either folding
    /// each block into its total (`pk_store == 0`) or folding it again and
    /// storing `carry ⊕ prefix`; `NAME` runs the first pass and the scan of
    /// the block totals only when a row has more than one block, then the
    /// storing pass, each on `rt`'s pool in parts of about
    /// [`MIN_TASK_POINTS`] points. It returns 1 when the totals cannot be
    /// allocated.
    fn scan(&mut self, s: &mut String, k: &Kernel, sc: &Scan, symbol: &str) {
        let p = self.p;
        let name = format!("tgc_{}_{symbol}", k.name);
        let (bufs, syms) = ctx_fields(p, &[k], &[]);
        let mut params = kernel_params(&bufs, &syms);
        let ty = compute_ty(sc.dtype);
        let (a, block) = (sc.axis, SCAN_BLOCK);
        let extent = dim(&k.loops[a], Lang::C);
        let rows: Vec<usize> = (0..k.loops.len()).filter(|&v| v != a).collect();
        let init = self.literal(sc.op.identity(sc.dtype), sc.dtype);
        let mut part = params.clone();
        part.extend([
            format!("{ty}* restrict pk_carry"),
            "const int64_t pk_nb".into(),
            "const int64_t pk_lo".into(),
            "const int64_t pk_hi".into(),
            "const int pk_store".into(),
        ]);
        let _ = writeln!(
            s,
            "TGC_CLONES static void {name}_part({})
{{",
            part.join(", ")
        );
        for (_, n) in &syms {
            let _ = writeln!(s, "    (void){n};");
        }
        let _ = writeln!(s, "    for (int64_t pk_t = pk_lo; pk_t < pk_hi; pk_t += 1) {{");
        if !rows.is_empty() {
            decode(s, k, "pk_t / pk_nb", &rows, 2);
        }
        let _ = writeln!(
            s,
            "        const int64_t pk_b = pk_t % pk_nb;
        const int64_t pk_end = (pk_b + 1) * {block} < {extent} ? (pk_b + 1) * {block} : {extent};
        {ty} acc = {init};
        int64_t pk_i = pk_b * {block};"
        );
        let x = self.expr(&k.value);
        let update = self.binary(sc.op.combine(), "acc".into(), x.clone(), sc.dtype);
        let carried = |me: &mut Self, v: &str| me.binary(sc.op.combine(), "pk_carry[pk_t]".into(), v.into(), sc.dtype);
        let lanes = SCAN_LANES;
        // A grouped scan stores `pk_cin ⊕ v`: the carry, or in the first
        // block [`Scan::neutral`] — no condition per point, so the stores
        // vectorise.
        let stored = |me: &mut Self, v: &str| match sc.grouped() {
            true => me.binary(sc.op.combine(), "pk_cin".into(), v.into(), sc.dtype),
            false => format!("(pk_b > 0 ? {} : {v})", carried(me, v)),
        };
        for store in [true, false] {
            let _ = writeln!(s, "        {}", if store { "if (pk_store) {" } else { "} else {" });
            if let (true, Some(neutral)) = (store, sc.neutral()) {
                let neutral = self.literal(neutral, sc.dtype);
                let _ = writeln!(s, "            const {ty} pk_cin = pk_b > 0 ? pk_carry[pk_t] : {neutral};");
            }
            // Whole groups of eight points in registers (`loop_ir::SCAN_LANES`).
            if let Some(helper) = scan_helper(sc) {
                let scanned = self.call(helper, &["pk_v".into(), "acc".into()]);
                let _ = writeln!(
                    s,
                    "            for (; pk_i + {lanes} <= pk_end; pk_i += {lanes}) {{
                {ty} pk_v[{lanes}];
                for (int64_t pk_l = 0; pk_l < {lanes}; pk_l += 1) {{
                    const int64_t i{a} = pk_i + pk_l;
                    pk_v[pk_l] = {x};
                }}
                {scanned};"
                );
                if store {
                    let _ = writeln!(
                        s,
                        "                for (int64_t pk_l = 0; pk_l < {lanes}; pk_l += 1) {{
                    const int64_t i{a} = pk_i + pk_l;"
                    );
                    // An exclusive scan stores the prefix before the point.
                    let v = if sc.exclusive { "pk_x" } else { "pk_v[pk_l]" };
                    if sc.exclusive {
                        let _ = writeln!(s, "                    const {ty} pk_x = pk_l > 0 ? pk_v[pk_l - 1] : acc;");
                    }
                    let c = stored(self, v);
                    self.store_value(s, k, c, 5);
                    let _ = writeln!(s, "                }}");
                }
                let _ = writeln!(s, "                acc = pk_v[{}];\n            }}", lanes - 1);
            }
            let _ = writeln!(s, "            for (int64_t i{a} = pk_i; i{a} < pk_end; i{a} += 1) {{");
            if store {
                if !sc.exclusive {
                    let _ = writeln!(s, "                acc = {update};");
                }
                let c = stored(self, "acc");
                self.store_value(s, k, c, 4);
                if sc.exclusive {
                    let _ = writeln!(s, "                acc = {update};");
                }
            } else {
                let _ = writeln!(s, "                acc = {update};");
            }
            let _ = writeln!(s, "            }}");
        }
        let _ = writeln!(s, "            pk_carry[pk_t] = acc;\n        }}\n    }}\n}}\n");
        ctx_struct(
            s,
            &name,
            &bufs,
            &syms,
            &format!(
                "    {ty}* pk_carry;
    int64_t pk_nb;
    int64_t pk_n;
    int64_t nt;
    int pk_store;
"
            ),
        );
        let direct: Vec<String> = bufs.iter().chain(&syms).map(|(_, n)| n.clone()).collect();
        let from_ctx: Vec<String> = bufs.iter().chain(&syms).map(|(_, n)| format!("pk_ctx->{n}")).collect();
        let _ = writeln!(
            s,
            "static void {name}_task(void* pk_vctx, int64_t pk_t)
{{
    const struct {name}_ctx* pk_ctx = (const struct {name}_ctx*)pk_vctx;
    {name}_part({}, pk_ctx->pk_carry, pk_ctx->pk_nb, pk_ctx->pk_n * pk_t / pk_ctx->nt,
        pk_ctx->pk_n * (pk_t + 1) / pk_ctx->nt, pk_ctx->pk_store);
}}
",
            from_ctx.join(", ")
        );
        params.push("const tgc_rt* rt".into());
        let rows_ext = dim(&Dim::product(&rows.iter().map(|&v| k.loops[v].clone()).collect::<Vec<_>>()), Lang::C);
        let fold = self.binary(sc.op.combine(), "pk_c".into(), "pk_total".into(), sc.dtype);
        let _ = writeln!(
            s,
            "static int32_t {name}({})
{{
    struct {name}_ctx pk_ctx;",
            params.join(", ")
        );
        for n in &direct {
            let _ = writeln!(s, "    pk_ctx.{n} = {n};");
        }
        let _ = writeln!(
            s,
            "    const int64_t pk_e = {extent};
    const int64_t pk_rows = {rows_ext};
    pk_ctx.pk_nb = (pk_e + {block} - 1) / {block};
    pk_ctx.pk_n = pk_rows * pk_ctx.pk_nb;
    pk_ctx.pk_carry = NULL;
    int64_t pk_ws = 0;
    /* About {MIN_TASK_POINTS} points a part, at most one part a thread. */
    pk_ctx.nt = pk_rows * pk_e / {MIN_TASK_POINTS};
    if (pk_ctx.nt > rt->threads) pk_ctx.nt = rt->threads;
    if (pk_ctx.nt > pk_ctx.pk_n) pk_ctx.nt = pk_ctx.pk_n;
    if (pk_ctx.nt < 1) pk_ctx.nt = 1;
    if (pk_ctx.pk_nb > 1) {{
        /* Block totals, then each row's exclusive scan of them: the carries. */
        const int64_t pk_bytes[1] = {{ pk_ctx.pk_n * (int64_t)sizeof({ty}) }};
        void* pk_ptrs[1];
        pk_ws = rt->scratch_acquire(rt, 1, pk_bytes, pk_ptrs);
        if (!pk_ws) return 1;
        pk_ctx.pk_carry = ({ty}*)pk_ptrs[0];
        pk_ctx.pk_store = 0;
        rt->parallel_for(rt, pk_ctx.nt, {name}_task, &pk_ctx);
        for (int64_t pk_r = 0; pk_r < pk_rows; pk_r += 1) {{
            {ty} pk_c = {init};
            for (int64_t pk_b = 0; pk_b < pk_ctx.pk_nb; pk_b += 1) {{
                const {ty} pk_total = pk_ctx.pk_carry[pk_r * pk_ctx.pk_nb + pk_b];
                pk_ctx.pk_carry[pk_r * pk_ctx.pk_nb + pk_b] = pk_c;
                pk_c = {fold};
            }}
        }}
    }}
    pk_ctx.pk_store = 1;
    rt->parallel_for(rt, pk_ctx.nt, {name}_task, &pk_ctx);
    if (pk_ws) rt->scratch_release(rt, pk_ws);
    return 0;
}}"
        );
    }

    /// Prints `nest` at indentation `depth`, its points as [`Printer::point`].
    fn nest(&mut self, s: &mut String, k: &Kernel, nest: &Nest, depth: usize) {
        match nest {
            Nest::Loop(l, body) if k.reduce.is_none() && l.step.is_one() && **body == Nest::Point => {
                self.chunked_loop(s, k, l, depth);
            }
            Nest::Loop(l, body) if l.step.is_one() && **body == Nest::Point && lanes::is_window(k) => {
                self.window_groups(s, k, l, depth);
            }
            Nest::Loop(l, body) => {
                let step = dim(&l.step, Lang::C);
                let _ = writeln!(
                    s,
                    "{:w$}for (int64_t i{v} = {}; i{v} < {}; i{v} += {step}) {{",
                    "",
                    bound(&l.lo, Lang::C),
                    bound(&l.hi, Lang::C),
                    v = l.var,
                    w = depth * 4
                );
                self.nest(s, k, body, depth + 1);
                let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
            }
            Nest::Seq(parts) => parts.iter().for_each(|n| self.nest(s, k, n, depth)),
            Nest::Point => self.point(s, k, depth),
        }
    }

    /// The innermost loop `l` of an element-wise kernel in chunks of
    /// [`lanes::LANES`] points and a tail ([`lane_chunks`]); the points and
    /// what each computes are unchanged.
    fn chunked_loop(&mut self, s: &mut String, k: &Kernel, l: &crate::cpu::Loop, depth: usize) {
        let lo = chunk_start(l);
        let hi = bound(&l.hi, Lang::C);
        let vector = self.isa.and_then(|isa| self.vector_points(k, l.var, isa));
        let explicit = vector.as_deref().map(|chunk| ("", chunk, ""));
        lane_chunks(s, l.var as usize, lo.as_deref(), &hi, lanes::LANES, depth, None, explicit, &mut |s, d| {
            self.point(s, k, d)
        });
    }

    /// The innermost output loop `l` of a window kernel
    /// ([`lanes::is_window`]) in groups of [`WINDOW_GROUP`] points, each
    /// group's accumulators side by side: per point of the window (the
    /// reduce loops in nest order) the group's values, then every
    /// accumulator folds its own; then the group is stored; the tail point
    /// by point. Where the value has a vector form ([`Printer::vector_fold`])
    /// the group is one vector `pk_vv` and its loads vector loads (of every
    /// second element for a stride-2 pooling, which GCC's -O2 vectoriser
    /// left scalar as a "complicated access pattern"); else the values go
    /// to `pk_x[]` and the folds to `acc_g[]`, a loop GCC's vectoriser
    /// takes (a fold of a load it keeps scalar stayed scalar, one
    /// mispredicted branch a maximum). Every output folds its values in the
    /// nest's order, so the bits are the plain nest's.
    fn window_groups(&mut self, s: &mut String, k: &Kernel, l: &crate::cpu::Loop, depth: usize) {
        let Some(r) = &k.reduce else { return };
        let lo = chunk_start(l);
        let hi = bound(&l.hi, Lang::C);
        let (v, g) = (l.var, WINDOW_GROUP);
        let (ty, init) = (compute_ty(r.dtype), self.literal(r.op.identity(r.dtype), r.dtype));
        let vector = self.vector_fold(r, &VecAt { w: g, unit: Some(v), across: &[], acc: None });
        let mut chunk = format!("{ty} acc_g[{g}];\n");
        let (open, step, close) = match &vector {
            Some((x, fold)) => (
                format!(
                    "{{\n    const int64_t i{v} = pk_r;\n    tgc_f32x{g} pk_vv = {{ {} }};\n",
                    vec![init; g].join(", ")
                ),
                format!("const tgc_f32x{g} pk_x = {x};\npk_vv = {fold};\n"),
                "    memcpy(acc_g, &pk_vv, sizeof pk_vv);\n}\n".to_string(),
            ),
            None => {
                let value = self.expr(&r.value);
                let fold = self.binary(r.op.combine(), "acc_g[pk_l]".into(), "pk_x[pk_l]".into(), r.dtype);
                (
                    format!("for (int64_t pk_l = 0; pk_l < {g}; pk_l += 1) acc_g[pk_l] = {init};\n"),
                    format!(
                        "{ty} pk_x[{g}];\nfor (int64_t pk_l = 0; pk_l < {g}; pk_l += 1) {{\n    const int64_t i{v} = pk_r + pk_l;\n    (void)i{v};\n    pk_x[pk_l] = {value};\n}}\nfor (int64_t pk_l = 0; pk_l < {g}; pk_l += 1) acc_g[pk_l] = {fold};\n"
                    ),
                    String::new(),
                )
            }
        };
        chunk.push_str(&open);
        // The vector form's loops are inside its block.
        let indent = if vector.is_some() { 4 } else { 0 };
        let first = k.loops.len();
        for (j, e) in r.loops.iter().enumerate() {
            let _ = writeln!(
                chunk,
                "{:w$}for (int64_t i{x} = 0; i{x} < {}; i{x} += 1) {{",
                "",
                dim(e, Lang::C),
                x = first + j,
                w = indent + j * 4
            );
        }
        for line in step.lines() {
            let _ = writeln!(chunk, "{:w$}{line}", "", w = indent + r.loops.len() * 4);
        }
        for j in (0..r.loops.len()).rev() {
            let _ = writeln!(chunk, "{:w$}}}", "", w = indent + j * 4);
        }
        chunk.push_str(&close);
        let _ = writeln!(
            chunk,
            "for (int64_t pk_l = 0; pk_l < {g}; pk_l += 1) {{\n    const int64_t i{v} = pk_r + pk_l;\n    (void)i{v};\n    const {ty} acc = acc_g[pk_l];"
        );
        self.store(&mut chunk, k, 1);
        chunk.push_str("}\n");
        lane_chunks(s, v as usize, lo.as_deref(), &hi, g, depth, None, Some(("", &chunk, "")), &mut |s, d| {
            self.point(s, k, d)
        });
    }

    /// One output point at indentation `depth`: the reduction, then the store.
    fn point(&mut self, s: &mut String, k: &Kernel, depth: usize) {
        let mut depth = depth;
        let open = |s: &mut String, depth: &mut usize, var: usize, extent: &crate::sym::Dim| {
            let _ = writeln!(
                s,
                "{:w$}for (int64_t i{var} = 0; i{var} < {}; i{var} += 1) {{",
                "",
                dim(extent, Lang::C),
                w = *depth * 4
            );
            *depth += 1;
        };
        if let (Some(r), true) = (&k.reduce, k.lanes > 1) {
            self.split_reduction(s, k, r, None, None, depth);
        } else if let Some(r) = &k.reduce {
            let init = self.literal(r.op.identity(r.dtype), r.dtype);
            let _ = writeln!(s, "{:w$}{} acc = {init};", "", compute_ty(r.dtype), w = depth * 4);
            let body_depth = depth;
            for (j, d) in r.loops.iter().enumerate() {
                open(s, &mut depth, k.loops.len() + j, d);
            }
            for e in k.computed_at() {
                let Expr::Reduce { id, op, dtype, first, loops, guard: cond, value, .. } = e else { continue };
                let init = self.literal(op.identity(*dtype), *dtype);
                let _ = writeln!(s, "{:w$}{} acc{id} = {init};", "", compute_ty(*dtype), w = depth * 4);
                let outer = depth;
                if !cond.is_empty() {
                    let _ = writeln!(s, "{:w$}if ({}) {{", "", bare(guard(cond, Lang::C)), w = depth * 4);
                    depth += 1;
                }
                for (j, d) in loops.iter().enumerate() {
                    open(s, &mut depth, *first as usize + j, d);
                }
                let update = self.update(k, Some(*id), *op, format!("acc{id}"), value, *dtype);
                let _ = writeln!(s, "{:w$}acc{id} = {update};", "", w = depth * 4);
                while depth > outer {
                    depth -= 1;
                    let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
                }
            }
            let update = self.update(k, None, r.op, "acc".into(), &r.value, r.dtype);
            let _ = writeln!(s, "{:w$}acc = {update};", "", w = depth * 4);
            while depth > body_depth {
                depth -= 1;
                let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
            }
        }
        self.store(s, k, depth);
    }

    /// A reduction in `k.lanes` split accumulators `acc_l[]` ([`lanes`]'s
    /// rule: value `j` of the innermost reduce loop to lane `j mod L`, the
    /// lanes folded in halves), at indentation `depth`; declares `acc`.
    /// With `producer` (a row group's kernel before `k`,
    /// [`rows::reduces_in_producer_loop`]), each point of the reduce loop
    /// first stores `producer`'s point at `(i0, j)`.
    /// With `late` (a row group's last kernel,
    /// [`rows::defers_into_producer_loop`]), that kernel is stored for row
    /// `i0 − 1` over each chunk of the loop before the chunk's own points,
    /// and before each point of the tail (never in the task's first row).
    fn split_reduction(
        &mut self,
        s: &mut String,
        k: &Kernel,
        r: &Reduction,
        producer: Option<&Kernel>,
        late: Option<&Kernel>,
        depth: usize,
    ) {
        let lanes = k.lanes;
        let ty = compute_ty(r.dtype);
        let init = self.literal(r.op.identity(r.dtype), r.dtype);
        let w = depth * 4;
        let _ = writeln!(
            s,
            "{:w$}{ty} acc_l[{lanes}];\n{:w$}for (int64_t pk_l = 0; pk_l < {lanes}; pk_l += 1) acc_l[pk_l] = {init};",
            "", ""
        );
        if let Some(call) = self.reduction_run(k, r, producer.is_none() && late.is_none() && r.loops.len() == 1) {
            let _ = writeln!(
                s,
                "{:w$}{{\n{:w$}    const int64_t i{} = 0;\n{:w$}    {call};\n{:w$}}}",
                "",
                "",
                k.loops.len(),
                "",
                ""
            );
        } else {
            self.lane_reduction(s, k, r, producer, late, depth);
        }
        // The halving fold of the lanes ([`lanes`]'s rule), one loop of a
        // constant trip count per step, which the vectoriser packs.
        for half in lanes::fold_steps(lanes) {
            let folded = self.binary(r.op.combine(), "acc_l[pk_a]".into(), format!("acc_l[pk_a + {half}]"), r.dtype);
            let _ = writeln!(s, "{:w$}for (int64_t pk_a = 0; pk_a < {half}; pk_a += 1) acc_l[pk_a] = {folded};", "");
        }
        let _ = writeln!(s, "{:w$}const {ty} acc = acc_l[0];", "");
    }

    /// The call of `tgc_max_run_f32` or `tgc_min_run_f32` that does the lane
    /// loop of [`Printer::split_reduction`] over the run of `r`'s load, when
    /// `alone` (nothing else in the loop, one reduce loop) and `r` is an f32
    /// `MAX` or `MIN` of an f32 load with unit stride along its reduce loop
    /// in the lanes of [`lanes::LANES`]; the helper's vector path gives the
    /// same bits as the lane loop.
    fn reduction_run(&mut self, k: &Kernel, r: &Reduction, alone: bool) -> Option<String> {
        let helper = match r.op {
            ReduceOp::Max => "tgc_max_run_f32",
            ReduceOp::Min => "tgc_min_run_f32",
            ReduceOp::Sum | ReduceOp::Prod => return None,
        };
        let Expr::Load { buf, index, dtype: DType::F32 } = &r.value else { return None };
        let v = k.loops.len() as u32;
        if !alone || r.dtype != DType::F32 || k.lanes != lanes::LANES || index.coeff(v) != Some(&Dim::int(1)) {
            return None;
        }
        let at = bare(aff(&self.subscript(*buf, index), Lang::C));
        let n = dim(r.loops.last().expect("a split reduction has reduce loops"), Lang::C);
        Some(self.call(helper, &[format!("&{}[{at}]", self.p.buffer(*buf).name), n, "acc_l".into()]))
    }

    /// The lane loop of [`Printer::split_reduction`]: every value of `r` into
    /// `acc_l[its lane]`, with `producer` stored at each point and `late`
    /// one row behind.
    fn lane_reduction(
        &mut self,
        s: &mut String,
        k: &Kernel,
        r: &Reduction,
        producer: Option<&Kernel>,
        late: Option<&Kernel>,
        depth: usize,
    ) {
        let lanes = k.lanes;
        let mut d = depth;
        let (inner, outer) = r.loops.split_last().expect("a split reduction has reduce loops");
        for (j, e) in outer.iter().enumerate() {
            let _ = writeln!(
                s,
                "{:w$}for (int64_t i{v} = 0; i{v} < {}; i{v} += 1) {{",
                "",
                dim(e, Lang::C),
                v = k.loops.len() + j,
                w = d * 4
            );
            d += 1;
        }
        let v = k.loops.len() + outer.len();
        let x = self.expr(&r.value);
        let update = self.binary(r.op.combine(), "acc_l[pk_l]".into(), x, r.dtype);
        let late_stores = late.map(|l| {
            let mut store = String::new();
            self.store(&mut store, l, 2);
            let prev = "if (i0 > pk_lo) {\n    const int64_t pk_prev = i0 - 1;\n";
            let chunk = format!(
                "{prev}    for (int64_t pk_m = 0; pk_m < {lanes}; pk_m += 1) {{\n        const int64_t i0 = pk_prev;\n        const int64_t i{v} = pk_r + pk_m;\n{store}    }}\n}}\n"
            );
            let point = format!("{prev}    {{\n        const int64_t i0 = pk_prev;\n{store}    }}\n}}\n");
            (chunk, point)
        });
        let vector = match self.isa {
            Some(isa) if outer.is_empty() => self.vector_lanes(k, r, producer, late, isa),
            _ => None,
        };
        let late_stores = match (&vector, late_stores) {
            (Some(vl), Some((_, point))) => Some((vl.late.clone(), point)),
            (_, late_stores) => late_stores,
        };
        let ahead = late_stores.as_ref().map(|(chunk, point)| (chunk.as_str(), point.as_str()));
        let explicit = vector.as_ref().map(|vl| (vl.open.as_str(), vl.chunk.as_str(), vl.close.as_str()));
        lane_chunks(s, v, None, &dim(inner, Lang::C), lanes, d, ahead, explicit, &mut |s, d| {
            if let Some(e) = producer {
                self.store(s, e, d);
            }
            let _ = writeln!(s, "{:w$}acc_l[pk_l] = {update};", "", w = d * 4);
        });
        while d > depth {
            d -= 1;
            let _ = writeln!(s, "{:w$}}}", "", w = d * 4);
        }
    }

    /// The explicit vector form of [`Printer::lane_reduction`]'s chunk for
    /// `isa` ([`Isa`]), when it computes `EXP2` and every value in it has
    /// one ([`Printer::vexpr`]): `r` a sum or product into f32 lanes, the
    /// stores of `producer` and `late` f32 and one element a lane. Lane
    /// `j` of the 32 is lane `j mod w` of vector `pk_v{j / w}`, each lane
    /// taking the same values in the same order as the lane loop, so the
    /// bits are the lane loop's.
    fn vector_lanes(
        &mut self,
        k: &Kernel,
        r: &Reduction,
        producer: Option<&Kernel>,
        late: Option<&Kernel>,
        isa: Isa,
    ) -> Option<VectorLanes> {
        let (w, lanes) = (isa.width(), k.lanes);
        let v = k.loops.len() as u32;
        let combine = match (r.op, r.dtype) {
            (ReduceOp::Sum, DType::F32) if lanes.is_multiple_of(w) => "+",
            (ReduceOp::Prod, DType::F32) if lanes.is_multiple_of(w) => "*",
            _ => return None,
        };
        let mut exp2 = false;
        let store = match producer {
            Some(e) => self.vector_store(e, v, w, &mut exp2)?,
            None => String::new(),
        };
        let (x, _) = self.vexpr(&r.value, &VecAt { w, unit: Some(v), across: &[], acc: None }, &mut exp2)?;
        let late_store = match late {
            Some(l) => Some(self.vector_store(l, v, w, &mut exp2)?),
            None => None,
        };
        if !exp2 {
            return None;
        }
        self.used.insert("tgc_exp2f_xn");
        self.vectorised = true;
        let ty = format!("tgc_f32x{w}");
        let mut open = String::new();
        let mut close = String::new();
        for h in 0..lanes / w {
            let _ = writeln!(open, "{ty} pk_v{h} = *(const {ty}u*)&acc_l[{}];", h * w);
            let _ = writeln!(close, "*({ty}u*)&acc_l[{}] = pk_v{h};", h * w);
        }
        let chunk = vector_parts(v, w, lanes, &|h| format!("{store}pk_v{h} = (pk_v{h} {combine} {x});\n"));
        let late = late_store.map(|store| {
            let mut t =
                "if (i0 > pk_lo) {\n    const int64_t pk_prev = i0 - 1;\n    {\n        const int64_t i0 = pk_prev;\n"
                    .to_string();
            for line in vector_parts(v, w, lanes, &|_| store.clone()).lines() {
                let _ = writeln!(t, "        {line}");
            }
            t.push_str("    }\n}\n");
            t
        });
        Some(VectorLanes { open, chunk, close, late: late.unwrap_or_default() })
    }

    /// The value and the fold of a group of `at.w` windows as vectors
    /// ([`Printer::vexpr`], the windows the lanes): a pooled epilogue's
    /// [`EPILOGUE_GROUP`] windows (`acc{id}` their sums at one point of the
    /// window, the axes that vary with the window `at.across`) or a window
    /// kernel's [`WINDOW_GROUP`] consecutive outputs (`at.unit` their
    /// loop). `pk_x`'s value and `pk_vv`'s update by `pk_x`, or `None`
    /// where `r` has no such form (a value that is not f32 or calls `EXP2`,
    /// which needs a copy per ISA).
    fn vector_fold(&mut self, r: &Reduction, at: &VecAt) -> Option<(String, String)> {
        if r.dtype != DType::F32 {
            return None;
        }
        let x = self.vector_value(&r.value, at)?;
        let fold = match r.op {
            ReduceOp::Max => vector_select(at.w, true, "pk_vv", "pk_x"),
            ReduceOp::Min => vector_select(at.w, false, "pk_vv", "pk_x"),
            ReduceOp::Sum => "(pk_vv + pk_x)".to_string(),
            ReduceOp::Prod => "(pk_vv * pk_x)".to_string(),
        };
        Some((x, fold))
    }

    /// `e` as a `tgc_f32x{at.w}` vector ([`Printer::vexpr`]), or `None`
    /// where it has no vector form, is the same in every lane, or calls
    /// `EXP2` (whose vector variant needs a copy per ISA).
    fn vector_value(&mut self, e: &Expr, at: &VecAt) -> Option<String> {
        let mut exp2 = false;
        let (x, vector) = self.vexpr(e, at, &mut exp2)?;
        (vector && !exp2).then(|| {
            self.used.insert("tgc_f32xn");
            x
        })
    }

    /// The explicit vector form of a chunk of [`Printer::chunked_loop`]
    /// (`k` element-wise, `i{lane}` its innermost loop) for `isa`, when
    /// `k`'s value computes `EXP2` and has a vector form
    /// ([`Printer::vector_store`]): the chunk's points `w` at a time.
    fn vector_points(&mut self, k: &Kernel, lane: u32, isa: Isa) -> Option<String> {
        let w = isa.width();
        let mut exp2 = false;
        let store = self.vector_store(k, lane, w, &mut exp2)?;
        if !exp2 || !lanes::LANES.is_multiple_of(w) {
            return None;
        }
        self.used.insert("tgc_exp2f_xn");
        self.vectorised = true;
        Some(vector_parts(lane, w, lanes::LANES, &|_| store.clone()))
    }

    /// The store of `k`'s value at lane point `i{lane}` for `w` lanes at
    /// once ([`Printer::vexpr`]), when `k` stores f32 one element a lane.
    fn vector_store(&mut self, k: &Kernel, lane: u32, w: usize, exp2: &mut bool) -> Option<String> {
        let out = self.p.buffer(k.out);
        let at = self.subscript(k.out, &k.store_index);
        if out.dtype != DType::F32 || lane_stride(&at, lane) != Some(1) {
            return None;
        }
        let (x, vector) = self.vexpr(&k.value, &VecAt { w, unit: Some(lane), across: &[], acc: None }, exp2)?;
        vector.then(|| format!("*(tgc_f32x{w}u*)&{}[{}] = {x};\n", out.name, bare(aff(&at, Lang::C))))
    }

    /// `e` for `at.w` lanes at once ([`VecAt`]): `(text, true)` a
    /// `tgc_f32x{w}` vector, `(text, false)` a scalar the same in every lane
    /// (GCC's and Clang's vector extensions broadcast a scalar operand);
    /// `None` where this printer has no vector form of `e`. The vector
    /// forms: an f32 load one element a lane or every second element (a
    /// stride-2 pooling's, `TGC_EVEN*`), `at.acc`'s accumulator, `NEG`,
    /// `RELU`, `EXP2` (sets `exp2`), `ADD`, `SUB`, `MUL`, `FDIV` of f32, and
    /// `MAX`, `MIN` of two vectors: the same IEEE operations lane by lane as
    /// the scalar print, and `tgc_relu_f32`'s, `tgc_max_f32`'s and
    /// `tgc_min_f32`'s selects (NaN kept, the first operand's) as selects of
    /// bits.
    fn vexpr(&mut self, e: &Expr, at: &VecAt, exp2: &mut bool) -> Option<(String, bool)> {
        if !self.varies(e, at) {
            return Some((self.expr(e), false));
        }
        let w = at.w;
        // A vector operand printed more than once (a select) stays short.
        let short = |t: &str| t.len() <= 160;
        match e {
            Expr::Load { buf, index, dtype: DType::F32 } => {
                let sub = self.subscript(*buf, index);
                if !at.across.iter().all(|&v| lane_stride(&sub, v) == Some(0)) {
                    return None;
                }
                let name = &self.p.buffer(*buf).name;
                let first = format!("&{name}[{}]", bare(aff(&sub, Lang::C)));
                match at.unit.and_then(|u| lane_stride(&sub, u)) {
                    Some(1) => Some((format!("(*(const tgc_f32x{w}u*){first})"), true)),
                    Some(2) if w == 8 || w == 16 => {
                        self.used.insert("tgc_even_f32xn");
                        Some((format!("TGC_EVEN{w}({first})"), true))
                    }
                    _ => None,
                }
            }
            Expr::Reduce { id, dtype: DType::F32, .. } if at.acc == Some(*id) => Some((format!("acc{id}"), true)),
            Expr::Unary { op, x } if x.dtype() == DType::F32 => {
                let (t, _) = self.vexpr(x, at, exp2)?;
                match op {
                    UnaryOp::Neg => Some((format!("(-{t})"), true)),
                    UnaryOp::Relu => {
                        short(&t).then(|| (format!("((tgc_f32x{w})((tgc_i32x{w}){t} & ~({t} < 0.0f)))"), true))
                    }
                    UnaryOp::Exp2 => {
                        *exp2 = true;
                        Some((format!("tgc_exp2f_x{w}({t})"), true))
                    }
                    UnaryOp::Log2 | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Recip => None,
                }
            }
            Expr::Binary { op, a, b } if a.dtype() == DType::F32 => {
                let (ta, va) = self.vexpr(a, at, exp2)?;
                let (tb, vb) = self.vexpr(b, at, exp2)?;
                let o = match op {
                    BinaryOp::Add => "+",
                    BinaryOp::Sub => "-",
                    BinaryOp::Mul => "*",
                    BinaryOp::Fdiv => "/",
                    BinaryOp::Max | BinaryOp::Min if va && vb && short(&ta) && short(&tb) => {
                        return Some((vector_select(w, *op == BinaryOp::Max, &ta, &tb), true));
                    }
                    BinaryOp::Max | BinaryOp::Min | BinaryOp::Cmplt | BinaryOp::Cmpeq => return None,
                };
                Some((format!("({ta} {o} {tb})"), true))
            }
            // A choice the same in every lane (a `Concat`'s piece, chosen
            // by an outer loop): C's conditional of two vectors, which
            // evaluates the chosen one only, as the scalar print.
            Expr::Where { cond, a, b } if a.dtype() == DType::F32 && !self.varies(cond, at) => {
                let c = self.expr(cond);
                let (ta, tb) = (self.vexpr(a, at, exp2)?, self.vexpr(b, at, exp2)?);
                Some((format!("(({c}) ? {} : {})", splat(w, ta), splat(w, tb)), true))
            }
            Expr::Select { valid, then, otherwise } if then.dtype() == DType::F32 && !guard_varies(valid, at) => {
                let c = bare(guard(valid, Lang::C));
                let (ta, tb) = (self.vexpr(then, at, exp2)?, self.vexpr(otherwise, at, exp2)?);
                Some((format!("(({c}) ? {} : {})", splat(w, ta), splat(w, tb)), true))
            }
            _ => None,
        }
    }

    /// Whether `e` may differ between the lanes of `at` (conservative: a
    /// gather or an accumulator other than `at.acc`'s is taken to).
    fn varies(&self, e: &Expr, at: &VecAt) -> bool {
        match e {
            Expr::Load { buf, index, .. } => {
                let sub = self.subscript(*buf, index);
                at.unit.iter().chain(at.across).any(|&v| lane_stride(&sub, v) != Some(0))
            }
            Expr::Const { .. } => false,
            Expr::Unary { x, .. } | Expr::Cast { x, .. } => self.varies(x, at),
            Expr::Binary { a, b, .. } => self.varies(a, at) || self.varies(b, at),
            Expr::Where { cond, a, b } => self.varies(cond, at) || self.varies(a, at) || self.varies(b, at),
            Expr::Select { valid, then, otherwise } => {
                guard_varies(valid, at) || self.varies(then, at) || self.varies(otherwise, at)
            }
            Expr::Gather { .. } | Expr::Acc { .. } | Expr::Reduce { .. } => true,
        }
    }
}

/// A chunk of `lanes` points of loop `i{v}` (from `pk_r`) as `lanes / w`
/// blocks of `w` lanes, block `h` with `i{v}` at its first point and the
/// lines of `body(h)` (explicit vectors: [`Printer::vector_lanes`],
/// [`Printer::vector_points`]).
fn vector_parts(v: u32, w: usize, lanes: usize, body: &dyn Fn(usize) -> String) -> String {
    let mut s = String::new();
    for h in 0..lanes / w {
        let at = if h == 0 { "pk_r".to_string() } else { format!("pk_r + {}", h * w) };
        let _ = writeln!(s, "{{\n    const int64_t i{v} = {at};");
        for line in body(h).lines() {
            let _ = writeln!(s, "    {line}");
        }
        s.push_str("}\n");
    }
    s
}

/// Where [`Printer::vexpr`] prints: `w` lanes at once, lane `l` at the
/// point `i{unit} + l` (its loads with unit stride along `i{unit}` are
/// vector loads) and the `across` variables varying with the lane in other
/// ways (a load that depends on one has no vector form); `acc`, the
/// accumulator `acc{id}` that is a vector variable already.
struct VecAt<'a> {
    w: usize,
    unit: Option<u32>,
    across: &'a [u32],
    acc: Option<u32>,
}

/// Whether a guard's constraints may differ between the lanes of `at`.
fn guard_varies(valid: &[crate::index_book::Constr], at: &VecAt) -> bool {
    valid.iter().any(|c| at.unit.iter().chain(at.across).any(|&v| lane_stride(&c.expr, v) != Some(0)))
}

/// [`Printer::vexpr`]'s `(text, vector)` as a `tgc_f32x{w}` (the type
/// both arms of a conditional need: a load is of the unaligned type): a
/// vector cast, a scalar broadcast by subtracting a zero vector, which
/// keeps every value's bits (`-0.0 - 0.0` is `-0.0`; adding a zero would
/// make it `+0.0`).
fn splat(w: usize, (t, vector): (String, bool)) -> String {
    if vector {
        format!("((tgc_f32x{w}){t})")
    } else {
        format!("({t} - (tgc_f32x{w}){{0}})")
    }
}

/// `tgc_max_f32(a, b)` (`max`) or `tgc_min_f32(a, b)` lane by lane on two
/// vectors of `w` floats named or parenthesised: the lanes where `a` wins
/// (`a > b`, or `a < b`, or `a` NaN) take `a`'s bits, the others `b`'s.
fn vector_select(w: usize, max: bool, a: &str, b: &str) -> String {
    let cmp = if max { ">" } else { "<" };
    format!(
        "((tgc_f32x{w})(((({a} {cmp} {b}) | ({a} != {a})) & (tgc_i32x{w}){a}) | (~(({a} {cmp} {b}) | ({a} != {a})) & (tgc_i32x{w}){b})))"
    )
}

/// `static RET NAME(PARAMS)` for a function printed once per [`Isa`]:
/// it runs `NAME_avx512` where the CPU has AVX-512F, else `NAME_avx2`
/// where it has x86-64-v3, else `NAME_portable` (the only one where
/// `TGC_VECTOR_ABI` is not defined), passing `args` on; a copy only when
/// `TGC_MAX_ISA` ([`CLONES`]) is at least its ISA's level.
fn isa_dispatcher(s: &mut String, name: &str, ret: &str, params: &[String], args: &[String]) {
    let args = args.join(", ");
    let call = |suffix: &str| match ret {
        "void" => format!("{{\n        {name}_{suffix}({args});\n        return;\n    }}"),
        _ => format!("return {name}_{suffix}({args});"),
    };
    let portable = match ret {
        "void" => format!("{name}_portable({args});"),
        _ => format!("return {name}_portable({args});"),
    };
    let _ = writeln!(
        s,
        "static {ret} {name}({})
{{
#if defined(TGC_VECTOR_ABI)
    __builtin_cpu_init();
    if (TGC_MAX_ISA >= {} && __builtin_cpu_supports(\"avx512f\")) {}
    if (TGC_MAX_ISA >= {} && __builtin_cpu_supports(\"x86-64-v3\")) {}
#endif
    {portable}
}}
",
        params.join(", "),
        Isa::Avx512.runtime().level(),
        call(Isa::Avx512.suffix()),
        Isa::Avx2.runtime().level(),
        call(Isa::Avx2.suffix()),
    );
}

/// The explicit vector chunk of a lane loop ([`Printer::vector_lanes`]),
/// each text without indentation: `open` declares the vector accumulators
/// `pk_v*` from `acc_l` before the chunk loop, `chunk` is a chunk's points,
/// `close` stores the accumulators back before the tail, `late` (empty
/// without a late kernel) the late kernel's stores for the chunk.
struct VectorLanes {
    open: String,
    chunk: String,
    close: String,
    late: String,
}

/// The step of `index` along loop `i{lane}`: `Some(c)` for a constant
/// coefficient `c` (0 where `i{lane}` does not occur), `None` where it
/// occurs inside a floor division or with a symbolic coefficient.
fn lane_stride(index: &crate::affine::AffExpr, lane: u32) -> Option<i64> {
    fn inside(e: &crate::affine::AffExpr, lane: u32) -> bool {
        e.terms().any(|(atom, _)| match atom {
            crate::affine::AffAtom::Var(v) => *v == lane,
            crate::affine::AffAtom::FloorDiv(inner, _) => inside(inner, lane),
        })
    }
    let floors = index
        .terms()
        .any(|(atom, _)| matches!(atom, crate::affine::AffAtom::FloorDiv(inner, _) if inside(inner, lane)));
    if floors {
        return None;
    }
    match index.coeff(lane) {
        None => Some(0),
        Some(c) => c.as_int(),
    }
}

/// Loop `i{v}` over `[lo, hi)` (`lo` `None`: 0) in chunks of `lanes`
/// points and a tail, at indentation `depth`: `for pk_r in lo..full step
/// lanes { for pk_l in 0..lanes { i = pk_r + pk_l; body } }`, then `for pk_l
/// in 0..hi - full { i = full + pk_l; body }`. `body(s, depth)` prints one
/// point, whose lane is `pk_l` (value `j` of the loop is lane `j mod lanes`
/// when `lo` is 0, [`lanes`]'s rule). The chunk loop's constant trip count
/// lets GCC's `-O2` vectoriser (its cheapest cost model, which refuses a
/// loop that needs an epilogue) replace it by vector code whatever the
/// extents. With `ahead = Some((chunk, point))`, the lines of `chunk` are
/// printed at the top of each chunk, before its loop over the lanes
/// (`pk_r` is the chunk's first point), those of `point` at the top of each
/// tail point (`i{v}` is the point). With `explicit = Some((open, chunk,
/// close))` (explicit vectors: [`Printer::vector_lanes`],
/// [`Printer::vector_points`]), the lines of `chunk` replace the loop over
/// the lanes, those of `open` come before the chunk loop and those of
/// `close` after it, before the tail.
#[allow(clippy::too_many_arguments)]
fn lane_chunks(
    s: &mut String,
    v: usize,
    lo: Option<&str>,
    hi: &str,
    lanes: usize,
    depth: usize,
    ahead: Option<(&str, &str)>,
    explicit: Option<(&str, &str, &str)>,
    body: &mut dyn FnMut(&mut String, usize),
) {
    let indent = |s: &mut String, text: &str, d: usize| {
        for line in text.lines() {
            let _ = writeln!(s, "{:w$}{line}", "", w = d * 4);
        }
    };
    let w = depth * 4;
    let (start, full) = match lo {
        None => ("0".to_string(), format!("floord({hi}, {lanes}) * {lanes}")),
        Some(lo) => (lo.to_string(), format!("{lo} + floord(({hi}) - ({lo}), {lanes}) * {lanes}")),
    };
    let _ = writeln!(s, "{:w$}const int64_t pk_full{v} = {full};", "");
    if let Some((open, _, _)) = explicit {
        indent(s, open, depth);
    }
    let _ = writeln!(s, "{:w$}for (int64_t pk_r = {start}; pk_r < pk_full{v}; pk_r += {lanes}) {{", "");
    if let Some((chunk, _)) = ahead {
        indent(s, chunk, depth + 1);
    }
    match explicit {
        Some((_, chunk, close)) => {
            indent(s, chunk, depth + 1);
            let _ = writeln!(s, "{:w$}}}", "");
            indent(s, close, depth);
        }
        None => {
            let _ = writeln!(
                s,
                "{:w$}    for (int64_t pk_l = 0; pk_l < {lanes}; pk_l += 1) {{
{:w$}        const int64_t i{v} = pk_r + pk_l;
{:w$}        (void)i{v};",
                "", "", ""
            );
            body(s, depth + 2);
            let _ = writeln!(s, "{:w$}    }}\n{:w$}}}", "", "");
        }
    }
    let _ = writeln!(
        s,
        "{:w$}for (int64_t pk_l = 0; pk_full{v} + pk_l < {hi}; pk_l += 1) {{
{:w$}    const int64_t i{v} = pk_full{v} + pk_l;
{:w$}    (void)i{v};",
        "", "", ""
    );
    if let Some((_, point)) = ahead {
        indent(s, point, depth + 1);
    }
    body(s, depth + 1);
    let _ = writeln!(s, "{:w$}}}", "");
}

/// The parameters of a kernel function, from its [`ctx_fields`]: the
/// buffers it reads, its output (`restrict`), the symbols it uses.
fn kernel_params(bufs: &[Field], syms: &[Field]) -> Vec<String> {
    let bufs = bufs.iter().map(|(ty, n)| format!("{ty} restrict {n}"));
    bufs.chain(syms.iter().map(|(ty, n)| format!("const {ty} {n}"))).collect()
}

/// The helper that scans a vector of [`SCAN_LANES`] values of `sc`'s op in
/// registers when the scan is [`Scan::grouped`].
fn scan_helper(sc: &Scan) -> Option<&'static str> {
    match sc.op {
        _ if !sc.grouped() => None,
        ReduceOp::Sum => Some("tgc_scan8_add"),
        ReduceOp::Prod => Some("tgc_scan8_mul"),
        ReduceOp::Max | ReduceOp::Min => None,
    }
}

/// Below this many loop points (output × reduce) a plain kernel runs on
/// the caller's thread; above it, in parts of about this many points, one
/// part a thread at most. A task costs a few microseconds on the pool
/// (the pool's hand-off), about 10⁴ simple loop points.
const MIN_TASK_POINTS: i64 = 32768;

/// A C declaration as `(type, name)`.
type Field = (String, String);

/// The fields the task context of `ks` (one kernel, or a row group's)
/// carries: the buffers they read from outside (`const`), then the buffers
/// they write (but not their `local` ones, which each task allocates), then
/// the symbols they use.
fn ctx_fields(p: &Program, ks: &[&Kernel], local: &[BufId]) -> (Vec<Field>, Vec<Field>) {
    let written: Vec<BufId> = ks.iter().map(|k| k.out).collect();
    let read: BTreeSet<BufId> = ks.iter().flat_map(|k| k.reads()).filter(|b| !written.contains(b)).collect();
    let mut bufs: Vec<Field> = read
        .into_iter()
        .map(|b| {
            let b = p.buffer(b);
            (format!("const {}*", storage_ty(b.dtype)), b.name.clone())
        })
        .collect();
    for &b in written.iter().filter(|b| !local.contains(b)) {
        let out = p.buffer(b);
        bufs.push((format!("{}*", storage_ty(out.dtype)), out.name.clone()));
    }
    let used: BTreeSet<String> = ks.iter().flat_map(|k| k.symbols()).collect();
    let syms = p.dims().filter(|x| used.contains(*x)).map(|x| ("int64_t".to_string(), sym_name(x))).collect();
    (bufs, syms)
}

/// What the printer prints as one C function: a kernel, or a row group.
enum Function<'a> {
    Kernel(&'a Kernel),
    Group(&'a RowGroup),
}

/// One scratch buffer of a scope: its pointer's C type and name, its size
/// in bytes (a C expression) and a comment.
struct Scratch {
    ty: String,
    name: String,
    bytes: String,
    what: String,
}

impl Scratch {
    /// `count` elements of storage type `ty`, named `name`, `restrict`.
    fn elements(ty: &str, name: &str, count: &str, what: &str) -> Scratch {
        Scratch {
            ty: format!("{ty}* restrict"),
            name: name.to_string(),
            bytes: format!("(int64_t)({count}) * (int64_t)sizeof({ty})"),
            what: what.to_string(),
        }
    }
}

/// Prints, at indentation `w`, the opening of a scratch scope of runtime
/// table `rt` (`tgc_runtime::scratch`: one request for all of `bufs`, no
/// `malloc`): the sizes, the request, whose handle is `pk_ws` and whose
/// failure runs `fail`, then each buffer's pointer. [`close_scratch`]
/// prints its end.
fn open_scratch(s: &mut String, w: usize, rt: &str, bufs: &[Scratch], fail: &str) {
    let n = bufs.len();
    let sizes: Vec<&str> = bufs.iter().map(|b| b.bytes.as_str()).collect();
    let _ = writeln!(s, "{:w$}const int64_t pk_bytes[{n}] = {{ {} }};", "", sizes.join(", "));
    let _ = writeln!(s, "{:w$}void* pk_ptrs[{n}];", "");
    let _ = writeln!(s, "{:w$}const int64_t pk_ws = {rt}->scratch_acquire({rt}, {n}, pk_bytes, pk_ptrs);", "");
    let _ = writeln!(s, "{:w$}if (!pk_ws) {{\n{:w$}    {fail}\n{:w$}}}", "", "", "");
    for (i, b) in bufs.iter().enumerate() {
        let (ty, name, what) = (&b.ty, &b.name, comment_text(&b.what));
        let _ = writeln!(s, "{:w$}{ty} {name} = ({ty})tgc_fresh(pk_ptrs[{i}]); /* {what} */", "");
    }
}

/// The statement that closes the scratch scope [`open_scratch`] opened.
fn close_scratch(rt: &str) -> String {
    format!("{rt}->scratch_release({rt}, pk_ws);")
}

/// The functions of `p` in call order: each row group where its first
/// kernel stands, every other kernel on its own.
fn functions(p: &Program) -> Vec<Function<'_>> {
    p.calls()
        .into_iter()
        .map(|c| match p.rows.iter().find(|g| g.kernels == c) {
            Some(g) => Function::Group(g),
            None => Function::Kernel(&p.kernels[c.start]),
        })
        .collect()
}

/// The C function of row group `g` of `p`: `tgc_k<first>to<last>_SYMBOL`,
/// which no kernel's `tgc_k<n>_SYMBOL` can spell.
fn group_name(p: &Program, g: &RowGroup, symbol: &str) -> String {
    let last = &p.kernels[g.kernels.end - 1].name;
    format!("tgc_{}to{}_{symbol}", p.kernels[g.kernels.start].name, last.trim_start_matches('k'))
}

/// `struct NAME_ctx { fields…; extra }`.
fn ctx_struct(s: &mut String, name: &str, bufs: &[Field], syms: &[Field], extra: &str) {
    let _ = writeln!(s, "struct {name}_ctx {{");
    for (ty, n) in bufs.iter().chain(syms) {
        let _ = writeln!(s, "    {ty} {n};");
    }
    let _ = write!(s, "{extra}}};\n\n");
}

/// The first point of loop `l` as [`lane_chunks`] takes it: `None` for 0.
fn chunk_start(l: &crate::cpu::Loop) -> Option<String> {
    match l.lo.as_constant().and_then(|d| d.as_int()) {
        Some(0) => None,
        _ => Some(bound(&l.lo, Lang::C)),
    }
}

/// The leading loops whose points [`Printer::row_tasks`] cuts into parts: a
/// lone kernel's [`rows::part_loops`]; a row group's outermost loop, whose
/// every point holds one row of the group's local temporaries.
fn part_loops(ks: &[&Kernel]) -> usize {
    match ks {
        [k] => rows::part_loops(k),
        _ => 1,
    }
}

/// Declares the loop variables of `axes` (nest order) at the flat index
/// `flat` of their row-major product, at indentation `depth`.
fn decode(s: &mut String, k: &Kernel, flat: &str, axes: &[usize], depth: usize) {
    let w = depth * 4;
    if let [v] = axes {
        let _ = writeln!(s, "{:w$}const int64_t i{v} = {flat};", "");
        return;
    }
    let _ = writeln!(s, "{:w$}int64_t pk_f{depth} = {flat};", "");
    for (j, &v) in axes.iter().enumerate().rev() {
        if j == 0 {
            let _ = writeln!(s, "{:w$}const int64_t i{v} = pk_f{depth};", "");
        } else {
            let e = dim(&packed::extent(k, &[v]), Lang::C);
            let _ = writeln!(s, "{:w$}const int64_t i{v} = pk_f{depth} % {e};\n{:w$}pk_f{depth} /= {e};", "", "");
        }
    }
}

/// `(void)i{v};` for each loop of `axes` at indentation `depth`: a decoded
/// index that the code after it may not read.
fn unused(s: &mut String, axes: &[usize], depth: usize) {
    for v in axes {
        let _ = writeln!(s, "{:w$}(void)i{v};", "", w = depth * 4);
    }
}

/// Opens the K loops of a panel's K block (`pk_ko..pk_ke` for the first)
/// at indentation `depth`; returns the depth inside.
fn pack_k_loops(s: &mut String, c: &Contraction, mut depth: usize) -> usize {
    for (j, d) in c.k_loops.iter().enumerate() {
        let lo = if j == 0 { "pk_ko".to_string() } else { "0".to_string() };
        let hi = if j == 0 { "pk_ke".to_string() } else { dim(d, Lang::C) };
        let _ = writeln!(
            s,
            "{:w$}for (int64_t i{v} = {lo}; i{v} < {hi}; i{v} += 1) {{",
            "",
            v = c.k_first + j,
            w = depth * 4
        );
        depth += 1;
    }
    depth
}

/// One row of a panel at `pk_dst`, from its `pk_q`-th K point on: the K
/// loops at indentation `depth`, `x` each element's value.
fn fill_row(s: &mut String, c: &Contraction, x: &str, width: usize, depth: usize) {
    let inner = pack_k_loops(s, c, depth);
    let _ = writeln!(s, "{:w$}pk_dst[pk_q * {width}] = {x};\n{:w$}pk_q += 1;", "", "", w = inner * 4);
    close_loops(s, inner, depth);
}

/// Closes loops opened down to indentation `depth`, up to `to`.
fn close_loops(s: &mut String, mut depth: usize, to: usize) {
    while depth > to {
        depth -= 1;
        let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
    }
}

/// Columns of a packed kernel's epilogue computed per group of constant
/// size, so that GCC vectorises the group (pooled: windows, whose folds
/// then run side by side); 8 is one AVX2 vector of `f32`. On a 1024³ GEMM
/// on one thread of an AVX2 EPYC (`perf record`), the generated code's share of the samples (packing and
/// epilogue; the rest is the micro-kernel) went from 14.5% to 12.5%.
const EPILOGUE_GROUP: usize = 8;

/// The rows of a panel group ([`Printer::pack_group`]) one vector packs:
/// one AVX-512 register (two AVX2 ones in that ISA's clone).
const PACK_VECTOR: usize = 16;

/// The output points a window kernel computes together
/// ([`Printer::window_groups`]): eight independent folds, one AVX2 vector
/// of `f32` when GCC vectorises them.
const WINDOW_GROUP: usize = 8;

/// `TGC_CLONES`, on every function with a loop nest: on x86-64 with GCC and
/// glibc, GCC's `target_clones` compiles it three times, for AVX-512F, for
/// x86-64-v3 (AVX2 with FMA; plain AVX2 before GCC 12, which does not know
/// that level as a clone) and for the baseline, and the dynamic loader
/// picks one for the CPU once (an ifunc), so a library built on one
/// machine is still fast and still runs on another. All clones compute
/// the same bits: no FMA contraction by the compiler
/// (`tgc_runtime::cpu::VALUE_CFLAGS`), no reassociation, and every explicit
/// `fmaf` (a contraction's steps, `tgc_exp2f`'s polynomial) is correctly
/// rounded in each — an instruction in the AVX-512 and x86-64-v3 clones,
/// the C library's call in the baseline one; only the vector width
/// differs. With the `fmaf` of `tgc_exp2f` a call in the AVX2 clone,
/// softmax would run scalar there: the x86-64-v3 clone is what keeps it
/// vectorised. Elsewhere it is empty. With these clones (GCC 12 or later)
/// it also defines `TGC_VECTOR_ABI`: `tgc_exp2f` is then a function of the
/// x86-64 vector function ABI with hand-written variants per width (see
/// the helper), which a vectorised loop calls; softmax 4096×1024 on one
/// thread of a Zen 4 EPYC: 2.13 → 1.70 ms (scratch driver, best of 40).
///
/// `TGC_MAX_ISA`, a macro the compile may set (`-DTGC_MAX_ISA=N`, N the
/// [`RtIsa::level`] of `tgc_runtime::cpu_rt::Isa`: 2 AVX-512F, the default;
/// 1 AVX2; 0 the baseline), caps the library: no clone and no copy of a
/// wider ISA is chosen, at load time or by the dispatchers
/// ([`isa_dispatcher`], `tgc_max_run_f32`), so the narrower paths run on a
/// wider CPU, with the same bits. (The micro-kernel the library calls
/// through its `tgc_rt` has its own cap, `tgc_runtime::cpu_rt::set_max_isa`.)
const CLONES: &str = "/* Kernels in AVX-512, AVX2 (with FMA) and baseline versions, one chosen at load time;
 * TGC_MAX_ISA (2, 1 or 0: compile with -DTGC_MAX_ISA=N) caps them at AVX-512F, AVX2 or the baseline. */
#ifndef TGC_MAX_ISA
#define TGC_MAX_ISA 2
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__) && defined(__ELF__) && TGC_MAX_ISA >= 1
#if __GNUC__ >= 12
#if TGC_MAX_ISA >= 2
#define TGC_CLONES __attribute__((target_clones(\"avx512f\", \"arch=x86-64-v3\", \"default\")))
#else
#define TGC_CLONES __attribute__((target_clones(\"arch=x86-64-v3\", \"default\")))
#endif
#define TGC_VECTOR_ABI 1
#elif TGC_MAX_ISA >= 2
#define TGC_CLONES __attribute__((target_clones(\"avx512f\", \"avx2\", \"default\")))
#else
#define TGC_CLONES __attribute__((target_clones(\"avx2\", \"default\")))
#endif
#else
#define TGC_CLONES
#endif

";

/// `tgc_fresh(p)`, through which every scratch pointer passes
/// ([`open_scratch`]): `p` unchanged, but a call of a function with GCC's
/// (and Clang's) `malloc` attribute, so the compiler knows, as it does of
/// `malloc`'s result, that the buffer aliases nothing else. Without it GCC
/// 12 no longer if-converted the `tgc_exp2f` of softmax's row group (the
/// rows' buffers came from the scratch stack instead of `malloc`), and the
/// loop ran scalar: 45 ms instead of 10 ms for 4096×1024 on one thread of
/// an AVX2 EPYC. Not inlined, so the attribute holds; it runs
/// once per buffer and scope.
const FRESH: &str =
    "/* Scratch memory is fresh: like malloc's result it aliases nothing (see tgc_core's emit::c::FRESH). */
#if defined(__GNUC__)
__attribute__((malloc, noinline, unused)) static void* tgc_fresh(void* p) { return p; }
#else
static inline void* tgc_fresh(void* p) { return p; }
#endif

";

/// The whole translation unit: one comment block per graph, the includes
/// and helpers, then each graph's kernels and entry point.
fn print(units: &[(&Graph, Program, &str)], marks: Marks) -> String {
    let parts = print_parts(units, marks);
    let mut s = parts.headers;
    s.push_str(&parts.prelude);
    let bodies: Vec<String> = parts
        .graphs
        .into_iter()
        .map(|(pieces, entry)| pieces.into_iter().map(|p| p.text).collect::<String>() + &entry)
        .collect();
    s.push_str(&bodies.join("\n"));
    s
}

/// A C unit in its parts ([`print_parts`]).
struct Parts {
    /// The comment block of each graph's entry point.
    headers: String,
    /// The includes, macros and helpers that any function may use.
    prelude: String,
    /// Per graph: its functions in call order, then its entry point.
    graphs: Vec<(Vec<Piece>, String)>,
}

/// One printed function, or the comment that stands for one that shares
/// an earlier function's C.
struct Piece {
    text: String,
    /// The C name of the function `text` defines; `None` for a comment.
    defines: Option<String>,
}

/// The parts of the unit of `units`.
///
/// A function whose C is that of one printed before it, once both are
/// spelled in their [`shared_form`] (ResNet's repeated blocks: the same
/// shapes, the same ops, other weights), is not printed again: its entry
/// point calls the earlier one with its own arguments, and a comment with
/// its summary stands in its place.
fn print_parts(units: &[(&Graph, Program, &str)], marks: Marks) -> Parts {
    let mut used = BTreeSet::new();
    let mut graphs = Vec::new();
    let mut printed: BTreeMap<String, String> = BTreeMap::new();
    for &(g, ref p, symbol) in units {
        let mut pr = Printer { g, p, used: BTreeSet::new(), local: BTreeSet::new(), isa: None, vectorised: false };
        let mut pieces = Vec::new();
        let mut callees = Vec::new();
        for f in functions(p) {
            let text = match f {
                Function::Group(g) => pr.group(g, symbol),
                Function::Kernel(k) => pr.kernel(k, symbol),
            };
            let (ks, local, name) = callee(p, &f, symbol);
            let (bufs, syms) = ctx_fields(p, &ks, local);
            let params: Vec<String> = bufs.into_iter().chain(syms).map(|(_, n)| n).collect();
            match printed.entry(shared_form(&text, &name, &params)) {
                std::collections::btree_map::Entry::Occupied(e) => {
                    let summary: String =
                        text.lines().take_while(|l| l.starts_with("/*")).map(|l| format!("{l}\n")).collect();
                    let text = format!("{summary}/* {name}: the C of {}, called in its place. */\n\n", e.get());
                    pieces.push(Piece { text, defines: None });
                    callees.push(e.get().clone());
                }
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(name.clone());
                    pieces.push(Piece { text: format!("{text}\n"), defines: Some(name.clone()) });
                    callees.push(name);
                }
            }
        }
        let entry = entry(p, symbol, marks, &callees);
        used.extend(pr.used);
        graphs.push((pieces, entry));
    }
    let mut headers = String::new();
    for (_, p, symbol) in units {
        headers.push_str(&header(p, symbol));
    }
    let mut s = String::new();
    s.push_str("#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\n");
    // A function, not isl's macro: the macro repeats `n`, so nested floor
    // divisions grew as 3^depth once preprocessed, and a fuzzed case
    // (fuzz/corpus/graphs/slow-cc-nested-floord) kept GCC busy for over a
    // minute; with the function it compiles in under a second.
    s.push_str("static inline int64_t floord(int64_t n, int64_t d) { return n < 0 ? -((-n + d - 1) / d) : n / d; }\n");
    s.push_str("static inline int64_t tgc_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }\n");
    s.push_str(FRESH);
    s.push_str(CLONES);

    s.push_str(C_DECL);
    s.push('\n');
    let mut needed: BTreeSet<&str> = used.clone();
    for h in &used {
        needed.extend(helper_deps(h));
    }
    for (name, code) in HELPERS {
        if needed.contains(name) {
            let _ = writeln!(s, "{code}\n");
        }
    }
    for (name, op) in RUN_HELPERS {
        if needed.contains(name) {
            let _ = writeln!(s, "{}\n", RUN_F32.replace("OP", op));
        }
    }
    Parts { headers, prelude: s, graphs }
}

/// `TGC_PART`, on the functions of a unit split into parts
/// ([`emit_c_parts`]) in place of `static`: visible to the other parts of
/// the library, hidden outside it.
const PART: &str =
    "/* A part of a kernel library: its functions are called from another part (see tgc_core's emit::c::PART). */
#if defined(__GNUC__)
#define TGC_PART __attribute__((visibility(\"hidden\")))
#else
#define TGC_PART
#endif

";

/// [`emit_c_programs`] as several translation units, to compile at once
/// and link into one library: the functions in parts of about
/// `part_lines` lines each (each part with the includes and helpers), and
/// last the entry points with a declaration of each function they call.
/// A unit of at most `part_lines` lines stays whole: one unit, the text of
/// [`emit_c_programs`].
///
/// Errors: as [`emit_c_programs`].
pub fn emit_c_parts(programs: &[(&Graph, Program, &str)], part_lines: usize) -> Result<Vec<String>, Diagnostic> {
    check_names(programs)?;
    let parts = print_parts(programs, Marks::None);
    let lines: usize = parts.graphs.iter().flat_map(|(ps, _)| ps).map(|p| p.text.lines().count()).sum();
    if lines <= part_lines {
        return Ok(vec![print(programs, Marks::None)]);
    }
    let mut units = Vec::new();
    let mut declarations = String::new();
    let mut part = String::new();
    let mut part_len = 0;
    for piece in parts.graphs.iter().flat_map(|(ps, _)| ps) {
        let Some(name) = &piece.defines else { continue };
        let (at, declaration) = definition(&piece.text, name).ok_or_else(|| {
            diag!(Internal, "the C of `{name}` has no definition `static void|int32_t {name}(…)` to share")
        })?;
        let _ = writeln!(declarations, "TGC_PART {declaration};");
        part.push_str(&piece.text[..at]);
        part.push_str("TGC_PART");
        part.push_str(&piece.text[at + "static".len()..]);
        part_len += piece.text.lines().count();
        if part_len >= part_lines {
            units.push(format!("{}{PART}{}", parts.prelude, std::mem::take(&mut part)));
            part_len = 0;
        }
    }
    if !part.is_empty() {
        units.push(format!("{}{PART}{part}", parts.prelude));
    }
    let entries: Vec<&str> = parts.graphs.iter().map(|(_, e)| e.as_str()).collect();
    units.push(format!("{}{}{PART}{declarations}\n{}", parts.headers, parts.prelude, entries.join("\n")));
    Ok(units)
}

/// Where in `text` the definition of function `name` begins
/// (`static void name(…)` or `static int32_t name(…)` on one line, after
/// any attribute) and its declaration without `static`.
fn definition(text: &str, name: &str) -> Option<(usize, String)> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let signature = line.trim_end();
        for ret in ["void", "int32_t"] {
            if let Some(i) = signature.find(&format!("static {ret} {name}(")) {
                if signature.ends_with(')') {
                    return Some((at + i, signature[i + "static ".len()..].to_string()));
                }
            }
        }
        at += line.len();
    }
    None
}

/// The comment block that documents one graph's entry point.
fn header(p: &Program, symbol: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "/* Generated by tgc from graph `{}`: C11, one kernel per loop nest. Do not edit.",
        comment_text(&p.name)
    );
    let _ =
        writeln!(s, " *\n * int32_t {symbol}(const void* const* inputs, void* const* outputs, const int64_t* dims, const tgc_rt* rt)");
    for b in &p.buffers {
        let dims: Vec<String> = b.shape.iter().map(|d| d.to_string()).collect();
        let what = match b.role {
            Role::Input(k) => format!("inputs[{k}]"),
            Role::Output(k) => format!("outputs[{k}]"),
            Role::Temp => continue,
        };
        let _ = writeln!(
            s,
            " *   {what}: {} {}[{}]",
            comment_text(&b.label),
            b.dtype.json_name(),
            comment_text(&dims.join(", "))
        );
    }
    let syms: Vec<String> = p.dims().enumerate().map(|(k, n)| format!("dims[{k}] = {n}")).collect();
    if !syms.is_empty() {
        let _ = writeln!(s, " *   {}", syms.join(", "));
    }
    let arena = arena::plan(p);
    let temps: usize = arena.slots.iter().map(Vec::len).sum();
    if temps > 0 {
        let none = |_: &str| None;
        let bytes = match (arena.bytes(&none), arena.unshared_bytes(&none)) {
            (Ok(a), Ok(u)) => format!(", {a} bytes ({u} unshared)"),
            _ => String::new(),
        };
        let _ = writeln!(s, " * Temporaries: {temps} in {} arena slots by live range{bytes}.", arena.slots.len());
    }
    s.push_str(
        " * Returns 0; 1 when scratch memory cannot be had; 2 when the dims break a requirement of the graph.\n */\n",
    );
    s
}

/// The kernels, the local temporaries and the C name of function `f` of
/// `p` (of entry point `symbol`).
fn callee<'p>(p: &'p Program, f: &Function<'p>, symbol: &str) -> (Vec<&'p Kernel>, &'p [BufId], String) {
    match *f {
        Function::Group(g) => (p.kernels[g.kernels.clone()].iter().collect(), &g.local, group_name(p, g, symbol)),
        Function::Kernel(k) => (vec![k], &[], format!("tgc_{}_{symbol}", k.name)),
    }
}

/// The printed function `name` (its helpers `name_*` with it) whose
/// parameters are `params`, spelled so that two functions that compute the
/// same from their parameters in the same order read the same: comments
/// dropped, `name` spelled `@f`, parameter `k` spelled `@k`. Every other
/// identifier (locals, helpers, constants) is kept, so equal forms mean
/// equal C up to those names.
fn shared_form(text: &str, name: &str, params: &[String]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            let word = &rest[..end];
            match params.iter().position(|p| p == word) {
                Some(k) => {
                    let _ = write!(out, "@{k}");
                }
                None => match word.strip_prefix(name).filter(|tail| tail.is_empty() || tail.starts_with('_')) {
                    Some(tail) => {
                        let _ = write!(out, "@f{tail}");
                    }
                    None => out.push_str(word),
                },
            }
            rest = &rest[end..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The exported function: dims, checks, buffers, kernel calls (function
/// `c` of [`functions`] through `callees[c]`), frees.
fn entry(p: &Program, symbol: &str, marks: Marks, callees: &[String]) -> String {
    let clock = match marks {
        Marks::None => "",
        Marks::Calls => ", void (*tgc_mark)(void* ctx, int64_t call), void* tgc_mark_ctx",
    };
    let mut s = format!(
        "int32_t {symbol}(const void* const* inputs, void* const* outputs, const int64_t* dims, const tgc_rt* rt{clock})\n{{\n"
    );
    if p.symbols.is_empty() && p.tiles.is_empty() {
        s.push_str("    (void)dims;\n");
    }
    for (k, n) in p.dims().enumerate() {
        let _ = writeln!(s, "    const int64_t {} = dims[{k}];", sym_name(n));
    }
    for c in &p.checks {
        let rel = match c.rel {
            Rel::Eq => "==",
            Rel::Le => "<=",
        };
        let _ = writeln!(
            s,
            "    if (!({} {rel} {})) return 2; /* {} */",
            dim(&c.lhs, Lang::C),
            dim(&c.rhs, Lang::C),
            comment_text(&c.what)
        );
    }
    let local: BTreeSet<BufId> = p.rows.iter().flat_map(|g| g.local.iter().copied()).collect();
    let used: BTreeSet<_> =
        p.kernels.iter().flat_map(|k| k.reads().into_iter().chain([k.out])).filter(|b| !local.contains(b)).collect();
    for (i, b) in p.buffers.iter().enumerate() {
        if !used.contains(&BufId(i as u32)) {
            continue;
        }
        let ty = storage_ty(b.dtype);
        match b.role {
            Role::Input(k) => {
                let _ = writeln!(s, "    const {ty}* {} = (const {ty}*)inputs[{k}];", b.name);
            }
            Role::Output(k) => {
                let _ = writeln!(s, "    {ty}* {} = ({ty}*)outputs[{k}];", b.name);
            }
            // In the arena's slots, below.
            Role::Temp => {}
        }
    }
    let uses =
        |f: fn(Role) -> bool| p.buffers.iter().enumerate().any(|(i, b)| f(b.role) && used.contains(&BufId(i as u32)));
    if !uses(|r| matches!(r, Role::Input(_))) {
        s.push_str("    (void)inputs;\n");
    }
    if !uses(|r| matches!(r, Role::Output(_))) {
        s.push_str("    (void)outputs;\n");
    }
    // The temporaries: one scratch scope whose buffers are the arena's
    // slots, each as large as its largest tenant.
    let arena = arena::plan(p);
    let slots: Vec<Scratch> = (0..arena.slots.len())
        .map(|k| {
            let bytes =
                arena.slot_sizes(k).iter().map(|d| dim(d, Lang::C)).reduce(|a, b| format!("tgc_max_i64({a}, {b})"));
            let tenants: Vec<&str> = arena.slots[k].iter().map(|l| p.buffer(l.buf).name.as_str()).collect();
            Scratch {
                ty: "char*".into(),
                name: format!("pk_slot{k}"),
                bytes: bytes.unwrap_or_else(|| "0".into()),
                what: format!("arena slot: {}", tenants.join(", ")),
            }
        })
        .collect();
    let frees = close_scratch("rt");
    let temps = !slots.is_empty();
    if temps {
        open_scratch(&mut s, 4, "rt", &slots, "return 1;");
        for (k, slot) in arena.slots.iter().enumerate() {
            for l in slot {
                let b = p.buffer(l.buf);
                let ty = storage_ty(b.dtype);
                let _ = writeln!(s, "    {ty}* {} = ({ty}*)pk_slot{k}; /* {} */", b.name, comment_text(&b.label));
            }
        }
    }
    let mut uses_rt = false;
    if marks == Marks::Calls {
        s.push_str("    tgc_mark(tgc_mark_ctx, -1);\n");
    }
    for (call, (f, name)) in functions(p).into_iter().zip(callees).enumerate() {
        let (ks, local, _) = callee(p, &f, symbol);
        let (bufs, syms) = ctx_fields(p, &ks, local);
        let mut args: Vec<String> = bufs.into_iter().chain(syms).map(|(_, n)| n).collect();
        let is_packed = packed::of(ks[0]).is_some();
        let is_scan = ks[0].scan.is_some();
        let fails = is_packed || is_scan || !local.is_empty();
        if is_packed || is_scan || rows::can_join(ks[0]) {
            uses_rt = true;
            args.push("rt".into());
        }
        if fails {
            let _ = writeln!(s, "    if ({name}({})) {{", args.join(", "));
            if temps {
                let _ = writeln!(s, "        {frees}");
            }
            s.push_str("        return 1;\n    }\n");
        } else {
            let _ = writeln!(s, "    {name}({});", args.join(", "));
        }
        if marks == Marks::Calls {
            let _ = writeln!(s, "    tgc_mark(tgc_mark_ctx, {call});");
        }
    }
    if !uses_rt && !temps {
        s.push_str("    (void)rt;\n");
    }
    if temps {
        let _ = writeln!(s, "    {frees}");
    }
    s.push_str("    return 0;\n}\n");
    s
}
