//! NumPy `.npy` files: read format versions 1.0, 2.0 and 3.0, write 1.0 (2.0
//! when a header does not fit in 64 KiB), as NumPy's `numpy.lib.format`
//! documents them.
//!
//! A file is the magic `\x93NUMPY`, a major and a minor version byte, the header
//! length (u16 little-endian in 1.0, u32 in 2.0 and 3.0), then a Python dict
//! literal `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded
//! with spaces and a `\n` so that the data starts at a multiple of 64 bytes,
//! then the elements.
//!
//! Element types read: `f2`, `f4`, `i4` and `b1` as f16, f32, i32 and bool;
//! `f8` and `i8` converted to f32 (nearest) and i32 (an error when a value is
//! out of range); either byte order. Fortran-order data is transposed to C
//! order. Written: f16 `<f2`, f32 `<f4`, i32 `<i4`, bool `|b1`, and bf16 as
//! f32 `<f4` since NumPy has no bf16 (`DESIGN.md`, `tgc run`).
//!
//! A header is read as NumPy's `format.read_array_header` reads it: at most
//! [`MAX_HEADER_BYTES`] long, a dict of exactly the keys `descr`,
//! `fortran_order` and `shape` (a key repeated is refused too, where NumPy
//! would keep the last), `fortran_order` a bool and `shape` a tuple of
//! integers (`(2, 3)`, `(6,)` or `()`; `(6)` is the integer 6 and `[6]` a
//! list, both refused). The file must then hold exactly the data the header
//! declares; [`open_npy`] checks all this before any data is read.
//!
//! Every malformed input is an [`Error::Format`] naming what is wrong.

use std::fs::File;
use std::io::{Read, Seek};
use std::path::Path;

use crate::input::{Pending, Source, Stored};
use crate::tensor::num_elements;
use crate::{DType, Error, HostTensor, Result};

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Data in a `.npy` file starts at a multiple of this many bytes.
const ALIGN: usize = 64;

/// NumPy leaves room in the header for the growing axis to reach this many
/// digits (`GROWTH_AXIS_MAX_DIGITS` in `numpy/lib/format.py`).
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// Deepest nesting accepted in a header dict; guards the recursive parser.
const MAX_DEPTH: usize = 16;

/// The longest header dict read, in bytes: NumPy's own bound
/// (`_MAX_HEADER_SIZE` in `numpy/lib/format.py`, which `np.load` passes over
/// only with `allow_pickle=True`). The header of a rank-16 tensor takes a
/// few hundred.
pub const MAX_HEADER_BYTES: u64 = 10_000;

/// The keys of a header dict, each exactly once.
const KEYS: [&str; 3] = ["descr", "fortran_order", "shape"];

/// Reads the `.npy` file at `path`, keeping its dtype (f64 and i64 data come
/// back as f32 and i32, see the module doc): [`open_npy`], then
/// [`Pending::read`].
///
/// Errors: those of [`open_npy`] and [`Pending::read`].
pub fn read_npy(path: impl AsRef<Path>) -> Result<HostTensor> {
    open_npy(path.as_ref())?.read()
}

/// Opens the `.npy` file at `path` and reads its header: the tensor's dtype
/// and shape, its data not yet read.
///
/// Errors: [`Error::Io`] when the file cannot be opened or is not a regular
/// file; [`Error::Format`] (naming the path) when its header is not that of
/// a supported `.npy` array or the file does not hold exactly the data the
/// header declares.
pub fn open_npy(path: &Path) -> Result<Pending<File>> {
    pending(Source::open(path)?)
}

/// Parses the bytes of a whole `.npy` file, as [`read_npy`] does.
///
/// Errors: [`Error::Format`] for a bad magic, an unsupported version or dtype,
/// a malformed header dict, a negative or overflowing shape, truncated or
/// trailing data, or an i64 value outside i32.
pub fn read_npy_bytes(bytes: &[u8]) -> Result<HostTensor> {
    pending(Source::bytes(bytes))?.read()
}

