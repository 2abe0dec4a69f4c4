//! The one place tgc calls isl (through the `isl-rs` bindings, which build
//! the bundled isl 0.27 with imath): a small safe layer with just the
//! operations the polyhedral passes use (`000` §12.7).
//!
//! **Architecture Invariant:** no other module of tgc names `isl_rs`.
//!
//! Ownership and lifetimes:
//! - a [`Ctx`] owns an `isl_ctx`; every object ([`Set`], [`Map`],
//!   [`PwMultiAff`], [`UnionSet`], [`UnionMap`]) borrows the `Ctx` it was made
//!   in (`'c`), so no object outlives its context (isl would read freed
//!   memory) and objects of two contexts cannot be mixed by accident of
//!   lifetimes being equal only when the borrow is the same;
//! - objects own one isl reference each and free it on drop; every operation
//!   takes `&self`, copies the isl reference it consumes (isl's `__isl_take`,
//!   a reference-count increment) and returns a new object, so the Rust value
//!   is never left consumed;
//! - a wrapper never holds a null pointer: a failed isl call is an
//!   [`IslError`] (isl-rs would dereference null in later calls);
//! - nothing here is `Send` or `Sync`: an `isl_ctx` is single-threaded. Use
//!   one `Ctx` per thread.
//!
//! The context is set to `on_error = continue`, so isl reports errors
//! through return values only (a syntax error in parsed text still prints
//! isl's own message on stderr). `to_string` copies the text isl allocates
//! and frees it (isl-rs's `to_str` would leak it).
//!
//! One isl function is declared here rather than taken from isl-rs, which
//! does not bind callbacks: `isl_set_foreach_point`, behind [`Set::points`]
//! and [`Map::pairs`] (point enumeration, for tests that check isl's
//! answers by brute force).
//!
//! Text is isl's notation (`[N] -> { S[i0, i1] : 0 <= i0 < N }`), the
//! notation of `003`.

use std::fmt;
use std::marker::PhantomData;

use isl_rs::{Context, DimType, Options};

/// A failed isl operation: what was attempted and isl's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IslError(pub String);

impl fmt::Display for IslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "isl: {}", self.0)
    }
}

impl std::error::Error for IslError {}

/// Result of an isl operation.
pub type IslResult<T> = Result<T, IslError>;

/// `ISL_ON_ERROR_CONTINUE` of `isl/options.h`.
const ON_ERROR_CONTINUE: i32 = 1;

/// An isl context (see the module doc for the rules).
pub struct Ctx {
    raw: Context,
    _single_thread: PhantomData<*const ()>,
}

impl Default for Ctx {
    fn default() -> Ctx {
        Ctx::new()
    }
}

impl Ctx {
    /// A fresh context whose errors are returned, not printed.
    pub fn new() -> Ctx {
        let raw = Context::alloc();
        // Setting an option of a fresh context cannot fail in a way that
        // matters: on failure isl keeps warning on errors, which only prints.
        let _ = Options::set_on_error(&raw, ON_ERROR_CONTINUE);
        Ctx { raw, _single_thread: PhantomData }
    }

