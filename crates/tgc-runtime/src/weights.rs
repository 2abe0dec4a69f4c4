//! The weight sources that read tensor files ([`crate::model::WeightSource`]):
//! [`Safetensors`], the tensors of a `.safetensors` file (in memory or on
//! disk) by name, and [`Npy`], a folder of `.npy` files, one per weight.
//!
//! Each reads a tensor's header first and checks its dtype and shape
//! against the weight's [`WeightSpec`] before it reads the data. Every
//! error names the file (when there is one), the tensor and the weight: a
//! tensor of another dtype or shape is [`Error::ShapeMismatch`] with the
//! weight's `name: dtype[shape]` as expected and the tensor's
//! `dtype[shape]` as found; a missing file is [`Error::Io`]; a missing
//! tensor or a malformed file [`Error::Format`] (the readers of
//! [`crate::npy`] and [`crate::safetensors_io`]). As `tgc run` reads them,
//! f64 and i64 tensors are read as f32 and i32, so an f32 weight may come
//! from an f64 file.

use std::io::{Read, Seek};
use std::path::PathBuf;

use crate::input::Pending;
use crate::model::{WeightSource, WeightSpec};
use crate::{Error, Result};

/// Where a [`Safetensors`] source reads its tensors.
enum Tensors<'a> {
    /// A whole file's bytes.
    Bytes(&'a [u8]),
    /// A file, opened for each weight (its header, then that weight's data).
    File(PathBuf),
}

/// The tensors of a `.safetensors` file, found by the weight's name (or by
/// the name [`Safetensors::rename`] maps it to). A tensor must have the
/// weight's dtype and shape (f64 and i64 tensors are read as f32 and i32).
pub struct Safetensors<'a> {
    tensors: Tensors<'a>,
    rename: Box<dyn Fn(&str) -> String + 'a>,
}

impl<'a> Safetensors<'a> {
    /// A source over the bytes of a whole `.safetensors` file; each weight
    /// is the tensor of its own name.
    pub fn new(bytes: &'a [u8]) -> Safetensors<'a> {
        Safetensors { tensors: Tensors::Bytes(bytes), rename: Box::new(str::to_string) }
    }

    /// A source over the `.safetensors` file at `path`, read when the model
    /// loads: for each weight the file's header, then that tensor's data
    /// and no other (nothing is read here).
    pub fn file(path: impl Into<PathBuf>) -> Safetensors<'a> {
        Safetensors { tensors: Tensors::File(path.into()), rename: Box::new(str::to_string) }
    }

    /// Reads weight `w` from the tensor named `map(w)`.
    pub fn rename(mut self, map: impl Fn(&str) -> String + 'a) -> Safetensors<'a> {
        self.rename = Box::new(map);
        self
    }
}

impl WeightSource for Safetensors<'_> {
    fn fill(&mut self, spec: &WeightSpec, dst: &mut [u8]) -> Result<()> {
        let name = (self.rename)(spec.name);
        match &self.tensors {
            Tensors::Bytes(bytes) => {
                let t = crate::safetensors_io::open_safetensors_bytes(bytes, &name)?;
                load(t, &format!("tensor `{name}`"), spec, dst)
            }
            Tensors::File(path) => {
                let t = crate::safetensors_io::open_safetensors(path, &name)?;
                load(t, &format!("tensor `{name}` of `{}`", path.display()), spec, dst)
            }
        }
    }
}

/// Weights from a folder of `.npy` files: weight `w` from `DIR/w.npy`, or
/// from the file [`Npy::rename`] names (relative to the folder). A file
/// must hold the weight's dtype and shape (f64 and i64 data are read as
/// f32 and i32; Fortran order is read as row-major).
pub struct Npy<'a> {
    dir: PathBuf,
    file: Box<dyn Fn(&str) -> String + 'a>,
}

impl<'a> Npy<'a> {
    /// The `.npy` files of folder `dir`, `<weight>.npy` each; nothing is
    /// read until the model loads.
    pub fn dir(dir: impl Into<PathBuf>) -> Npy<'a> {
        Npy { dir: dir.into(), file: Box::new(|w| format!("{w}.npy")) }
    }

    /// Reads weight `w` from the file `map(w)` of the folder (e.g. `|w|
    /// format!("encoder.{w}.npy")`).
    pub fn rename(mut self, map: impl Fn(&str) -> String + 'a) -> Npy<'a> {
        self.file = Box::new(map);
        self
    }

    /// The file weight `weight` is read from.
    pub fn path(&self, weight: &str) -> PathBuf {
        self.dir.join((self.file)(weight))
    }
}

impl WeightSource for Npy<'_> {
    fn fill(&mut self, spec: &WeightSpec, dst: &mut [u8]) -> Result<()> {
        let path = self.path(spec.name);
        load(crate::npy::open_npy(&path)?, &format!("`{}`", path.display()), spec, dst)
    }
}

