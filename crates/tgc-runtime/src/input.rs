//! What the `.npy` and `.safetensors` readers share: a `Source` of known
//! length that reads only the bytes asked for, once it holds them, and a
//! [`Pending`] tensor, whose header is read and checked but whose data is not.
//!
//! Reading a tensor file takes two steps:
//!
//! 1. `Source::open` refuses anything but a regular file (after symbolic
//!    links), so that `/dev/zero`, a FIFO or a directory fails before a byte
//!    is read, and learns the file's length from the opened handle. The
//!    format's reader then reads its header, within the format's bound, and
//!    checks that the file is exactly as long as the header and the data it
//!    declares: a [`Pending`] tensor.
//! 2. [`Pending::read`] reads those data bytes and nothing else.
//!
//! Between the two, `tgc run` counts [`Pending::data_bytes`] against its
//! memory budget (`--max-memory`).

use std::fs::File;
use std::io::{Cursor, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::tensor::{f64_le_to_f32_le, i64_le_to_i32_le};
use crate::{DType, Error, HostTensor, Result};

/// Bytes to read tensors from: a file or a buffer, of known length.
pub(crate) struct Source<R> {
    reader: R,
    /// The length in bytes, known before anything is read.
    len: u64,
    /// The file, for messages; `None` for bytes in memory.
    path: Option<PathBuf>,
}

impl Source<File> {
    /// Opens the regular file at `path` (symbolic links followed).
    ///
    /// The path is checked before it is opened, so that a device is never
    /// opened, and the opened handle again, so that a path swapped in
    /// between is caught too; the open does not wait for a writer when the
    /// swapped-in file is a FIFO.
    ///
    /// Errors: [`Error::Io`] naming the path when it cannot be opened or is
    /// not a regular file (a directory, a FIFO, a device, a socket).
    pub(crate) fn open(path: &Path) -> Result<Source<File>> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io("read", path, e))?;
        regular_file(path, &meta)?;
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK | libc::O_NOCTTY);
        let file = options.open(path).map_err(|e| Error::io("read", path, e))?;
        let meta = file.metadata().map_err(|e| Error::io("read", path, e))?;
        regular_file(path, &meta)?;
        Ok(Source { reader: file, len: meta.len(), path: Some(path.to_path_buf()) })
    }
}

/// Refuses `meta` (of `path`) unless it is a regular file.
fn regular_file(path: &Path, meta: &std::fs::Metadata) -> Result<()> {
    let t = meta.file_type();
    if t.is_file() {
        return Ok(());
    }
    #[cfg(unix)]
    let kind = {
        use std::os::unix::fs::FileTypeExt;
        if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_char_device() {
            "a character device"
        } else if t.is_block_device() {
            "a block device"
        } else if t.is_socket() {
            "a socket"
        } else {
            "not a file"
        }
    };
    #[cfg(not(unix))]
    let kind = if t.is_dir() { "a directory" } else { "not a file" };
    Err(Error::Io(format!("cannot read `{}`: it is {kind}, not a regular file", path.display())))
}

