//! Reading one tensor of a `.safetensors` file (the `NAME=FILE.safetensors:TENSOR`
//! inputs of `tgc run`), and writing named tensors as one
//! ([`to_safetensors`]: an imported model's weights).
//!
//! Element types read: F16, BF16, F32, I32 and BOOL as themselves; F64 and I64
//! converted to f32 (nearest) and i32 (an error when a value is out of range),
//! as `.npy` files are. Safetensors data is little-endian and row-major, the
//! layout of [`HostTensor`].
//!
//! The header (an 8-byte little-endian length, then that many bytes of
//! JSON) is read first, within the format's bound [`MAX_HEADER_BYTES`], and
//! checked as the format's reference reader checks it; then the data of the
//! one tensor asked for, and nothing else.

use std::fs::File;
use std::io::{Cursor, Read, Seek};
use std::path::Path;

use safetensors::tensor::Metadata;
use safetensors::Dtype;

use crate::input::{Pending, Source, Stored};
use crate::tensor::num_elements;
use crate::{DType, Error, HostTensor, Result};

/// The bytes of a `.safetensors` file holding `tensors` by name, in their
/// own dtypes (F16, BF16, F32, I32, BOOL), in the order given, with
/// `metadata` in the header's `__metadata__`.
///
/// Errors: [`Error::Format`] for two tensors of one name.
pub fn to_safetensors(tensors: &[(String, HostTensor)], metadata: &[(&str, &str)]) -> Result<Vec<u8>> {
    let mut views = Vec::with_capacity(tensors.len());
    for (name, t) in tensors {
        let dtype = match t.dtype() {
            DType::F16 => Dtype::F16,
            DType::BF16 => Dtype::BF16,
            DType::F32 => Dtype::F32,
            DType::I32 => Dtype::I32,
            DType::Bool => Dtype::BOOL,
        };
        let view = safetensors::tensor::TensorView::new(dtype, t.shape().to_vec(), t.bytes())
            .map_err(|e| Error::Format(format!("tensor `{name}`: {e}")))?;
        views.push((name.as_str(), view));
    }
    let metadata =
        (!metadata.is_empty()).then(|| metadata.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    safetensors::tensor::serialize(views, &metadata)
        .map_err(|e| Error::Format(format!("cannot write .safetensors: {e}")))
}

/// Names listed when a requested tensor is missing.
const MAX_LISTED_NAMES: usize = 10;

/// The longest JSON header read, in bytes: the format's own bound
/// (`MAX_HEADER_SIZE` of the `safetensors` crate, which refuses longer ones).
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Reads the tensor `tensor_name` of the `.safetensors` file at `path`:
/// [`open_safetensors`], then [`Pending::read`].
///
/// Errors: those of [`open_safetensors`] and [`Pending::read`].
pub fn read_safetensors_tensor(path: impl AsRef<Path>, tensor_name: &str) -> Result<HostTensor> {
    open_safetensors(path.as_ref(), tensor_name)?.read()
}

/// Opens the `.safetensors` file at `path` and reads its header: the dtype
/// and shape of its tensor `tensor_name`, whose data is not read yet (nor
/// that of the other tensors, ever).
///
/// Errors: [`Error::Io`] when the file cannot be opened or is not a regular
/// file; [`Error::Format`] (naming the path) when it is not a valid
/// `.safetensors` file (a header longer than [`MAX_HEADER_BYTES`], or not
/// the JSON of the format, tensors that do not lie back to back, a file
/// longer or shorter than its tensors), has no tensor of that name (the
/// message lists the names it has), or holds an unsupported element type.
pub fn open_safetensors(path: &Path, tensor_name: &str) -> Result<Pending<File>> {
    pending(Source::open(path)?, tensor_name)
}

/// Reads the tensor `tensor_name` from the bytes of a whole `.safetensors`
/// file, as [`read_safetensors_tensor`] does.
pub fn read_safetensors_tensor_bytes(bytes: &[u8], tensor_name: &str) -> Result<HostTensor> {
    open_safetensors_bytes(bytes, tensor_name)?.read()
}

/// [`open_safetensors`] over the bytes of a whole `.safetensors` file.
///
/// Errors: those of [`open_safetensors`] but the I/O ones.
pub fn open_safetensors_bytes<'a>(bytes: &'a [u8], tensor_name: &str) -> Result<Pending<Cursor<&'a [u8]>>> {
    pending(Source::bytes(bytes), tensor_name)
}