    /// Parses a set in isl notation.
    pub fn set(&self, text: &str) -> IslResult<Set<'_>> {
        let t = c_text(text)?;
        self.wrap(isl_rs::Set::read_from_str(&self.raw, t), "parse set", text)
    }

    /// Parses a map in isl notation.
    pub fn map(&self, text: &str) -> IslResult<Map<'_>> {
        let t = c_text(text)?;
        self.wrap(isl_rs::Map::read_from_str(&self.raw, t), "parse map", text)
    }

    /// Parses a union set in isl notation (`{ A[i] : …; B[j] : … }`).
    pub fn union_set(&self, text: &str) -> IslResult<UnionSet<'_>> {
        let t = c_text(text)?;
        self.wrap(isl_rs::UnionSet::read_from_str(&self.raw, t), "parse union set", text)
    }

    /// Parses a union map in isl notation.
    pub fn union_map(&self, text: &str) -> IslResult<UnionMap<'_>> {
        let t = c_text(text)?;
        self.wrap(isl_rs::UnionMap::read_from_str(&self.raw, t), "parse union map", text)
    }

    /// Turns an isl-rs result into a wrapper, rejecting null objects and
    /// clearing the context's error so later calls start clean.
    fn wrap<'c, R: Raw, W: From<(R, &'c Ctx)>>(
        &'c self,
        r: Result<R, isl_rs::LibISLError>,
        what: &str,
        arg: &str,
    ) -> IslResult<W> {
        match r {
            Ok(obj) if obj.ptr() != 0 => Ok(W::from((obj, self))),
            Ok(_) => {
                self.raw.reset_error();
                Err(IslError(format!("{what} `{arg}` returned no object")))
            }
            Err(e) => {
                self.raw.reset_error();
                Err(IslError(format!("{what} `{arg}`: {e}")))
            }
        }
    }

    fn check<T>(&self, r: Result<T, isl_rs::LibISLError>, what: &str) -> IslResult<T> {
        r.map_err(|e| {
            self.raw.reset_error();
            IslError(format!("{what}: {e}"))
        })
    }
}

/// isl-rs refuses interior NUL bytes by panicking; refuse them here.
fn c_text(text: &str) -> IslResult<&str> {
    if text.contains('\0') {
        return Err(IslError("isl text contains a NUL byte".into()));
    }
    Ok(text)
}

/// An isl-rs object: its raw pointer.
trait Raw {
    fn ptr(&self) -> usize;
}

/// Copies the C string isl returned for `to_str` and frees it.
fn take_str(s: IslResult<&str>) -> IslResult<String> {
    let s = s?;
    let out = s.to_string();
    // SAFETY: isl-rs's `to_str` returns a view of the string that
    // `isl_*_to_str` allocated with `malloc` and handed to the caller
    // (`__isl_give char *`); nothing else refers to it, and the view is not
    // used after this point.
    unsafe { libc::free(s.as_ptr() as *mut libc::c_void) };
    Ok(out)
}

macro_rules! wrapper {
    ($(#[$doc:meta])* $name:ident, $raw:ty, $what:literal) => {
        $(#[$doc])*
        pub struct $name<'c> {
            raw: $raw,
            ctx: &'c Ctx,
        }

        impl Raw for $raw {
            fn ptr(&self) -> usize {
                self.ptr as usize
            }
        }

        impl<'c> From<($raw, &'c Ctx)> for $name<'c> {
            fn from((raw, ctx): ($raw, &'c Ctx)) -> $name<'c> {
                $name { raw, ctx }
            }
        }

        impl<'c> $name<'c> {
            /// The context the object lives in.
            pub fn ctx(&self) -> &'c Ctx {
                self.ctx
            }

            /// A new reference to the same isl object.
            fn raw_copy(&self) -> IslResult<$raw> {
                let r = self.raw.copy();
                self.ctx.check(r, concat!("copy ", $what))
            }

            fn wrap<R: Raw, W: From<(R, &'c Ctx)>>(
                &self,
                r: Result<R, isl_rs::LibISLError>,
                what: &str,
            ) -> IslResult<W> {
                self.ctx.wrap(r, what, $what)
            }

            /// The object in isl notation.
            pub fn to_isl(&self) -> IslResult<String> {
                take_str(self.ctx.check(self.raw.to_str(), concat!("print ", $what)))
            }

            /// The same object (a new isl reference).
            pub fn try_clone(&self) -> IslResult<$name<'c>> {
                Ok($name { raw: self.raw_copy()?, ctx: self.ctx })
            }
        }

        impl fmt::Display for $name<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.to_isl() {
                    Ok(s) => f.write_str(&s),
                    Err(e) => write!(f, "<{e}>"),
                }
            }
        }

        impl fmt::Debug for $name<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }
    };
}