impl<'a> Source<Cursor<&'a [u8]>> {
    /// The bytes of a whole file, in memory.
    pub(crate) fn bytes(bytes: &'a [u8]) -> Source<Cursor<&'a [u8]>> {
        Source { reader: Cursor::new(bytes), len: bytes.len() as u64, path: None }
    }
}

impl<R: Read + Seek> Source<R> {
    /// The length in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The `n` bytes at byte `offset`; `what` names them in messages. The
    /// buffer is allocated only once the source is known to hold them.
    ///
    /// Errors: [`Error::Format`] "truncated `what`" when the source ends
    /// before; [`Error::OutOfMemory`] when the buffer cannot be allocated;
    /// [`Error::Io`] when the read fails or comes up short (a file that
    /// shrank since it was opened).
    pub(crate) fn read_at(&mut self, offset: u64, n: u64, what: &str) -> Result<Vec<u8>> {
        if offset.checked_add(n).is_none_or(|end| end > self.len) {
            return Err(Error::Format(format!(
                "truncated {what}: {n} bytes at byte {offset}, past the end at byte {}",
                self.len
            )));
        }
        let oom = || Error::OutOfMemory { what: what.to_string(), bytes: usize::try_from(n).unwrap_or(usize::MAX) };
        let mut buf = Vec::new();
        buf.try_reserve_exact(usize::try_from(n).map_err(|_| oom())?).map_err(|_| oom())?;
        let io = |e: std::io::Error| match &self.path {
            Some(p) => Error::io("read", p, e),
            None => Error::Io(format!("cannot read {what}: {e}")),
        };
        self.reader.seek(SeekFrom::Start(offset)).map_err(io)?;
        (&mut self.reader).take(n).read_to_end(&mut buf).map_err(io)?;
        if buf.len() as u64 != n {
            return Err(io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)));
        }
        Ok(buf)
    }

    /// `e` with the file's path in front of a [`Error::Format`] message.
    pub(crate) fn in_context(&self, e: Error) -> Error {
        match (e, &self.path) {
            (Error::Format(msg), Some(p)) => Error::Format(format!("`{}`: {msg}", p.display())),
            (e, _) => e,
        }
    }
}

/// An element type as a file stores it. F64 and I64 are read as f32
/// (nearest) and i32 (an error when a value is out of range).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stored {
    F16,
    BF16,
    F32,
    F64,
    I32,
    I64,
    Bool,
}

impl Stored {
    /// Bytes of one element in the file.
    pub(crate) fn size(self) -> usize {
        match self {
            Stored::Bool => 1,
            Stored::F16 | Stored::BF16 => 2,
            Stored::F32 | Stored::I32 => 4,
            Stored::F64 | Stored::I64 => 8,
        }
    }

    /// The dtype the elements are read as.
    pub(crate) fn dtype(self) -> DType {
        match self {
            Stored::F16 => DType::F16,
            Stored::BF16 => DType::BF16,
            Stored::F32 | Stored::F64 => DType::F32,
            Stored::I32 | Stored::I64 => DType::I32,
            Stored::Bool => DType::Bool,
        }
    }

    /// Little-endian file elements as little-endian elements of
    /// [`Stored::dtype`]; a non-zero bool byte is true. `raw` is dropped
    /// before a converted buffer is returned.
    fn decode(self, mut raw: Vec<u8>) -> Result<Vec<u8>> {
        Ok(match self {
            Stored::F16 | Stored::BF16 | Stored::F32 | Stored::I32 => raw,
            Stored::Bool => {
                raw.iter_mut().for_each(|b| *b = (*b != 0) as u8);
                raw
            }
            Stored::F64 => f64_le_to_f32_le(&raw),
            Stored::I64 => i64_le_to_i32_le(&raw)?,
        })
    }
}

/// A tensor whose header has been read and checked, its data not yet:
/// the data lies at a known offset of its source, which holds exactly the
/// bytes it needs.
pub struct Pending<R> {
    pub(crate) source: Source<R>,
    /// Where the data starts, in bytes.
    pub(crate) offset: u64,
    /// Bytes of data: the product of `shape` times the element size.
    pub(crate) bytes: u64,
    pub(crate) stored: Stored,
    pub(crate) big_endian: bool,
    /// Column-major data (`.npy`'s `fortran_order`), read as row-major.
    pub(crate) fortran_order: bool,
    pub(crate) shape: Vec<usize>,
    /// The tensor's name in a file of several, for messages.
    pub(crate) name: Option<String>,
}

impl<R: Read + Seek> Pending<R> {
    /// The dtype the tensor is read as (f64 and i64 data as f32 and i32).
    pub fn dtype(&self) -> DType {
        self.stored.dtype()
    }

