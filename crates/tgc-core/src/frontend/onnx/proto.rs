//! Reading ONNX's protobuf messages: the model, its tensors (inline and
//! external data) and node attributes, with every size checked before
//! anything is allocated.
//!
//! Element types (`TensorProto.DataType`, ONNX `IR.md`): `FLOAT`,
//! `FLOAT16`, `BFLOAT16`, `INT32` and `BOOL` are tgc's dtypes; `INT64` is
//! narrowed to `i32`, each value checked ([`narrow`]); the other integer
//! types and `DOUBLE` are read for compile-time values only (shape
//! arithmetic, small constants), where every value is exact.

use std::path::{Component, Path};

use onnx_protobuf::{AttributeProto, GraphProto, Message, ModelProto, TensorProto};

use crate::diag;
use crate::diag::DResult;
use crate::DType;

/// Bytes of one `.onnx` file that [`decode_model`] takes (2 GiB, protobuf's
/// own limit on a message; larger models keep their weights as external
/// data).
pub const MAX_MODEL_BYTES: u64 = (1 << 31) - 1;

/// Elements of one tensor read from a model (2^31: a 2 GiB f8 tensor, the
/// most protobuf can hold inline, and more than any tgc tensor needs).
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 31;

/// `TensorProto.DataType` codes (ONNX `onnx.proto`).
pub mod code {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const UINT16: i32 = 4;
    pub const INT16: i32 = 5;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const STRING: i32 = 8;
    pub const BOOL: i32 = 9;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;
    pub const UINT32: i32 = 12;
    pub const UINT64: i32 = 13;
    pub const BFLOAT16: i32 = 16;
}

/// The name ONNX gives element type `c`, for messages.
pub fn type_name(c: i32) -> String {
    let name = match c {
        code::FLOAT => "float",
        code::UINT8 => "uint8",
        code::INT8 => "int8",
        code::UINT16 => "uint16",
        code::INT16 => "int16",
        code::INT32 => "int32",
        code::INT64 => "int64",
        code::STRING => "string",
        code::BOOL => "bool",
        code::FLOAT16 => "float16",
        code::DOUBLE => "double",
        code::UINT32 => "uint32",
        code::UINT64 => "uint64",
        14 => "complex64",
        15 => "complex128",
        code::BFLOAT16 => "bfloat16",
        17..=20 => "float8",
        21 | 22 => "int4",
        23 => "float4",
        _ => return format!("element type {c}"),
    };
    name.to_string()
}

/// The tgc dtype a run-time tensor of element type `c` has: `INT64` is
/// narrowed to `i32`; `None` for a type tgc does not compute in.
pub fn runtime_dtype(c: i32) -> Option<DType> {
    match c {
        code::FLOAT => Some(DType::F32),
        code::FLOAT16 => Some(DType::F16),
        code::BFLOAT16 => Some(DType::BF16),
        code::INT32 | code::INT64 => Some(DType::I32),
        code::BOOL => Some(DType::Bool),
        _ => None,
    }
}

/// The element type of a run-time tensor of `dtype` (`i32` as `INT32`):
/// the inverse of [`runtime_dtype`].
pub fn code_of(dtype: DType) -> i32 {
    match dtype {
        DType::F32 => code::FLOAT,
        DType::F16 => code::FLOAT16,
        DType::BF16 => code::BFLOAT16,
        DType::I32 => code::INT32,
        DType::Bool => code::BOOL,
    }
}

/// Whether element type `c` is a floating-point type tgc reads.
pub fn is_float(c: i32) -> bool {
    matches!(c, code::FLOAT | code::FLOAT16 | code::BFLOAT16 | code::DOUBLE)
}

/// Whether element type `c` is an integer type tgc reads exactly.
pub fn is_int(c: i32) -> bool {
    matches!(
        c,
        code::UINT8 | code::INT8 | code::UINT16 | code::INT16 | code::INT32 | code::INT64 | code::UINT32 | code::UINT64
    )
}

/// `v` as an `i32`, or an error naming `what` (a tensor, an attribute):
/// tgc computes integers in 32 bits, and a value that does not fit is
/// refused, never wrapped.
pub fn narrow(v: i64, what: &str) -> DResult<i32> {
    i32::try_from(v).map_err(|_| {
        diag!(Unsupported, "{what} holds {v}, outside the 32-bit integers tgc computes in ([-2^31, 2^31 - 1])")
    })
}