wrapper!(
    /// An `isl_set`: a finite union of integer polyhedra (with divs) over
    /// named parameters.
    Set,
    isl_rs::Set,
    "set"
);
wrapper!(
    /// An `isl_map`: a relation between two integer spaces.
    Map,
    isl_rs::Map,
    "map"
);
wrapper!(
    /// An `isl_pw_multi_aff`: a piecewise quasi-affine function.
    PwMultiAff,
    isl_rs::PwMultiAff,
    "pw_multi_aff"
);
wrapper!(
    /// An `isl_union_set`: sets in different spaces (statements).
    UnionSet,
    isl_rs::UnionSet,
    "union_set"
);
wrapper!(
    /// An `isl_union_map`: maps between different spaces.
    UnionMap,
    isl_rs::UnionMap,
    "union_map"
);

impl<'c> Set<'c> {
    /// The same set with its tuple named `name`.
    pub fn with_tuple_name(&self, name: &str) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.set_tuple_name(c_text(name)?), "set_tuple_name")
    }

    pub fn is_equal(&self, other: &Set<'c>) -> IslResult<bool> {
        self.ctx.check(self.raw.is_equal(&other.raw), "set is_equal")
    }

    pub fn is_subset(&self, other: &Set<'c>) -> IslResult<bool> {
        self.ctx.check(self.raw.is_subset(&other.raw), "set is_subset")
    }

    pub fn is_empty(&self) -> IslResult<bool> {
        self.ctx.check(self.raw.is_empty(), "set is_empty")
    }

    pub fn intersect(&self, other: &Set<'c>) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.intersect(other.raw_copy()?), "intersect")
    }

    /// Intersects with a parameter-only set (a context).
    pub fn intersect_params(&self, params: &Set<'c>) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.intersect_params(params.raw_copy()?), "intersect_params")
    }

    pub fn subtract(&self, other: &Set<'c>) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.subtract(other.raw_copy()?), "subtract")
    }

    pub fn union(&self, other: &Set<'c>) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.union(other.raw_copy()?), "union")
    }

    /// Merges basic sets where the union is convex (`isl_set_coalesce`).
    pub fn coalesce(&self) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.coalesce(), "coalesce")
    }

    pub fn remove_redundancies(&self) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.remove_redundancies(), "remove_redundancies")
    }

    /// Drops the constraints implied by `context` (equal on `context` only).
    pub fn gist(&self, context: &Set<'c>) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.gist(context.raw_copy()?), "gist")
    }

    /// Number of basic sets (pieces) in the set's current representation.
    pub fn n_basic_set(&self) -> IslResult<usize> {
        self.ctx.check(self.raw.n_basic_set(), "n_basic_set").map(|n| n.max(0) as usize)
    }

    /// The parameter-only projection.
    pub fn params(&self) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.params(), "params")
    }

    /// Number of points of a bounded set without parameters.
    pub fn count(&self) -> IslResult<i64> {
        let v = self.ctx.check(self.raw.count_val(), "count_val")?;
        if v.ptr == 0 || !self.ctx.check(v.is_int(), "is_int")? {
            return Err(IslError(format!("the set has no finite point count: {self}")));
        }
        self.ctx.check(v.get_num_si(), "get_num_si")
    }

    /// Number of set dimensions.
    pub fn n_dim(&self) -> IslResult<usize> {
        self.ctx.check(self.raw.dim(DimType::Set), "dim").map(|n| n.max(0) as usize)
    }

    /// Names of the parameters, in order.
    pub fn param_names(&self) -> IslResult<Vec<String>> {
        let n = self.ctx.check(self.raw.dim(DimType::Param), "dim")?;
        (0..n.max(0) as u32).map(|k| self.dim_name(DimType::Param, k)).collect()
    }

    /// Names of the set dimensions (`""` where unnamed).
    pub fn dim_names(&self) -> IslResult<Vec<String>> {
        (0..self.n_dim()? as u32).map(|k| self.dim_name(DimType::Set, k)).collect()
    }

    fn dim_name(&self, ty: DimType, k: u32) -> IslResult<String> {
        // isl-rs dereferences the name without a null check: ask first.
        if !self.ctx.check(self.raw.has_dim_name(ty, k), "has_dim_name")? {
            return Ok(String::new());
        }
        self.ctx.check(self.raw.get_dim_name(ty, k), "get_dim_name").map(str::to_string)
    }

    pub fn to_union_set(&self) -> IslResult<UnionSet<'c>> {
        self.wrap(self.raw_copy()?.to_union_set(), "to_union_set")
    }

    /// `{ x -> x : x in self }`.
    pub fn identity(&self) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.identity(), "identity")
    }

    /// The image of the set under `map` (`isl_set_apply`).
    pub fn apply(&self, map: &Map<'c>) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.apply(map.raw_copy()?), "apply")
    }

    /// The least value set dimension `pos` takes, over every parameter value
    /// (`isl_set_dim_min_val`); `None` when it is unbounded below or the set
    /// is empty.
    pub fn dim_min(&self, pos: usize) -> IslResult<Option<i64>> {
        let v = self.ctx.check(self.raw_copy()?.dim_min_val(pos as i32), "dim_min_val")?;
        self.int_val(v)
    }

    /// The greatest value of set dimension `pos` over every parameter value
    /// (`isl_set_dim_max_val`); `None` when unbounded above or empty.
    pub fn dim_max(&self, pos: usize) -> IslResult<Option<i64>> {
        let v = self.ctx.check(self.raw_copy()?.dim_max_val(pos as i32), "dim_max_val")?;
        self.int_val(v)
    }

    /// Every point of a set without parameters, as coordinates in isl's
    /// order (lexicographic), through `isl_set_foreach_point`. For tests
    /// that compare isl's answers with brute-force enumeration.
    ///
    /// Errors: the set has parameters or is unbounded, or has more than
    /// `limit` points.
    pub fn points(&self, limit: usize) -> IslResult<Vec<Vec<i64>>> {
        if !self.param_names()?.is_empty() {
            return Err(IslError(format!("points of a set with parameters: {self}")));
        }
        let mut acc = Points { dims: self.n_dim()?, limit, out: Vec::new(), err: None };
        // SAFETY: `isl_set_foreach_point` keeps its set argument (the
        // wrapper's own reference stays valid during the call) and hands each
        // point to `collect_point` with `user` as given, on this thread,
        // before it returns; `acc` outlives the call.
        let status =
            unsafe { isl_set_foreach_point(self.raw.ptr, collect_point, &mut acc as *mut Points as *mut libc::c_void) };
        if let Some(e) = acc.err {
            self.ctx.raw.reset_error();
            return Err(IslError(e));
        }
        if status < 0 {
            self.ctx.raw.reset_error();
            return Err(IslError(format!("foreach_point failed (an unbounded set?): {self}")));
        }
        Ok(acc.out)
    }

    fn int_val(&self, v: isl_rs::Val) -> IslResult<Option<i64>> {
        if v.ptr == 0 {
            self.ctx.raw.reset_error();
            return Err(IslError("dim_min/max_val returned no value".into()));
        }
        if !self.ctx.check(v.is_int(), "is_int")? {
            return Ok(None); // ±infinity (unbounded) or NaN (empty)
        }
        self.ctx.check(v.get_num_si(), "get_num_si").map(Some)
    }
}