/// The tensor `source` holds, after checking its header and its length.
fn pending<R: Read + Seek>(mut source: Source<R>) -> Result<Pending<R>> {
    match layout(&mut source) {
        Ok((header, offset, bytes)) => Ok(Pending {
            source,
            offset,
            bytes,
            stored: header.descr.stored,
            big_endian: header.descr.big_endian,
            fortran_order: header.fortran_order,
            shape: header.shape,
            name: None,
        }),
        Err(e) => Err(source.in_context(e)),
    }
}

/// The header of the `.npy` file in `source`, where its data starts and how
/// many bytes it takes, once the file is known to end right after them.
fn layout<R: Read + Seek>(source: &mut Source<R>) -> Result<(Header, u64, u64)> {
    if source.len() < 8 || source.read_at(0, 6, "magic")? != MAGIC {
        return Err(Error::Format("not a .npy file (missing the \\x93NUMPY magic)".into()));
    }
    let version = source.read_at(6, 2, ".npy version")?;
    let (major, minor) = (version[0], version[1]);
    let len_bytes = match major {
        1 => 2,
        2 | 3 => 4,
        _ => {
            return Err(Error::Format(format!(
                "unsupported .npy format version {major}.{minor} (supported: 1.0, 2.0, 3.0)"
            )))
        }
    };
    let len_field = source.read_at(8, len_bytes, ".npy header")?;
    let len = len_field.iter().rev().fold(0u64, |acc, &b| acc << 8 | b as u64);
    if len > MAX_HEADER_BYTES {
        return Err(Error::Format(format!(
            "a .npy header of {len} bytes is longer than the {MAX_HEADER_BYTES} read (NumPy's bound too)"
        )));
    }
    let start = 8 + len_bytes;
    let text = source.read_at(start, len, ".npy header")?;
    if major == 3 && std::str::from_utf8(&text).is_err() {
        return Err(Error::Format("a version 3.0 .npy header must be UTF-8".into()));
    }
    let header = parse_header(&text)?;
    let too_big = || Error::Format(format!("shape {:?} is too large", header.shape));
    let n = num_elements(&header.shape).ok_or_else(too_big)?;
    let need =
        u64::try_from(n).ok().and_then(|n| n.checked_mul(header.descr.stored.size() as u64)).ok_or_else(too_big)?;
    let offset = start + len;
    let have = source.len() - offset;
    if have < need {
        return Err(Error::Format(format!(
            "truncated data: shape {:?} of `{}` needs {need} bytes, the file has {have}",
            header.shape, header.descr.text
        )));
    }
    if have > need {
        return Err(Error::Format(format!(
            "{} unexpected bytes after the data of shape {:?}",
            have - need,
            header.shape
        )));
    }
    Ok((header, offset, need))
}

/// Writes `tensor` to `path` as a version 1.0 `.npy` file (bf16 as f32),
/// whole or not at all ([`crate::files::write_atomic`]): a reader never sees
/// part of it, and a writer killed part way leaves an earlier file as it was.
///
/// Errors: [`Error::Io`] when the file cannot be written.
pub fn write_npy(path: impl AsRef<Path>, tensor: &HostTensor) -> Result<()> {
    let path = path.as_ref();
    crate::files::write_atomic(path, &write_npy_bytes(tensor)).map_err(|e| Error::io("write", path, e))
}

/// The bytes of a `.npy` file holding `tensor`, identical to what NumPy's
/// `np.save` writes for the same array (bf16 as f32).
pub fn write_npy_bytes(tensor: &HostTensor) -> Vec<u8> {
    let (descr, data) = match tensor.dtype() {
        DType::F16 => ("<f2", tensor.bytes().to_vec()),
        DType::BF16 => ("<f4", tensor.convert(DType::F32).bytes().to_vec()),
        DType::F32 => ("<f4", tensor.bytes().to_vec()),
        DType::I32 => ("<i4", tensor.bytes().to_vec()),
        DType::Bool => ("|b1", tensor.bytes().to_vec()),
    };
    let mut out = header_bytes(descr, tensor.shape());
    out.extend_from_slice(&data);
    out
}