/// Decodes a `ModelProto`.
///
/// Errors: `SyntaxError` for bytes that are not a model (truncated,
/// corrupt, too deeply nested: protobuf's recursion limit of 100).
pub fn decode_model(bytes: &[u8]) -> DResult<ModelProto> {
    ModelProto::parse_from_bytes(bytes)
        .map_err(|e| diag!(SyntaxError, "the file is not an ONNX model (protobuf ModelProto): {e}"))
}

/// Decodes a serialized `TensorProto` (the `.pb` files of ONNX's test
/// data).
///
/// Errors: `SyntaxError` for bytes that are not one.
pub fn decode_tensor(bytes: &[u8]) -> DResult<TensorProto> {
    TensorProto::parse_from_bytes(bytes)
        .map_err(|e| diag!(SyntaxError, "not an ONNX tensor (protobuf TensorProto): {e}"))
}

/// A tensor's element type, shape and values as read from a
/// `TensorProto`: floats as f64 (exact for every float type read), integers
/// and bools as i64.
#[derive(Clone, Debug, PartialEq)]
pub struct Values {
    pub code: i32,
    pub shape: Vec<usize>,
    pub data: Data,
}

/// The values of a [`Values`].
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    Float(Vec<f64>),
    Int(Vec<i64>),
}

