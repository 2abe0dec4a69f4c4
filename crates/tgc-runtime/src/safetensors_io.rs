//! Reading one tensor of a `.safetensors` file (the `NAME=FILE.safetensors:TENSOR`
//! inputs of `tgc run`), and writing named tensors as one
//! ([`to_safetensors`]: an imported model's weights).
//!
//! Element types read: F16, BF16, F32, I32 and BOOL as themselves; F64 and I64
//! converted to f32 (nearest) and i32 (an error when a value is out of range),
//! as `.npy` files are. Safetensors data is little-endian and row-major, the
//! layout of [`HostTensor`].

use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use crate::tensor::{f64_le_to_f32_le, i64_le_to_i32_le};
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

/// Reads the tensor `tensor_name` of the `.safetensors` file at `path`.
///
/// The whole file is read into memory.
///
/// Errors: [`Error::Io`] when the file cannot be read; [`Error::Format`] when
/// it is not a valid `.safetensors` file, has no tensor of that name (the
/// message lists the names it has), or holds an unsupported element type.
pub fn read_safetensors_tensor(path: impl AsRef<Path>, tensor_name: &str) -> Result<HostTensor> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
    read_safetensors_tensor_bytes(&bytes, tensor_name).map_err(|e| match e {
        Error::Format(msg) => Error::Format(format!("`{}`: {msg}", path.display())),
        e => e,
    })
}

/// Reads the tensor `tensor_name` from the bytes of a whole `.safetensors`
/// file, as [`read_safetensors_tensor`] does.
pub fn read_safetensors_tensor_bytes(bytes: &[u8], tensor_name: &str) -> Result<HostTensor> {
    let file =
        SafeTensors::deserialize(bytes).map_err(|e| Error::Format(format!("not a valid .safetensors file: {e}")))?;
    let Ok(view) = file.tensor(tensor_name) else {
        return Err(Error::Format(missing_tensor_message(&file, tensor_name)));
    };
    let data = view.data();
    let (dtype, data) = match view.dtype() {
        Dtype::F16 => (DType::F16, data.to_vec()),
        Dtype::BF16 => (DType::BF16, data.to_vec()),
        Dtype::F32 => (DType::F32, data.to_vec()),
        Dtype::I32 => (DType::I32, data.to_vec()),
        Dtype::BOOL => (DType::Bool, data.iter().map(|&b| (b != 0) as u8).collect()),
        Dtype::F64 => (DType::F32, f64_le_to_f32_le(data)),
        Dtype::I64 => (
            DType::I32,
            i64_le_to_i32_le(data).map_err(|e| match e {
                Error::Format(msg) => Error::Format(format!("tensor `{tensor_name}`: {msg}")),
                e => e,
            })?,
        ),
        other => {
            return Err(Error::Format(format!(
                "tensor `{tensor_name}` has unsupported dtype {other:?}; supported: \
                 F16, BF16, F32, I32, BOOL, and F64 or I64 (converted to f32 or i32)"
            )))
        }
    };
    HostTensor::from_bytes(dtype, view.shape(), data)
}

/// "no tensor `x`; the file has: a, b, ... (N more)", names sorted.
fn missing_tensor_message(file: &SafeTensors<'_>, tensor_name: &str) -> String {
    let mut names = file.names();
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
}