/// Magic, version, length and padded header dict, as NumPy's `_wrap_header`.
fn header_bytes(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_repr = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_repr}, }}");
    if let Some(first) = dims.first() {
        dict.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(first.len())));
    }
    let text_len = dict.len() + 1; // the closing '\n'
    let v1_pad = ALIGN - (MAGIC.len() + 2 + 2 + text_len) % ALIGN;
    let mut out = MAGIC.to_vec();
    let pad = match u16::try_from(text_len + v1_pad) {
        Ok(len) => {
            out.extend_from_slice(&[1, 0]);
            out.extend_from_slice(&len.to_le_bytes());
            v1_pad
        }
        Err(_) => {
            let pad = ALIGN - (MAGIC.len() + 2 + 4 + text_len) % ALIGN;
            out.extend_from_slice(&[2, 0]);
            out.extend_from_slice(&((text_len + pad) as u32).to_le_bytes());
            pad
        }
    };
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + pad, b' ');
    out.push(b'\n');
    out
}

/// The three keys of a `.npy` header dict.
struct Header {
    descr: Descr,
    fortran_order: bool,
    shape: Vec<usize>,
}

fn parse_header(text: &[u8]) -> Result<Header> {
    let bad = |msg: String| Error::Format(format!("malformed .npy header: {msg}"));
    let mut parser = Parser { text, pos: 0 };
    let value = parser.value(0).map_err(bad)?;
    parser.skip_space();
    if parser.pos != text.len() {
        return Err(bad(format!("unexpected text after the dict at byte {}", parser.pos)));
    }
    let Py::Dict(entries) = value else {
        return Err(bad("the header is not a dict".into()));
    };
    let mut values: [Option<Py>; 3] = [None, None, None];
    for (at, key, value) in entries {
        let Py::Str(key) = key else {
            return Err(bad(format!("the key at byte {at} is not a string")));
        };
        let Some(k) = KEYS.iter().position(|&name| name == key) else {
            return Err(bad(format!(
                "unknown key '{key}' at byte {at} (the keys are 'descr', 'fortran_order' and 'shape')"
            )));
        };
        if values[k].replace(value).is_some() {
            return Err(bad(format!("key '{key}' given again at byte {at}")));
        }
    }
    let [descr, fortran_order, shape] = values;
    let missing = |k: usize| bad(format!("missing key '{}'", KEYS[k]));
    let descr = match descr.ok_or_else(|| missing(0))? {
        Py::Str(s) => Descr::parse(&s)?,
        _ => return Err(unsupported_descr("a structured dtype")),
    };
    let fortran_order = match fortran_order.ok_or_else(|| missing(1))? {
        Py::Bool(b) => b,
        _ => return Err(bad("'fortran_order' is not True or False".into())),
    };
    let dims = match shape.ok_or_else(|| missing(2))? {
        Py::Tuple(dims) => dims,
        Py::List => return Err(bad("'shape' is a list, not a tuple".into())),
        _ => return Err(bad("'shape' is not a tuple".into())),
    };
    let shape = dims
        .iter()
        .map(|d| match d {
            Py::Int(i) => usize::try_from(*i).ok(),
            _ => None,
        })
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| bad("'shape' is not a tuple of non-negative integers".into()))?;
    Ok(Header { descr, fortran_order, shape })
}

/// A supported `descr`: the file's element type and byte order.
struct Descr {
    text: String,
    stored: Stored,
    big_endian: bool,
}

fn unsupported_descr(what: &str) -> Error {
    Error::Format(format!(
        "unsupported dtype {what}; supported: f16 '<f2', f32 '<f4', i32 '<i4', bool '|b1', \
         and f64 '<f8' or i64 '<i8' (converted to f32 or i32), in either byte order"
    ))
}

impl Descr {
    fn parse(text: &str) -> Result<Descr> {
        let unsupported = || unsupported_descr(&format!("'{text}'"));
        let mut chars = text.chars();
        let order = chars.next().ok_or_else(unsupported)?;
        let stored = match chars.as_str() {
            "f2" => Stored::F16,
            "f4" => Stored::F32,
            "f8" => Stored::F64,
            "i4" => Stored::I32,
            "i8" => Stored::I64,
            "b1" => Stored::Bool,
            _ => return Err(unsupported()),
        };
        let big_endian = match order {
            '<' => false,
            '>' => true,
            '=' => cfg!(target_endian = "big"),
            '|' if stored.size() == 1 => false,
            _ => return Err(unsupported()),
        };
        Ok(Descr { text: text.to_string(), stored, big_endian })
    }
}