    /// The shape, outermost dimension first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The bytes of data [`Pending::read`] reads, and so holds at once
    /// beside the tensor it builds.
    pub fn data_bytes(&self) -> u64 {
        self.bytes
    }

    /// Reads the data, in row-major order and little-endian.
    ///
    /// Errors: [`Error::Io`] when the read fails; [`Error::OutOfMemory`];
    /// [`Error::Format`] for an i64 value outside i32 (naming the file and
    /// the tensor).
    pub fn read(mut self) -> Result<HostTensor> {
        let read = self.source.read_at(self.offset, self.bytes, "the tensor's data").and_then(|mut raw| {
            if self.big_endian {
                raw.chunks_exact_mut(self.stored.size()).for_each(<[u8]>::reverse);
            }
            let mut data = self.stored.decode(raw)?;
            let dtype = self.stored.dtype();
            if self.fortran_order && self.shape.len() > 1 {
                data = fortran_to_c(&data, &self.shape, dtype.size_bytes());
            }
            HostTensor::from_bytes(dtype, &self.shape, data)
        });
        read.map_err(|e| match (e, &self.name) {
            (Error::Format(msg), Some(name)) => {
                self.source.in_context(Error::Format(format!("tensor `{name}`: {msg}")))
            }
            (e, _) => self.source.in_context(e),
        })
    }
}

/// Reorders column-major elements of `size` bytes into row-major order.
pub(crate) fn fortran_to_c(data: &[u8], shape: &[usize], size: usize) -> Vec<u8> {
    let mut strides = Vec::with_capacity(shape.len());
    let mut stride = 1;
    for &d in shape {
        strides.push(stride);
        stride *= d;
    }
    let mut out = Vec::with_capacity(data.len());
    let mut index = vec![0; shape.len()];
    let mut src = 0; // element offset in `data` of `index`
    for _ in 0..data.len() / size {
        out.extend_from_slice(&data[src * size..(src + 1) * size]);
        // Advance `index` in row-major order, keeping `src` in step.
        for k in (0..shape.len()).rev() {
            index[k] += 1;
            src += strides[k];
            if index[k] < shape[k] {
                break;
            }
            src -= strides[k] * shape[k];
            index[k] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::TempDir;

    #[test]
    fn only_regular_files_open() {
        let dir = TempDir::new("input");
        let file = dir.path().join("x.npy");
        std::fs::write(&file, b"12345").unwrap();
        let link = dir.path().join("link.npy");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(Source::open(&link).unwrap().len(), 5, "a link to a regular file is followed");
        let zero = dir.path().join("zero.npy");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let fifo = dir.path().join("fifo.npy");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        for (path, kind) in [
            (Path::new("/dev/zero"), "a character device"),
            (&zero, "a character device"),
            (&fifo, "a FIFO"),
            (dir.path(), "a directory"),
        ] {
            let e = Source::open(path).err().unwrap();
            let want = format!("cannot read `{}`: it is {kind}, not a regular file", path.display());
            assert!(matches!(&e, Error::Io(m) if m == &want), "{e}");
        }
    }

    #[test]
    fn reads_are_bounded_by_the_length() {
        let mut s = Source::bytes(b"abcdef");
        assert_eq!(s.read_at(2, 3, "x").unwrap(), b"cde");
        let e = s.read_at(4, 3, "the header").unwrap_err();
        assert_eq!(e, Error::Format("truncated the header: 3 bytes at byte 4, past the end at byte 6".into()));
        assert!(matches!(s.read_at(1, u64::MAX, "x"), Err(Error::Format(_))), "no overflow, no allocation");
    }

    #[test]
    fn fortran_order_is_transposed() {
        let got = fortran_to_c(&[0, 1, 2, 3, 4, 5, 6, 7], &[2, 2, 2], 1);
        assert_eq!(got, [0, 4, 2, 6, 1, 5, 3, 7]);
    }
}