extern "C" {
    // `isl_stat isl_set_foreach_point(__isl_keep isl_set *set,
    //     isl_stat (*fn)(__isl_take isl_point *pnt, void *user), void *user)`
    // of `isl/set.h`, which isl-rs does not bind (it takes a callback).
    fn isl_set_foreach_point(
        set: libc::uintptr_t,
        f: extern "C" fn(libc::uintptr_t, *mut libc::c_void) -> i32,
        user: *mut libc::c_void,
    ) -> i32;
}

/// What [`Set::points`] collects.
struct Points {
    dims: usize,
    limit: usize,
    out: Vec<Vec<i64>>,
    err: Option<String>,
}

/// The callback of [`Set::points`]: takes the point (isl passes ownership),
/// appends its coordinates; `-1` (`isl_stat_error`) stops the walk.
extern "C" fn collect_point(pnt: libc::uintptr_t, user: *mut libc::c_void) -> i32 {
    // SAFETY: isl hands over one reference to a valid point, which the
    // wrapper frees on drop; `user` is the `&mut Points` of `Set::points`,
    // not otherwise borrowed during the walk.
    let (p, acc) = unsafe { (isl_rs::Point { ptr: pnt, should_free_on_drop: true }, &mut *(user as *mut Points)) };
    if acc.out.len() >= acc.limit {
        acc.err = Some(format!("more than {} points", acc.limit));
        return -1;
    }
    let mut coords = Vec::with_capacity(acc.dims);
    for k in 0..acc.dims {
        match p.get_coordinate_val(DimType::Set, k as i32).and_then(|v| v.get_num_si()) {
            Ok(c) => coords.push(c),
            Err(e) => {
                acc.err = Some(format!("point coordinate {k}: {e}"));
                return -1;
            }
        }
    }
    acc.out.push(coords);
    0
}