/// The Python literals a `.npy` header uses.
enum Py {
    Str(String),
    Int(i64),
    Bool(bool),
    None,
    Tuple(Vec<Py>),
    /// A list: never a valid value of a key here, so its items are dropped.
    List,
    /// Each entry with the byte offset of its key.
    Dict(Vec<(usize, Py, Py)>),
}

/// A recursive-descent parser for Python literals, over the header bytes.
struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.text.get(self.pos).is_some_and(|c| c.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    /// Skips spaces and returns the next byte without consuming it.
    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        match self.peek() {
            Some(found) if found == c => {
                self.pos += 1;
                Ok(())
            }
            Some(found) => Err(format!("expected '{}' at byte {}, found '{}'", c as char, self.pos, found as char)),
            None => Err(format!("expected '{}', found the end of the header", c as char)),
        }
    }

    /// The items up to `close`, comma-separated (a trailing comma allowed),
    /// and whether there was a comma.
    fn items(&mut self, close: u8, depth: usize) -> std::result::Result<(Vec<Py>, bool), String> {
        let mut items = Vec::new();
        let mut comma = false;
        while self.peek() != Some(close) {
            items.push(self.value(depth + 1)?);
            if self.peek() != Some(close) {
                self.expect(b',')?;
                comma = true;
            }
        }
        self.pos += 1;
        Ok((items, comma))
    }

    fn value(&mut self, depth: usize) -> std::result::Result<Py, String> {
        if depth > MAX_DEPTH {
            return Err(format!("nested deeper than {MAX_DEPTH} levels"));
        }
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                let mut entries = Vec::new();
                while self.peek() != Some(b'}') {
                    let at = self.pos;
                    let key = self.value(depth + 1)?;
                    self.expect(b':')?;
                    entries.push((at, key, self.value(depth + 1)?));
                    if self.peek() != Some(b'}') {
                        self.expect(b',')?;
                    }
                }
                self.pos += 1;
                Ok(Py::Dict(entries))
            }
            Some(b'(') => {
                self.pos += 1;
                // As in Python, `(x)` is `x`; `()`, `(x,)` and `(x, y)` are tuples.
                let (mut items, comma) = self.items(b')', depth)?;
                match items.len() {
                    1 if !comma => Ok(items.remove(0)),
                    _ => Ok(Py::Tuple(items)),
                }
            }
            Some(b'[') => {
                self.pos += 1;
                self.items(b']', depth)?;
                Ok(Py::List)
            }
            Some(quote @ (b'\'' | b'"')) => {
                self.pos += 1;
                let start = self.pos;
                while self.text.get(self.pos).is_some_and(|&c| c != quote && c != b'\\') {
                    self.pos += 1;
                }
                if self.text.get(self.pos) != Some(&quote) {
                    return Err(format!("unterminated or escaped string at byte {start}"));
                }
                self.pos += 1;
                Ok(Py::Str(String::from_utf8_lossy(&self.text[start..self.pos - 1]).into_owned()))
            }
            Some(c) if c.is_ascii_digit() || c == b'-' => {
                let start = self.pos;
                self.pos += 1;
                while self.text.get(self.pos).is_some_and(u8::is_ascii_digit) {
                    self.pos += 1;
                }
                let digits = std::str::from_utf8(&self.text[start..self.pos]).unwrap_or("");
                let n = digits.parse().map_err(|_| format!("bad integer `{digits}` at byte {start}"))?;
                // Python 2 wrote long integers with an `L` suffix.
                if matches!(self.text.get(self.pos), Some(b'L' | b'l')) {
                    self.pos += 1;
                }
                Ok(Py::Int(n))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while self.text.get(self.pos).is_some_and(u8::is_ascii_alphanumeric) {
                    self.pos += 1;
                }
                match &self.text[start..self.pos] {
                    b"True" => Ok(Py::Bool(true)),
                    b"False" => Ok(Py::Bool(false)),
                    b"None" => Ok(Py::None),
                    word => Err(format!("unexpected name `{}` at byte {start}", String::from_utf8_lossy(word))),
                }
            }
            Some(c) => Err(format!("unexpected '{}' at byte {}", c as char, self.pos)),
            None => Err("unexpected end of the header".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::TempDir;

    /// The bytes NumPy 2.4 writes for `np.arange(6, dtype=np.float32).reshape(2, 3)`.
    fn numpy_arange_2x3() -> Vec<u8> {
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        let mut b = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        b.extend_from_slice(dict.as_bytes());
        b.resize(127, b' ');
        b.push(b'\n');
        for i in 0..6 {
            b.extend_from_slice(&(i as f32).to_le_bytes());
        }
        b
    }

    /// A `.npy` file with `dict` as its header and `data` after it.
    fn npy_with(major: u8, dict: &str, data: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[major, 0]);
        if major == 1 {
            b.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        } else {
            b.extend_from_slice(&(dict.len() as u32).to_le_bytes());
        }
        b.extend_from_slice(dict.as_bytes());
        b.extend_from_slice(data);
        b
    }

    fn format_error(bytes: &[u8]) -> String {
        match read_npy_bytes(bytes) {
            Err(Error::Format(msg)) => msg,
            other => panic!("expected a format error, got {other:?}"),
        }
    }

    #[test]
    fn reads_what_numpy_writes() {
        let t = read_npy_bytes(&numpy_arange_2x3()).unwrap();
        assert_eq!((t.dtype(), t.shape()), (DType::F32, &[2, 3][..]));
        assert_eq!(t.to_f32_vec(), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    }

    #[test]
    fn writes_what_numpy_writes() {
        let t = HostTensor::from_f32(DType::F32, &[2, 3], &[0., 1., 2., 3., 4., 5.]).unwrap();
        assert_eq!(write_npy_bytes(&t), numpy_arange_2x3());
        // np.save of np.array(3.5, dtype=np.float16): no growth padding for a scalar.
        let t = HostTensor::from_f32(DType::F16, &[], &[3.5]).unwrap();
        let mut want = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        want.extend_from_slice(b"{'descr': '<f2', 'fortran_order': False, 'shape': (), }");
        want.resize(127, b' ');
        want.extend_from_slice(b"\n\x00\x43");
        assert_eq!(write_npy_bytes(&t), want);
    }

    #[test]
    fn round_trips_every_dtype() {
        let values = [0.0, -1.5, 2.25, 7.0, 1e-3, 0.0];
        for dtype in DType::ALL {
            for shape in [&[6][..], &[2, 3], &[3, 1, 2]] {
                let t = HostTensor::from_f64(dtype, shape, &values).unwrap();
                let bytes = write_npy_bytes(&t);
                assert_eq!(bytes.iter().position(|&b| b == b'\n').unwrap() % ALIGN, ALIGN - 1);
                let back = read_npy_bytes(&bytes).unwrap();
                // bf16 comes back as the f32 it was written as, same values.
                let want_dtype = if dtype == DType::BF16 { DType::F32 } else { dtype };
                assert_eq!(back.dtype(), want_dtype);
                assert_eq!(back.shape(), shape);
                assert_eq!(back.to_f64_vec(), t.to_f64_vec(), "{dtype} {shape:?}");
            }
        }
        let empty = HostTensor::zeros(DType::I32, &[0, 4]).unwrap();
        assert_eq!(read_npy_bytes(&write_npy_bytes(&empty)).unwrap(), empty);
        // A header over 64 KiB needs format version 2.0, and is longer than
        // the reader (and NumPy's) reads.
        let high_rank = HostTensor::zeros(DType::F16, &[1; 30_000]).unwrap();
        let bytes = write_npy_bytes(&high_rank);
        assert_eq!((bytes[6], bytes.iter().position(|&b| b == b'\n').unwrap() % ALIGN), (2, ALIGN - 1));
        assert!(format_error(&bytes).contains("is longer than the 10000 read"));
    }

    #[test]
    fn round_trips_through_a_file() {
        let dir = TempDir::new("npy");
        let path = dir.path().join("x.npy");
        let t = HostTensor::from_f32(DType::Bool, &[2], &[1.0, 0.0]).unwrap();
        write_npy(&path, &t).unwrap();
        assert_eq!(read_npy(&path).unwrap(), t);
        let missing = dir.path().join("missing.npy");
        let e = read_npy(&missing).unwrap_err();
        assert!(matches!(&e, Error::Io(m) if m.contains("missing.npy")), "{e}");
        std::fs::write(&path, b"garbage").unwrap();
        let e = read_npy(&path).unwrap_err();
        assert!(matches!(&e, Error::Format(m) if m.contains("x.npy")), "{e}");
    }

    #[test]
    fn reads_versions_2_and_3_and_other_dtypes() {
        let dict = "{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}\n";
        let t = read_npy_bytes(&npy_with(2, dict, &[0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0])).unwrap();
        assert_eq!((t.dtype(), t.to_f32_vec()), (DType::F32, vec![1.0, -2.0]));

        let dict = "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (1,)}";
        let t = read_npy_bytes(&npy_with(3, dict, &0.1f64.to_le_bytes())).unwrap();
        assert_eq!((t.dtype(), t.to_f32_vec()), (DType::F32, vec![0.1f32]));

        let dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (2L,), }";
        let data: Vec<u8> = [-7i64, 1 << 30].iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = read_npy_bytes(&npy_with(1, dict, &data)).unwrap();
        assert_eq!((t.dtype(), t.to_f64_vec()), (DType::I32, vec![-7.0, (1 << 30) as f64]));

        let dict = "{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }";
        let msg = format_error(&npy_with(1, dict, &(1i64 << 40).to_be_bytes()));
        assert!(msg.contains("does not fit in i32"), "{msg}");

        let dict = "{'descr': '>f2', 'fortran_order': False, 'shape': (), }";
        let t = read_npy_bytes(&npy_with(1, dict, &[0x3c, 0x00])).unwrap();
        assert_eq!((t.dtype(), t.to_f32_vec()), (DType::F16, vec![1.0]));
    }

    #[test]
    fn fortran_order_is_transposed_to_c_order() {
        // np.save of np.arange(6, dtype=np.int32).reshape(2, 3).T.copy(order='F').
        let dict = "{'descr': '<i4', 'fortran_order': True, 'shape': (3, 2), }";
        let data: Vec<u8> = (0..6i32).flat_map(|v| v.to_le_bytes()).collect();
        let t = read_npy_bytes(&npy_with(1, dict, &data)).unwrap();
        assert_eq!(t.shape(), [3, 2]);
        assert_eq!(t.to_f64_vec(), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    }

    /// NumPy's `read_array_header`: exactly the three keys, `shape` a tuple
    /// (`(4)` is the integer 4 in Python). A repeated `descr` was read with
    /// its first value and the data reinterpreted.
    #[test]
    fn header_keys_and_shape_are_numpys() {
        let dict = |descr: &str, shape: &str| format!("{{'descr': {descr}, 'fortran_order': False, 'shape': {shape}}}");
        for shape in ["(4,)", "( 4 , )", "(2, 2)", "(1, 4, 1,)"] {
            let t = read_npy_bytes(&npy_with(1, &dict("'<f4'", shape), &[0; 16])).unwrap();
            assert_eq!(t.len(), 4, "{shape}");
        }
        assert!(read_npy_bytes(&npy_with(1, &dict("'<f4'", "()"), &[0; 4])).unwrap().shape().is_empty());
        let cases = [
            (dict("'<f4', 'descr': '<i4'", "(4,)"), "key 'descr' given again at byte 17"),
            (dict("'<f4'", "(4,), 'shape': (2, 2)"), "key 'shape' given again"),
            (dict("'<f4'", "(4,), 'extra': 0"), "unknown key 'extra' at byte"),
            (dict("'<f4'", "(4,), 'Shape': (4,)"), "unknown key 'Shape'"),
            (dict("'<f4'", "(4,), 7: 0"), "the key at byte 56 is not a string"),
            (dict("'<f4'", "[4]"), "'shape' is a list, not a tuple"),
            (dict("'<f4'", "(4)"), "'shape' is not a tuple"),
            (dict("'<f4'", "4"), "'shape' is not a tuple"),
            (dict("'<f4'", "((4,),)"), "not a tuple of non-negative integers"),
        ];
        for (dict, want) in cases {
            let msg = format_error(&npy_with(1, &dict, &[0; 16]));
            assert!(msg.contains(want), "{dict}: `{msg}` should mention `{want}`");
        }
    }

    /// [`MAX_HEADER_BYTES`] holds at its value, before the header is read.
    #[test]
    fn the_header_limit_holds_at_its_value() {
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}";
        let padded = |len: usize| format!("{dict:<0$}", len - 1) + "\n";
        let max = MAX_HEADER_BYTES as usize;
        assert_eq!(read_npy_bytes(&npy_with(2, &padded(max), &[0; 4])).unwrap().len(), 1);
        let msg = format_error(&npy_with(2, &padded(max + 1), &[0; 4]));
        assert!(msg.contains("a .npy header of 10001 bytes is longer than the 10000 read"), "{msg}");
        // A length field of 4 GiB in a file of 16 bytes: refused, not allocated.
        let mut huge = npy_with(2, "", &[0; 4]);
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(format_error(&huge).contains("4294967295 bytes is longer than"));
    }

    /// [`open_npy`] reads the header only: the tensor's size is known before
    /// its data is read.
    #[test]
    fn opening_reads_the_header_only() {
        let dir = TempDir::new("npy-open");
        let path = dir.path().join("big.npy");
        let t = HostTensor::zeros(DType::F32, &[1 << 20]).unwrap();
        write_npy(&path, &t).unwrap();
        let pending = open_npy(&path).unwrap();
        assert_eq!((pending.dtype(), pending.shape(), pending.data_bytes()), (DType::F32, &[1 << 20][..], 4 << 20));
        // The file shrinks after the header was checked: the read says so.
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(1000).unwrap();
        let e = pending.read().unwrap_err();
        assert!(matches!(&e, Error::Io(m) if m.contains("big.npy") && m.contains("end of file")), "{e}");
    }

    #[test]
    fn malformed_files_are_format_errors() {
        let good = numpy_arange_2x3();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"PK\x03\x04 not npy".to_vec(), "magic"),
            (good[..9].to_vec(), "truncated .npy header"),
            (good[..100].to_vec(), "truncated .npy header"),
            (good[..good.len() - 1].to_vec(), "truncated data"),
            ([&good[..], &[0]].concat(), "unexpected bytes"),
            (npy_with(4, "{}", &[]), "version 4.0"),
            (npy_with(1, "{'descr': '<f4', 'shape': (1,)}", &[0; 4]), "missing key 'fortran_order'"),
            (npy_with(1, "{'descr': '<u2', 'fortran_order': False, 'shape': ()}", &[0; 2]), "'<u2'"),
            (npy_with(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': ()}", &[]), "structured"),
            (npy_with(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", &[]), "non-negative"),
            (npy_with(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", &[0; 4]), "fortran_order"),
            (npy_with(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", &[0; 4]), "end of the header"),
            (npy_with(1, "{'descr': '<f4' 'fortran_order': False}", &[]), "expected ','"),
            (npy_with(1, "['descr']", &[]), "not a dict"),
            (npy_with(1, "{'descr': '<f4', 'fortran_order': Nope, 'shape': ()}", &[]), "`Nope`"),
            (npy_with(1, "{'descr': '<f4} ", &[]), "unterminated"),
            (
                npy_with(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", &[]),
                "bad integer",
            ),
            (
                npy_with(
                    1,
                    "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}",
                    &[],
                ),
                "too large",
            ),
            (npy_with(1, &format!("{}{}", "(".repeat(100), ")".repeat(100)), &[]), "nested"),
            (npy_with(1, "{} x", &[]), "after the dict"),
            (npy_with(3, "{'descr': '', }", &[]), "unsupported dtype ''"),
        ];
        for (bytes, want) in cases {
            let msg = format_error(&bytes);
            assert!(msg.contains(want), "`{msg}` should mention `{want}`");
        }
        let mut bad_utf8 = npy_with(3, "{'descr': 'x'}", &[]);
        bad_utf8[13] = 0xff;
        assert!(format_error(&bad_utf8).contains("UTF-8"));
    }
}
