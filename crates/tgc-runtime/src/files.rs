//! How tgc writes files: every file it makes is written whole or not at
//! all ([`write_atomic`]), and the kernels it compiles for itself live in a
//! fresh private folder ([`scratch_dir`]) that goes away after the command.
//!
//! A folder under the shared temp root with a name another user can guess
//! (`/tmp/tgc-run-<pid>`) could be planted in advance with a link named as
//! a file tgc writes, making tgc overwrite a file of the victim's, or with a
//! library swapped in between build and load; a file rewritten in place is
//! torn for a reader, and truncated when the writer is killed part way.

use std::io::Write;
use std::path::Path;

pub use tempfile::TempDir;

/// Writes `bytes` to `path` as one step for every reader: to a new file of a
/// random name (`.tgc-XXXXXX.partial`) in `path`'s folder, then renamed over
/// `path`. A reader sees the old file or the new one, never part of one; a
/// writer killed part way leaves the old file as it was (and the partial
/// file beside it); a link at `path` is replaced, not followed. The new file
/// has mode `0o666` less the umask, as `File::create` gives. No `fsync`: the
/// rename is atomic for processes, not against a power cut.
///
/// Errors: the folder cannot be written, or the rename fails (the partial
/// file is removed then).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".tgc-").suffix(".partial");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut file = builder.tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// A new folder `tgc-<label>-XXXXXX` (random letters) under the temp root
/// (`$TMPDIR`, else `/tmp`), mode `0o700`, removed with everything in it when
/// the returned value drops. It is created by one `mkdir`, which fails on a
/// name that exists (a planted folder or link is never reused), and only its
/// owner can add or swap files in it: a library built there is the one loaded.
///
/// Errors: the folder cannot be created.
pub fn scratch_dir(label: &str) -> std::io::Result<TempDir> {
    let prefix = format!("tgc-{label}-");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    builder.tempdir()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link planted at the path is replaced, and the file it points to is
    /// left as it was (`std::fs::write` followed the link).
    #[cfg(unix)]
    #[test]
    fn a_link_at_the_path_is_replaced_not_followed() {
        let dir = scratch_dir("files-test").unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"mine").unwrap();
        let path = dir.path().join("out.bin");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write_atomic(&path, b"generated").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"mine");
        assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_file());
        assert_eq!(std::fs::read(&path).unwrap(), b"generated");
    }

    /// The new content goes to a new file: a reader that opened the old one
    /// reads it whole, and no partial file is left.
    #[test]
    fn the_old_file_stays_whole_for_a_reader() {
        use std::io::Read;
        let dir = scratch_dir("files-test").unwrap();
        let path = dir.path().join("y.npy");
        write_atomic(&path, &[1u8; 4096]).unwrap();
        let mut reader = std::fs::File::open(&path).unwrap();
        write_atomic(&path, &[2u8; 100]).unwrap();
        let mut old = Vec::new();
        reader.read_to_end(&mut old).unwrap();
        assert_eq!(old, vec![1u8; 4096]);
        assert_eq!(std::fs::read(&path).unwrap(), vec![2u8; 100]);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["y.npy"]);
    }

    /// Each scratch folder is new, private and gone after the drop.
    #[cfg(unix)]
    #[test]
    fn scratch_folders_are_fresh_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let a = scratch_dir("files-test").unwrap();
        let b = scratch_dir("files-test").unwrap();
        assert_ne!(a.path(), b.path());
        let name = a.path().file_name().unwrap().to_str().unwrap().to_string();
        assert!(name.starts_with("tgc-files-test-") && name.len() > "tgc-files-test-".len(), "{name}");
        assert_eq!(std::fs::metadata(a.path()).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::write(a.path().join("k.c"), b"x").unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists());
    }
}