impl<'c> Map<'c> {
    /// The same map with its input tuple named `input` and its output
    /// tuple `output`.
    pub fn with_tuple_names(&self, input: &str, output: &str) -> IslResult<Map<'c>> {
        let named = self.raw_copy()?.set_tuple_name(DimType::In, c_text(input)?);
        let named = self.ctx.check(named, "set_tuple_name")?;
        self.wrap(named.set_tuple_name(DimType::Out, c_text(output)?), "set_tuple_name")
    }

    /// The names of the input and output tuples (empty for an unnamed one).
    pub fn tuple_names(&self) -> IslResult<(String, String)> {
        let name = |ty: DimType| -> IslResult<String> {
            // isl-rs dereferences the name without a null check: ask first.
            if !self.ctx.check(self.raw.has_tuple_name(ty), "has_tuple_name")? {
                return Ok(String::new());
            }
            self.ctx.check(self.raw.get_tuple_name(ty), "get_tuple_name").map(str::to_string)
        };
        Ok((name(DimType::In)?, name(DimType::Out)?))
    }

    /// Every pair `(x, y)` of a map without parameters (see
    /// [`Set::points`]; the map is wrapped into a set of `[x -> y]`).
    ///
    /// Errors: those of [`Set::points`].
    pub fn pairs(&self, limit: usize) -> IslResult<Vec<(Vec<i64>, Vec<i64>)>> {
        let n_in = self.ctx.check(self.raw.dim(DimType::In), "dim")?.max(0) as usize;
        let wrapped: Set<'c> = self.wrap(self.raw_copy()?.wrap(), "wrap")?;
        Ok(wrapped.points(limit)?.into_iter().map(|mut p| (p.drain(..n_in).collect(), p)).collect())
    }

    pub fn is_equal(&self, other: &Map<'c>) -> IslResult<bool> {
        self.ctx.check(self.raw.is_equal(&other.raw), "map is_equal")
    }

    pub fn is_subset(&self, other: &Map<'c>) -> IslResult<bool> {
        self.ctx.check(self.raw.is_subset(&other.raw), "map is_subset")
    }

    pub fn is_empty(&self) -> IslResult<bool> {
        self.ctx.check(self.raw.is_empty(), "map is_empty")
    }

    /// True when every domain point has at most one image (a function).
    pub fn is_single_valued(&self) -> IslResult<bool> {
        self.ctx.check(self.raw.is_single_valued(), "is_single_valued")
    }

    pub fn domain(&self) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.domain(), "domain")
    }

    pub fn range(&self) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.range(), "range")
    }

    pub fn reverse(&self) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.reverse(), "reverse")
    }

    /// `other ∘ self`: the images of `self` mapped on by `other`.
    pub fn apply_range(&self, other: &Map<'c>) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.apply_range(other.raw_copy()?), "apply_range")
    }

    pub fn intersect(&self, other: &Map<'c>) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.intersect(other.raw_copy()?), "intersect")
    }

    pub fn intersect_domain(&self, set: &Set<'c>) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.intersect_domain(set.raw_copy()?), "intersect_domain")
    }

    pub fn intersect_range(&self, set: &Set<'c>) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.intersect_range(set.raw_copy()?), "intersect_range")
    }

    pub fn intersect_params(&self, params: &Set<'c>) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.intersect_params(params.raw_copy()?), "intersect_params")
    }

    pub fn union(&self, other: &Map<'c>) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.union(other.raw_copy()?), "union")
    }

    pub fn coalesce(&self) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.coalesce(), "coalesce")
    }

    pub fn remove_redundancies(&self) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.remove_redundancies(), "remove_redundancies")
    }

    /// Drops the constraints implied by `domain` on the domain side.
    pub fn gist_domain(&self, domain: &Set<'c>) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.gist_domain(domain.raw_copy()?), "gist_domain")
    }

    /// `{ x -> y : self(x) <lex other(y) }` (`isl_map_lex_lt_map`).
    pub fn lex_lt_map(&self, other: &Map<'c>) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.lex_lt_map(other.raw_copy()?), "lex_lt_map")
    }

    /// Number of basic maps in the current representation.
    pub fn n_basic_map(&self) -> IslResult<usize> {
        self.ctx.check(self.raw.n_basic_map(), "n_basic_map").map(|n| n.max(0) as usize)
    }

    /// True when no two domain points share an image.
    pub fn is_injective(&self) -> IslResult<bool> {
        self.ctx.check(self.raw.is_injective(), "is_injective")
    }

    /// `{ y - x : x -> y in self }` (domain and range of the same space).
    pub fn deltas(&self) -> IslResult<Set<'c>> {
        self.wrap(self.raw_copy()?.deltas(), "deltas")
    }

    /// The map as a piecewise quasi-affine function (it must be single-valued).
    pub fn to_pw_multi_aff(&self) -> IslResult<PwMultiAff<'c>> {
        self.wrap(isl_rs::PwMultiAff::from_map(self.raw_copy()?), "pw_multi_aff_from_map")
    }

    pub fn to_union_map(&self) -> IslResult<UnionMap<'c>> {
        self.wrap(self.raw_copy()?.to_union_map(), "to_union_map")
    }
}