impl Data {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Data::Float(v) => v.len(),
            Data::Int(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The shape of `t` and its element count, checked against
/// [`MAX_TENSOR_ELEMENTS`].
pub fn tensor_shape(t: &TensorProto) -> DResult<(Vec<usize>, usize)> {
    let mut n: u64 = 1;
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        if d < 0 {
            return Err(diag!(AxisSizeMismatch, "tensor `{}` has a negative dimension {d}", t.name));
        }
        n = n.saturating_mul(d as u64);
        shape.push(d as usize);
    }
    if n > MAX_TENSOR_ELEMENTS {
        return Err(diag!(
            ResourceExceeded,
            "tensor `{}` has {n} elements, more than the {MAX_TENSOR_ELEMENTS} a model's tensor may have",
            t.name
        ));
    }
    Ok((shape, n as usize))
}

/// Bytes of one element of type `c` in `raw_data`.
fn elem_bytes(c: i32) -> Option<usize> {
    match c {
        code::UINT8 | code::INT8 | code::BOOL => Some(1),
        code::UINT16 | code::INT16 | code::FLOAT16 | code::BFLOAT16 => Some(2),
        code::FLOAT | code::INT32 | code::UINT32 => Some(4),
        code::INT64 | code::UINT64 | code::DOUBLE => Some(8),
        _ => None,
    }
}

/// The raw little-endian bytes of `t`: its `raw_data`, or the bytes of its
/// external file (see [`external_bytes`]); `None` when the values are in
/// the typed fields.
pub fn raw_bytes(t: &TensorProto, dir: Option<&Path>) -> DResult<Option<Vec<u8>>> {
    if t.data_location.value() == 1 {
        return external_bytes(t, dir).map(Some);
    }
    if !t.raw_data.is_empty() {
        return Ok(Some(t.raw_data.clone()));
    }
    Ok(None)
}

/// The values of `t` (see [`Values`]).
///
/// Errors: `Unsupported` for element types tgc does not read (strings,
/// complex, 8- and 4-bit floats); `AxisSizeMismatch` when the data holds
/// a different number of elements than the shape; those of [`raw_bytes`].
pub fn read_values(t: &TensorProto, dir: Option<&Path>) -> DResult<Values> {
    let c = t.data_type;
    let (shape, n) = tensor_shape(t)?;
    let size = elem_bytes(c).ok_or_else(|| {
        diag!(Unsupported, "tensor `{}` is of type {}, which tgc does not read", t.name, type_name(c))
    })?;
    let mismatch = |got: usize| {
        diag!(AxisSizeMismatch, "tensor `{}` of shape {shape:?} holds {got} elements instead of {n}", t.name)
    };
    let data = if let Some(raw) = raw_bytes(t, dir)? {
        if raw.len() != n * size {
            return Err(diag!(
                AxisSizeMismatch,
                "tensor `{}` of shape {shape:?} and type {} needs {} bytes but holds {}",
                t.name,
                type_name(c),
                n * size,
                raw.len()
            ));
        }
        decode_raw(c, &raw)
    } else {
        let data = match c {
            code::FLOAT => Data::Float(t.float_data.iter().map(|&v| v as f64).collect()),
            code::DOUBLE => Data::Float(t.double_data.clone()),
            code::FLOAT16 => {
                Data::Float(t.int32_data.iter().map(|&b| half::f16::from_bits(b as u16).to_f64()).collect())
            }
            code::BFLOAT16 => {
                Data::Float(t.int32_data.iter().map(|&b| half::bf16::from_bits(b as u16).to_f64()).collect())
            }
            code::INT64 => Data::Int(t.int64_data.clone()),
            code::UINT32 | code::UINT64 => Data::Int(
                t.uint64_data
                    .iter()
                    .map(|&v| i64::try_from(v).map_err(|_| diag!(Unsupported, "tensor `{}` holds {v}", t.name)))
                    .collect::<DResult<_>>()?,
            ),
            _ => Data::Int(t.int32_data.iter().map(|&v| v as i64).collect()),
        };
        if data.len() != n {
            return Err(mismatch(data.len()));
        }
        data
    };
    Ok(Values { code: c, shape, data })
}

fn decode_raw(c: i32, raw: &[u8]) -> Data {
    fn le<const N: usize>(raw: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        raw.chunks_exact(N).map(|b| {
            let mut a = [0u8; N];
            a.copy_from_slice(b);
            a
        })
    }
    match c {
        code::FLOAT => Data::Float(le::<4>(raw).map(|b| f32::from_le_bytes(b) as f64).collect()),
        code::DOUBLE => Data::Float(le::<8>(raw).map(f64::from_le_bytes).collect()),
        code::FLOAT16 => Data::Float(le::<2>(raw).map(|b| half::f16::from_le_bytes(b).to_f64()).collect()),
        code::BFLOAT16 => Data::Float(le::<2>(raw).map(|b| half::bf16::from_le_bytes(b).to_f64()).collect()),
        code::INT64 => Data::Int(le::<8>(raw).map(i64::from_le_bytes).collect()),
        // An out-of-range u64 saturates; the importer narrows it to i32
        // afterwards and refuses it there.
        code::UINT64 => {
            Data::Int(le::<8>(raw).map(|b| i64::try_from(u64::from_le_bytes(b)).unwrap_or(i64::MAX)).collect())
        }
        code::INT32 => Data::Int(le::<4>(raw).map(|b| i32::from_le_bytes(b) as i64).collect()),
        code::UINT32 => Data::Int(le::<4>(raw).map(|b| u32::from_le_bytes(b) as i64).collect()),
        code::INT16 => Data::Int(le::<2>(raw).map(|b| i16::from_le_bytes(b) as i64).collect()),
        code::UINT16 => Data::Int(le::<2>(raw).map(|b| u16::from_le_bytes(b) as i64).collect()),
        code::INT8 => Data::Int(raw.iter().map(|&b| b as i8 as i64).collect()),
        // UINT8, BOOL.
        _ => Data::Int(raw.iter().map(|&b| b as i64).collect()),
    }
}

/// The bytes of an external-data tensor (`data_location = EXTERNAL`, keys
/// `location`, `offset`, `length` of ONNX `ExternalData.md`), read from the
/// file `location` names relative to the model's folder `dir`.
///
/// The path must stay inside `dir`: an absolute path, a `..` component, or
/// a file that resolves (through links) outside the folder is refused, and
/// only a regular file is read, and only the bytes the tensor needs.
///
/// Errors: `Io` naming the tensor for all of these and for read failures;
/// `Unsupported` when the model was not read from a file (`dir` is `None`).
pub fn external_bytes(t: &TensorProto, dir: Option<&Path>) -> DResult<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let name = &t.name;
    let dir = dir.ok_or_else(|| {
        diag!(
            Unsupported,
            "tensor `{name}` keeps its data in an external file, but the model was not read from a folder"
        )
    })?;
    let key = |k: &str| t.external_data.iter().find(|e| e.key == k).map(|e| e.value.as_str());
    let location = key("location").ok_or_else(|| diag!(Io, "tensor `{name}` has external data without a location"))?;
    let number = |k: &str| -> DResult<Option<u64>> {
        key(k)
            .map(|v| {
                v.parse::<u64>().map_err(|_| diag!(Io, "tensor `{name}`: external data {k} `{v}` is not a number"))
            })
            .transpose()
    };
    let offset = number("offset")?.unwrap_or(0);
    let rel = Path::new(location);
    if rel.is_absolute() || rel.components().any(|c| !matches!(c, Component::Normal(_) | Component::CurDir)) {
        return Err(diag!(
            Io,
            "tensor `{name}`: external data location `{location}` must be a path inside the model's folder"
        ));
    }
    let (_, n) = tensor_shape(t)?;
    let size = elem_bytes(t.data_type).ok_or_else(|| {
        diag!(Unsupported, "tensor `{name}` is of type {}, which tgc does not read", type_name(t.data_type))
    })?;
    let want = (n * size) as u64;
    if let Some(len) = number("length")? {
        if len != want {
            return Err(diag!(
                AxisSizeMismatch,
                "tensor `{name}` needs {want} bytes but its external data length is {len}"
            ));
        }
    }
    let io = |e: std::io::Error| diag!(Io, "tensor `{name}`: cannot read external data `{location}`: {e}");
    let root = dir.canonicalize().map_err(io)?;
    let path = root.join(rel).canonicalize().map_err(io)?;
    if !path.starts_with(&root) {
        return Err(diag!(Io, "tensor `{name}`: external data `{location}` resolves outside the model's folder"));
    }
    let mut file = std::fs::File::open(&path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(diag!(Io, "tensor `{name}`: external data `{location}` is not a regular file"));
    }
    if offset.checked_add(want).is_none_or(|end| end > meta.len()) {
        return Err(diag!(
            AxisSizeMismatch,
            "tensor `{name}`: external data `{location}` has {} bytes, too few for {want} bytes at offset {offset}",
            meta.len()
        ));
    }
    file.seek(SeekFrom::Start(offset)).map_err(io)?;
    let mut bytes = vec![0u8; want as usize];
    file.read_exact(&mut bytes).map_err(io)?;
    Ok(bytes)
}