/// The tensor `tensor_name` of `source`, after checking the header and the
/// file's length.
fn pending<R: Read + Seek>(mut source: Source<R>, tensor_name: &str) -> Result<Pending<R>> {
    match find(&mut source, tensor_name) {
        Ok((offset, bytes, stored, shape)) => Ok(Pending {
            source,
            offset,
            bytes,
            stored,
            big_endian: false,
            fortran_order: false,
            shape,
            name: Some(tensor_name.to_string()),
        }),
        Err(e) => Err(source.in_context(e)),
    }
}

/// The names of the tensors of the `.safetensors` file at `path`, sorted,
/// from its header (checked as [`open_safetensors`] checks it; no data is
/// read).
///
/// Errors: those of [`open_safetensors`] but a missing name.
pub fn tensor_names(path: &Path) -> Result<Vec<String>> {
    let mut source = Source::open(path)?;
    match header(&mut source) {
        Ok((header, _)) => {
            let mut names: Vec<String> = header.tensors().into_keys().collect();
            names.sort();
            Ok(names)
        }
        Err(e) => Err(source.in_context(e)),
    }
}

/// The checked header of `source` and its length in bytes.
fn header<R: Read + Seek>(source: &mut Source<R>) -> Result<(Metadata, u64)> {
    let invalid = |msg: String| Error::Format(format!("not a valid .safetensors file: {msg}"));
    if source.len() < 8 {
        return Err(invalid(format!("{} bytes, fewer than the 8 of the header's length", source.len())));
    }
    let len_field: [u8; 8] = source.read_at(0, 8, "header length")?.try_into().expect("8 bytes");
    let n = u64::from_le_bytes(len_field);
    if n > MAX_HEADER_BYTES {
        return Err(invalid(format!("a header of {n} bytes, longer than the format's {MAX_HEADER_BYTES}")));
    }
    if 8 + n > source.len() {
        return Err(invalid(format!("a header of {n} bytes in a file of {}", source.len())));
    }
    let text = source.read_at(8, n, ".safetensors header")?;
    let header: Metadata =
        serde_json::from_slice(&text).map_err(|e| invalid(format!("the header is not the format's JSON: {e}")))?;
    drop(text);
    let end = data_end(&header).map_err(invalid)?;
    let have = source.len() - 8 - n;
    if end != have {
        return Err(invalid(format!("its tensors take {end} bytes of data, the file has {have} after the header")));
    }
    Ok((header, n))
}

/// Where the data of tensor `tensor_name` starts in `source`, its bytes,
/// element type and shape.
fn find<R: Read + Seek>(source: &mut Source<R>, tensor_name: &str) -> Result<(u64, u64, Stored, Vec<usize>)> {
    let (header, n) = header(source)?;
    let Some(info) = header.info(tensor_name) else {
        return Err(Error::Format(missing_tensor_message(&header, tensor_name)));
    };
    let stored = match info.dtype {
        Dtype::F16 => Stored::F16,
        Dtype::BF16 => Stored::BF16,
        Dtype::F32 => Stored::F32,
        Dtype::I32 => Stored::I32,
        Dtype::BOOL => Stored::Bool,
        Dtype::F64 => Stored::F64,
        Dtype::I64 => Stored::I64,
        other => {
            return Err(Error::Format(format!(
                "tensor `{tensor_name}` has unsupported dtype {other:?}; supported: \
                 F16, BF16, F32, I32, BOOL, and F64 or I64 (converted to f32 or i32)"
            )))
        }
    };
    let (start, stop) = info.data_offsets;
    Ok((8 + n + start as u64, (stop - start) as u64, stored, info.shape.clone()))
}

/// The bytes of data the header's tensors take, checked as the format
/// requires (the `safetensors` crate's `Metadata::validate`, private
/// there): in order of their offsets the tensors lie back to back from
/// byte 0, each as long as its dtype and shape make it.
///
/// Errors: the first tensor that breaks the rule, as a message.
fn data_end(header: &Metadata) -> std::result::Result<u64, String> {
    let mut tensors: Vec<_> = header.tensors().into_iter().collect();
    tensors.sort_by_key(|(_, info)| info.data_offsets);
    let mut end = 0;
    for (name, info) in tensors {
        let (start, stop) = info.data_offsets;
        if start != end || stop < start {
            return Err(format!("tensor `{name}` has data offsets [{start}, {stop}]; it must start at {end}"));
        }
        let bytes = num_elements(&info.shape).and_then(|n| n.checked_mul(info.dtype.size()));
        if bytes != Some(stop - start) {
            return Err(format!(
                "tensor `{name}` of {:?} {:?} takes {} bytes, not the {} of its data offsets",
                info.dtype,
                info.shape,
                bytes.map_or("too many".to_string(), |b| b.to_string()),
                stop - start
            ));
        }
        end = stop;
    }
    Ok(end as u64)
}