impl<'c> PwMultiAff<'c> {
    /// Number of pieces (disjoint domains with one quasi-affine function each).
    pub fn n_piece(&self) -> IslResult<usize> {
        self.ctx.check(self.raw.n_piece(), "n_piece").map(|n| n.max(0) as usize)
    }

    pub fn is_equal(&self, other: &PwMultiAff<'c>) -> IslResult<bool> {
        self.ctx.check(self.raw.is_equal(&other.raw), "pw_multi_aff is_equal")
    }

    pub fn to_map(&self) -> IslResult<Map<'c>> {
        self.wrap(self.raw_copy()?.as_map(), "as_map")
    }
}

impl<'c> UnionSet<'c> {
    pub fn union(&self, other: &UnionSet<'c>) -> IslResult<UnionSet<'c>> {
        self.wrap(self.raw_copy()?.union(other.raw_copy()?), "union")
    }

    pub fn is_equal(&self, other: &UnionSet<'c>) -> IslResult<bool> {
        self.ctx.check(self.raw.is_equal(&other.raw), "union_set is_equal")
    }

    /// Number of sets (one per statement space).
    pub fn n_set(&self) -> IslResult<usize> {
        self.ctx.check(self.raw.n_set(), "n_set").map(|n| n.max(0) as usize)
    }
}

impl<'c> UnionMap<'c> {
    pub fn union(&self, other: &UnionMap<'c>) -> IslResult<UnionMap<'c>> {
        self.wrap(self.raw_copy()?.union(other.raw_copy()?), "union")
    }

    pub fn is_equal(&self, other: &UnionMap<'c>) -> IslResult<bool> {
        self.ctx.check(self.raw.is_equal(&other.raw), "union_map is_equal")
    }

    /// Number of maps (one per pair of spaces).
    pub fn n_map(&self) -> IslResult<usize> {
        self.ctx.check(self.raw.n_map(), "n_map").map(|n| n.max(0) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_a_parametric_set() {
        let ctx = Ctx::new();
        let s = ctx.set("[N] -> { S[i0, i1] : 0 <= i0 < N and 0 <= i1 < 4 }").unwrap();
        assert_eq!(s.to_isl().unwrap(), "[N] -> { S[i0, i1] : 0 <= i0 < N and 0 <= i1 <= 3 }");
        assert_eq!(s.param_names().unwrap(), ["N"]);
        assert_eq!(s.dim_names().unwrap(), ["i0", "i1"]);
        let n3 = s.intersect_params(&ctx.set("[N] -> { : N = 3 }").unwrap()).unwrap();
        assert_eq!(n3.count().unwrap(), 12);
    }

    #[test]
    fn errors_are_values_and_leave_the_context_usable() {
        let ctx = Ctx::new();
        let a = ctx.set("{ A[i] : 0 <= i < 4 }").unwrap();
        let b = ctx.set("{ B[i, j] : 0 <= i < 4 }").unwrap();
        assert!(a.intersect(&b).is_err(), "spaces differ");
        assert!(ctx.map("{ A[i] -> }").is_err());
        assert!(ctx.set("{ A[i] : i = 0 }\0").is_err());
        assert_eq!(a.count().unwrap(), 4);
        assert!(ctx.set("[N] -> { A[i] : 0 <= i < N }").unwrap().count().is_err());
    }

    #[test]
    fn floordiv_and_remainder_are_exact_divs() {
        let ctx = Ctx::new();
        let m = ctx.map("{ S[i0] -> T[floor(i0/4), i0 - 4*floor(i0/4)] : 0 <= i0 < 12 }").unwrap();
        let expected = ctx.map("{ S[i0] -> T[a, b] : 0 <= i0 < 12 and i0 = 4a + b and 0 <= b < 4 }").unwrap();
        assert!(m.is_equal(&expected).unwrap());
        assert!(m.is_single_valued().unwrap());
        assert_eq!(m.to_pw_multi_aff().unwrap().n_piece().unwrap(), 1);
        assert!(m.range().unwrap().is_equal(&ctx.set("{ T[a, b] : 0 <= a < 3 and 0 <= b < 4 }").unwrap()).unwrap());
    }

    #[test]
    fn points_and_pairs_are_enumerated_in_lexicographic_order() {
        let ctx = Ctx::new();
        let s = ctx.set("{ S[i, j] : 0 <= i < 2 and i <= j < 3 and j % 2 = 0 }").unwrap();
        assert_eq!(s.points(10).unwrap(), [[0, 0], [0, 2], [1, 2]]);
        assert!(s.points(2).is_err(), "over the limit");
        assert!(ctx.set("[N] -> { S[i] : 0 <= i < N }").unwrap().points(10).is_err());
        assert!(ctx.set("{ S[i] : i >= 0 }").unwrap().points(10).is_err(), "unbounded");
        assert_eq!(ctx.set("{ S[] }").unwrap().points(10).unwrap(), [Vec::<i64>::new()]);
        let m = ctx.map("{ A[i] -> B[i + 1, 2i] : 0 <= i < 2 }").unwrap();
        assert_eq!(m.pairs(10).unwrap(), [(vec![0], vec![1, 0]), (vec![1], vec![2, 2])]);
    }

    #[test]
    fn bounds_images_and_deltas() {
        let ctx = Ctx::new();
        let s = ctx.set("[N] -> { S[i, j] : 0 <= i < N and 2 <= j < 5 }").unwrap();
        assert_eq!((s.dim_min(0).unwrap(), s.dim_max(0).unwrap()), (Some(0), None), "N is unbounded");
        assert_eq!((s.dim_min(1).unwrap(), s.dim_max(1).unwrap()), (Some(2), Some(4)));
        let shift = ctx.map("[N] -> { S[i, j] -> T[i, j + 1] }").unwrap();
        assert_eq!(s.apply(&shift).unwrap().dim_max(1).unwrap(), Some(5));
        let later = ctx.map("{ S[i, j] -> S[i, j'] : 0 <= i < 4 and 0 <= j < j' < 3 }").unwrap();
        let d = later.deltas().unwrap();
        assert_eq!((d.dim_min(0).unwrap(), d.dim_max(0).unwrap(), d.dim_min(1).unwrap()), (Some(0), Some(0), Some(1)));
        assert!(!later.is_injective().unwrap() && shift.is_injective().unwrap());
        assert_eq!(ctx.set("{ S[i] : 1 = 0 }").unwrap().dim_max(0).unwrap(), None);
    }
}