/// Checks tensor `t` (`what`, for the message) against weight `spec`, then
/// reads its data into `dst` (`spec.bytes()` long).
///
/// Errors: [`Error::ShapeMismatch`] for another dtype or shape; the
/// reader's error for the data.
fn load<R: Read + Seek>(t: Pending<R>, what: &str, spec: &WeightSpec, dst: &mut [u8]) -> Result<()> {
    if t.dtype() != spec.dtype || t.shape() != spec.shape {
        return Err(Error::ShapeMismatch {
            what: format!("{what} for weight `{}`", spec.name),
            expected: spec.describe(),
            got: format!("{}{:?}", t.dtype(), t.shape()),
        });
    }
    dst.copy_from_slice(t.read()?.bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ConstPool;
    use crate::test_util::TempDir;
    use crate::{DType, HostTensor};

    static SPECS: [WeightSpec; 2] = [
        WeightSpec { name: "w", dtype: DType::F32, shape: &[2, 3] },
        WeightSpec { name: "m", dtype: DType::Bool, shape: &[2] },
    ];

    fn w() -> HostTensor {
        HostTensor::from_f64(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap()
    }

    fn m() -> HostTensor {
        HostTensor::from_f64(DType::Bool, &[2], &[1.0, 0.0]).unwrap()
    }

    #[test]
    fn npy_files_by_weight_name() {
        let dir = TempDir::new("weights-npy");
        crate::npy::write_npy(dir.path().join("w.npy"), &w()).unwrap();
        crate::npy::write_npy(dir.path().join("m.npy"), &m()).unwrap();
        let pool = ConstPool::load(&SPECS, &mut Npy::dir(dir.path())).unwrap();
        assert_eq!(pool.get::<f32>(0), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(pool.get::<bool>(1), [true, false]);
        // Renamed files; an f64 file read as the f32 weight.
        let wide = HostTensor::from_f64(DType::F32, &[2, 3], &[0.5; 6]).unwrap();
        std::fs::write(dir.path().join("layer.w.npy"), f64_npy(&wide)).unwrap();
        let mut src = Npy::dir(dir.path()).rename(|n| format!("layer.{n}.npy"));
        assert_eq!(src.path("w"), dir.path().join("layer.w.npy"));
        let pool = ConstPool::load(&SPECS[..1], &mut src).unwrap();
        assert_eq!(pool.get::<f32>(0), [0.5; 6]);
    }

    /// The bytes of a `<f8` `.npy` file holding `t`'s values.
    fn f64_npy(t: &HostTensor) -> Vec<u8> {
        let dims: Vec<String> = t.shape().iter().map(|d| format!("{d}, ")).collect();
        let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({}), }}", dims.concat());
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend((header.len() as u16).to_le_bytes());
        out.extend(header.bytes());
        out.extend(t.to_f64_vec().iter().flat_map(|v| v.to_le_bytes()));
        out
    }

    #[test]
    fn npy_errors_name_the_file_the_weight_and_both_shapes() {
        let dir = TempDir::new("weights-npy-bad");
        let file = dir.path().join("w.npy");
        let transposed = HostTensor::from_f64(DType::F32, &[3, 2], &[0.0; 6]).unwrap();
        crate::npy::write_npy(&file, &transposed).unwrap();
        let e = ConstPool::load(&SPECS[..1], &mut Npy::dir(dir.path())).unwrap_err();
        let want = format!("`{}` for weight `w`: expected w: f32[2, 3], got f32[3, 2]", file.display());
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
        assert_eq!(e.to_string(), want);
        let ints = HostTensor::from_f64(DType::I32, &[2, 3], &[0.0; 6]).unwrap();
        crate::npy::write_npy(&file, &ints).unwrap();
        let e = ConstPool::load(&SPECS[..1], &mut Npy::dir(dir.path())).unwrap_err();
        assert!(e.to_string().ends_with("expected w: f32[2, 3], got i32[2, 3]"), "{e}");
        let e = ConstPool::load(&SPECS[1..], &mut Npy::dir(dir.path())).unwrap_err();
        let missing = dir.path().join("m.npy");
        assert!(matches!(&e, Error::Io(msg) if msg.contains(&format!("`{}`", missing.display()))), "{e}");
        std::fs::write(&missing, b"not an array").unwrap();
        let e = ConstPool::load(&SPECS[1..], &mut Npy::dir(dir.path())).unwrap_err();
        assert!(matches!(&e, Error::Format(msg) if msg.contains(&missing.display().to_string())), "{e}");
    }

    #[test]
    fn safetensors_by_name_checks_dtype_and_shape() {
        let tensors = [("layer.w".to_string(), w()), ("layer.m".to_string(), m())];
        let bytes = crate::safetensors_io::to_safetensors(&tensors, &[]).unwrap();
        let dir = TempDir::new("weights-safetensors");
        let file = dir.path().join("model.safetensors");
        std::fs::write(&file, &bytes).unwrap();
        let layer = |n: &str| format!("layer.{n}");
        for mut src in [Safetensors::new(&bytes).rename(layer), Safetensors::file(&file).rename(layer)] {
            let pool = ConstPool::load(&SPECS, &mut src).unwrap();
            assert_eq!(pool.get::<f32>(0), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
            assert_eq!(pool.get::<bool>(1), [true, false]);
        }
        static WIDE: [WeightSpec; 1] = [WeightSpec { name: "w", dtype: DType::F32, shape: &[3, 2] }];
        let e = ConstPool::load(&WIDE, &mut Safetensors::new(&bytes).rename(layer)).unwrap_err();
        assert_eq!(e.to_string(), "tensor `layer.w` for weight `w`: expected w: f32[3, 2], got f32[2, 3]");
        let e = ConstPool::load(&WIDE, &mut Safetensors::file(&file).rename(layer)).unwrap_err();
        let want =
            format!("tensor `layer.w` of `{}` for weight `w`: expected w: f32[3, 2], got f32[2, 3]", file.display());
        assert_eq!(e.to_string(), want);
        let e = ConstPool::load(&WIDE, &mut Safetensors::new(&bytes)).unwrap_err();
        assert!(matches!(&e, Error::Format(m) if m.contains("no tensor `w`")), "{e}");
        let e = ConstPool::load(&WIDE, &mut Safetensors::file(&file)).unwrap_err();
        assert!(
            matches!(&e, Error::Format(m) if m.contains("no tensor `w`") && m.contains(&file.display().to_string())),
            "{e}"
        );
    }
}