/// "no tensor `x`; the file has: a, b, ... (N more)", names sorted.
fn missing_tensor_message(header: &Metadata, tensor_name: &str) -> String {
    let mut names: Vec<String> = header.tensors().into_keys().collect();
    names.sort();
    if names.is_empty() {
        return format!("no tensor `{tensor_name}`; the file holds no tensors");
    }
    let listed: Vec<&str> = names.iter().take(MAX_LISTED_NAMES).map(|s| s.as_str()).collect();
    let more = names.len() - listed.len();
    let more = if more > 0 { format!(", and {more} more") } else { String::new() };
    format!("no tensor `{tensor_name}`; the file has: {}{more}", listed.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::TempDir;
    use crate::DType;
    use safetensors::tensor::TensorView;

    /// A `.safetensors` file with the given (name, dtype, shape, data) tensors.
    fn file(tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
        let views = tensors.iter().map(|(name, dtype, shape, data)| {
            (name.to_string(), TensorView::new(*dtype, shape.clone(), data).unwrap())
        });
        safetensors::serialize(views, &None).unwrap()
    }

    fn le<const N: usize>(values: impl IntoIterator<Item = [u8; N]>) -> Vec<u8> {
        values.into_iter().flatten().collect()
    }

    fn format_error(bytes: &[u8], name: &str) -> String {
        match read_safetensors_tensor_bytes(bytes, name) {
            Err(Error::Format(msg)) => msg,
            other => panic!("expected a format error, got {other:?}"),
        }
    }

    #[test]
    fn reads_supported_dtypes() {
        let bytes = file(&[
            ("w", Dtype::BF16, vec![2, 1], le([[0x80, 0x3f], [0x00, 0xc0]])),
            ("h", Dtype::F16, vec![1], le([[0x00, 0x3c]])),
            ("f", Dtype::F32, vec![], le([2.5f32.to_le_bytes()])),
            ("i", Dtype::I32, vec![2], le([(-3i32).to_le_bytes(), 7i32.to_le_bytes()])),
            ("b", Dtype::BOOL, vec![3], vec![1, 0, 1]),
            ("d", Dtype::F64, vec![1], le([0.1f64.to_le_bytes()])),
            ("l", Dtype::I64, vec![1], le([(-9i64).to_le_bytes()])),
        ]);
        let read = |name| read_safetensors_tensor_bytes(&bytes, name).unwrap();
        let w = read("w");
        assert_eq!((w.dtype(), w.shape(), w.to_f32_vec()), (DType::BF16, &[2, 1][..], vec![1.0, -2.0]));
        assert_eq!((read("h").dtype(), read("h").to_f32_vec()), (DType::F16, vec![1.0]));
        assert_eq!((read("f").shape(), read("f").to_f32_vec()), (&[][..], vec![2.5]));
        assert_eq!(read("i").to_f64_vec(), [-3.0, 7.0]);
        assert_eq!((read("b").dtype(), read("b").bytes()), (DType::Bool, &[1, 0, 1][..]));
        assert_eq!((read("d").dtype(), read("d").to_f32_vec()), (DType::F32, vec![0.1f32]));
        assert_eq!((read("l").dtype(), read("l").to_f64_vec()), (DType::I32, vec![-9.0]));
    }

    #[test]
    fn reads_from_a_file() {
        let dir = TempDir::new("safetensors");
        let path = dir.path().join("m.safetensors");
        std::fs::write(&path, file(&[("x", Dtype::F32, vec![1], le([1f32.to_le_bytes()]))])).unwrap();
        assert_eq!(read_safetensors_tensor(&path, "x").unwrap().to_f32_vec(), [1.0]);
        let e = read_safetensors_tensor(&path, "y").unwrap_err();
        assert!(matches!(&e, Error::Format(m) if m.contains("m.safetensors")), "{e}");
        let e = read_safetensors_tensor(dir.path().join("none.safetensors"), "x").unwrap_err();
        assert!(matches!(&e, Error::Io(m) if m.contains("none.safetensors")), "{e}");
    }

    #[test]
    fn unknown_names_list_what_the_file_has() {
        let tensors: Vec<_> = (0..12).map(|i| (format!("t{i:02}"), Dtype::BOOL, vec![1], vec![0])).collect();
        let refs: Vec<_> = tensors.iter().map(|(n, d, s, b)| (n.as_str(), *d, s.clone(), b.clone())).collect();
        let msg = format_error(&file(&refs), "weight");
        assert_eq!(
            msg,
            "no tensor `weight`; the file has: t00, t01, t02, t03, t04, t05, t06, t07, t08, t09, and 2 more"
        );
        let msg = format_error(&file(&refs[..2]), "weight");
        assert_eq!(msg, "no tensor `weight`; the file has: t00, t01");
    }

    #[test]
    fn bad_content_is_a_format_error() {
        let msg = format_error(b"not a safetensors file", "x");
        assert!(msg.starts_with("not a valid .safetensors file"), "{msg}");
        let bytes = file(&[("u", Dtype::U16, vec![1], vec![0, 0])]);
        let msg = format_error(&bytes, "u");
        assert!(msg.contains("unsupported dtype U16") && msg.contains("BF16"), "{msg}");
        let bytes = file(&[("l", Dtype::I64, vec![1], le([(1i64 << 40).to_le_bytes()]))]);
        let msg = format_error(&bytes, "l");
        assert!(msg.contains("tensor `l`") && msg.contains("does not fit in i32"), "{msg}");
    }

    /// An 8-byte length, then that many bytes of JSON header: each part is
    /// checked against the file's length before it is read.
    #[test]
    fn the_header_and_the_layout_are_checked_before_the_data() {
        let with_header = |json: &str, data: &[u8]| {
            let mut b = (json.len() as u64).to_le_bytes().to_vec();
            b.extend_from_slice(json.as_bytes());
            b.extend_from_slice(data);
            b
        };
        let x = r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        assert_eq!(read_safetensors_tensor_bytes(&with_header(x, &[0; 8]), "x").unwrap().len(), 2);
        let mut huge = with_header(x, &[0; 8]);
        huge[..8].copy_from_slice(&(MAX_HEADER_BYTES + 1).to_le_bytes());
        let cases = [
            (b"\x05\0\0".to_vec(), "3 bytes, fewer than the 8 of the header's length"),
            (huge, "a header of 100000001 bytes, longer than the format's 100000000"),
            (with_header(x, &[0; 8])[..40].to_vec(), "a header of 54 bytes in a file of 40"),
            (with_header(x, &[0; 7]), "its tensors take 8 bytes of data, the file has 7 after the header"),
            (with_header(x, &[0; 9]), "its tensors take 8 bytes of data, the file has 9 after the header"),
            (with_header(r#"{"x": 5}"#, &[]), "the header is not the format's JSON"),
            (
                with_header(r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#, &[0; 12]),
                "tensor `x` has data offsets [4, 12]; it must start at 0",
            ),
            (
                with_header(r#"{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#, &[0; 8]),
                "tensor `x` of F32 [3] takes 12 bytes, not the 8 of its data offsets",
            ),
        ];
        for (bytes, want) in cases {
            let msg = format_error(&bytes, "x");
            assert!(msg.starts_with("not a valid .safetensors file: ") && msg.contains(want), "{msg}");
        }
    }

    /// [`open_safetensors`] reads the header only; [`Pending::read`] the one
    /// tensor's bytes.
    #[test]
    fn opening_reads_the_header_only() {
        let dir = TempDir::new("safetensors-open");
        let path = dir.path().join("m.safetensors");
        let a = le((0..4).map(|v| (v as f32).to_le_bytes()));
        std::fs::write(&path, file(&[("a", Dtype::F32, vec![4], a), ("b", Dtype::I64, vec![2], vec![0; 16])])).unwrap();
        let b = open_safetensors(&path, "b").unwrap();
        assert_eq!((b.dtype(), b.shape(), b.data_bytes()), (DType::I32, &[2][..], 16));
        assert_eq!(b.read().unwrap().to_f64_vec(), [0.0, 0.0]);
        let e = open_safetensors(&path, "c").err().unwrap();
        assert!(matches!(&e, Error::Format(m) if m.contains("m.safetensors") && m.contains("has: a, b")), "{e}");
    }
}