/// A node's attributes by name.
pub struct Attrs<'a> {
    pub list: &'a [AttributeProto],
}

/// `AttributeProto.AttributeType` codes.
mod attr_type {
    pub const FLOAT: i32 = 1;
    pub const INT: i32 = 2;
    pub const STRING: i32 = 3;
    pub const TENSOR: i32 = 4;
    pub const GRAPH: i32 = 5;
    pub const FLOATS: i32 = 6;
    pub const INTS: i32 = 7;
    pub const STRINGS: i32 = 8;
}

impl<'a> Attrs<'a> {
    fn get(&self, name: &str) -> Option<&'a AttributeProto> {
        self.list.iter().find(|a| a.name == name)
    }

    fn typed(&self, name: &str, ty: i32, what: &str) -> DResult<Option<&'a AttributeProto>> {
        match self.get(name) {
            None => Ok(None),
            Some(a) if a.type_.value() == ty => Ok(Some(a)),
            Some(_) => Err(diag!(SyntaxError, "attribute `{name}` must be {what}")),
        }
    }

    /// Whether the attribute is present.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn int(&self, name: &str) -> DResult<Option<i64>> {
        Ok(self.typed(name, attr_type::INT, "an integer")?.map(|a| a.i))
    }

    pub fn int_or(&self, name: &str, default: i64) -> DResult<i64> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    pub fn float_or(&self, name: &str, default: f64) -> DResult<f64> {
        Ok(self.typed(name, attr_type::FLOAT, "a float")?.map_or(default, |a| a.f as f64))
    }

    pub fn ints(&self, name: &str) -> DResult<Option<Vec<i64>>> {
        Ok(self.typed(name, attr_type::INTS, "a list of integers")?.map(|a| a.ints.clone()))
    }

    pub fn floats(&self, name: &str) -> DResult<Option<Vec<f64>>> {
        Ok(self
            .typed(name, attr_type::FLOATS, "a list of floats")?
            .map(|a| a.floats.iter().map(|&f| f as f64).collect()))
    }

    pub fn string(&self, name: &str) -> DResult<Option<String>> {
        Ok(self.typed(name, attr_type::STRING, "a string")?.map(|a| String::from_utf8_lossy(&a.s).into_owned()))
    }

    pub fn strings(&self, name: &str) -> DResult<Option<Vec<String>>> {
        Ok(self
            .typed(name, attr_type::STRINGS, "a list of strings")?
            .map(|a| a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()))
    }

    pub fn tensor(&self, name: &str) -> DResult<Option<&'a TensorProto>> {
        match self.typed(name, attr_type::TENSOR, "a tensor")? {
            None => Ok(None),
            Some(a) => a.t.as_ref().map(Some).ok_or_else(|| diag!(SyntaxError, "attribute `{name}` holds no tensor")),
        }
    }

    /// A graph attribute (`Scan`'s `body`).
    pub fn graph(&self, name: &str) -> DResult<Option<&'a GraphProto>> {
        match self.typed(name, attr_type::GRAPH, "a graph")? {
            None => Ok(None),
            Some(a) => a.g.as_ref().map(Some).ok_or_else(|| diag!(SyntaxError, "attribute `{name}` holds no graph")),
        }
    }

    /// The names of every attribute, for "unknown attribute" checks.
    pub fn names(&self) -> impl Iterator<Item = &'a str> {
        self.list.iter().map(|a| a.name.as_str())
    }
}
