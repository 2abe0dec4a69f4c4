//! The object cache: kernel libraries and objects that tgc compiled, kept
//! in a folder under a hash of everything that decides their bytes, so
//! compiling the same C again with the same compiler and flags is a lookup.
//!
//! - An entry's name is its key ([`ObjectCache::key`]): the SHA-256 of the
//!   C source, the compiler command as written (`$CC`), the compiler's
//!   `--version` output and the flags, each part length-prefixed, in hex.
//!   A changed source, compiler or flag is a new key; nothing is looked up
//!   by any other name.
//! - The folder ([`ObjectCache::from_env`]) is `$TGC_CACHE_DIR`, else
//!   `$XDG_CACHE_HOME/tgc`, else `$HOME/.cache/tgc`; `TGC_CACHE_DIR` set
//!   and empty turns the cache off. It is created with mode `0o700` and
//!   refused when it is not a folder owned by this user or when its group
//!   or others can write it: a library loaded from it must be one this user
//!   built, and another user who can add or rename files there could swap
//!   in theirs.
//! - An entry is built under a temporary name in the folder, given mode
//!   `0o700` and renamed into place ([`ObjectCache::store`]): a reader sees
//!   a whole entry or none, and two processes building the same key both
//!   succeed. An entry is used only when it is a plain file (not a link)
//!   owned by this user that its group and others cannot write
//!   ([`ObjectCache::lookup`]).
//! - Nothing is evicted: the folder can be deleted at any time, and the
//!   next compile fills it again.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// The variable that names the cache folder (empty: no cache).
pub const CACHE_DIR_VAR: &str = "TGC_CACHE_DIR";

/// An open cache folder whose owner and mode were checked; see the module
/// doc.
#[derive(Clone, Debug)]
pub struct ObjectCache {
    dir: PathBuf,
}

impl ObjectCache {
    /// The user's cache: the folder the environment names (module doc),
    /// opened by [`ObjectCache::open`]; `None` when `TGC_CACHE_DIR` is set
    /// and empty, or when none of the three variables gives a folder
    /// (`XDG_CACHE_HOME` counts only when absolute, as the XDG base
    /// directory specification says).
    ///
    /// Errors: as [`ObjectCache::open`]; the message says how to turn the
    /// cache off.
    pub fn from_env() -> Result<Option<ObjectCache>> {
        let var = |name: &str| std::env::var_os(name);
        match location(var(CACHE_DIR_VAR), var("XDG_CACHE_HOME"), var("HOME")) {
            Some(dir) => ObjectCache::open(&dir)
                .map(Some)
                .map_err(|e| Error::Io(format!("{e} (set {CACHE_DIR_VAR}= to compile without the object cache)"))),
            None => Ok(None),
        }
    }

    /// Opens the cache folder `dir`, creating it (mode `0o700`, its parents
    /// as `create_dir_all` makes them) when it does not exist.
    ///
    /// Errors: [`Error::Io`] when `dir` cannot be created, is not a folder,
    /// is owned by another user, or can be written by its group or others.
    pub fn open(dir: &Path) -> Result<ObjectCache> {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::io("create the cache folder's parent", parent, e))?;
        }
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        match builder.create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io("create the cache folder", dir, e)),
        }
        let meta = std::fs::metadata(dir).map_err(|e| Error::io("read the cache folder", dir, e))?;
        if !meta.is_dir() {
            return Err(Error::Io(format!("the cache folder `{}` is not a folder", dir.display())));
        }
        private(dir, &meta, "cache folder")?;
        Ok(ObjectCache { dir: dir.to_path_buf() })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of an entry built from `parts` (source, compiler, version,
    /// flags: whatever decides its bytes): 64 hex digits.
    pub fn key(parts: &[&[u8]]) -> String {
        let mut hash = Sha256::new();
        hash.update(b"tgc object cache 1\0");
        for part in parts {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
        hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The path of entry `key` with extension `ext` (`so`, `o`, `c`).
    pub fn path(&self, key: &str, ext: &str) -> PathBuf {
        self.dir.join(format!("{key}.{ext}"))
    }

    /// The entry `key.ext` when the cache holds it.
    ///
    /// Errors: [`Error::Io`] when the entry exists but is a link or another
    /// non-file, belongs to another user, or can be written by its group or
    /// others (it is not used then: remove it, or the folder).
    pub fn lookup(&self, key: &str, ext: &str) -> Result<Option<PathBuf>> {
        let path = self.path(key, ext);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read the cache entry", &path, e)),
        };
        if !meta.file_type().is_file() {
            return Err(Error::Io(format!("the cache entry `{}` is not a plain file", path.display())));
        }
        private(&path, &meta, "cache entry")?;
        Ok(Some(path))
    }

    /// A fresh temporary name in the folder for building entry `key.ext`
    /// (then [`ObjectCache::store`] it), unique in this process and among
    /// processes.
    pub fn partial(&self, key: &str, ext: &str) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!("{key}.{ext}.{}-{n}.partial", std::process::id()))
    }

    /// Moves the file `built` (in the folder, from [`ObjectCache::partial`])
    /// into place as entry `key.ext`, mode `0o700`, and returns its path.
    ///
    /// Errors: [`Error::Io`] when the mode cannot be set or the rename fails
    /// (`built` is removed then).
    pub fn store(&self, built: &Path, key: &str, ext: &str) -> Result<PathBuf> {
        let path = self.path(key, ext);
        let moved = set_private(built).and_then(|()| std::fs::rename(built, &path));
        moved.map_err(|e| {
            let _ = std::fs::remove_file(built);
            Error::io("store the cache entry", &path, e)
        })?;
        Ok(path)
    }
}

/// The cache folder the variables name (module doc), from the values of
/// `TGC_CACHE_DIR`, `XDG_CACHE_HOME` and `HOME`.
fn location(tgc: Option<OsString>, xdg: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    if let Some(dir) = tgc {
        return (!dir.is_empty()).then(|| PathBuf::from(dir));
    }
    if let Some(xdg) = xdg.map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Some(xdg.join("tgc"));
    }
    home.filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".cache").join("tgc"))
}

/// Checks that `path` (of metadata `meta`, a `what`) is owned by this user
/// and cannot be written by its group or others.
#[cfg(unix)]
fn private(path: &Path, meta: &std::fs::Metadata, what: &str) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(Error::Io(format!(
            "the {what} `{}` belongs to user {}, not to this user ({me})",
            path.display(),
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Error::Io(format!(
            "the {what} `{}` can be written by others (mode {:o}): make it private (chmod 700)",
            path.display(),
            meta.mode() & 0o777
        )));
    }
    Ok(())
}

/// Elsewhere the folder's owner and mode are not checked.
#[cfg(not(unix))]
fn private(_path: &Path, _meta: &std::fs::Metadata, _what: &str) -> Result<()> {
    Ok(())
}

/// Gives `path` mode `0o700` (on unix).
fn set_private(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::TempDir;

    #[test]
    fn the_folder_comes_from_the_variables_in_order() {
        let s = |v: &str| Some(OsString::from(v));
        assert_eq!(location(s("/c"), s("/x"), s("/h")), Some(PathBuf::from("/c")));
        assert_eq!(location(s(""), s("/x"), s("/h")), None);
        assert_eq!(location(None, s("/x"), s("/h")), Some(PathBuf::from("/x/tgc")));
        assert_eq!(location(None, s("rel"), s("/h")), Some(PathBuf::from("/h/.cache/tgc")));
        assert_eq!(location(None, None, s("/h")), Some(PathBuf::from("/h/.cache/tgc")));
        assert_eq!(location(None, None, s("")), None);
    }

    #[test]
    fn keys_differ_in_every_part_and_in_how_they_split() {
        let k = ObjectCache::key(&[b"int f;", b"cc", b"-O2"]);
        assert_eq!(k.len(), 64);
        assert_eq!(k, ObjectCache::key(&[b"int f;", b"cc", b"-O2"]));
        assert_ne!(k, ObjectCache::key(&[b"int g;", b"cc", b"-O2"]));
        assert_ne!(k, ObjectCache::key(&[b"int f;", b"cc", b"-O3"]));
        assert_ne!(k, ObjectCache::key(&[b"int f;c", b"c", b"-O2"]));
    }

    /// The folder is made private; entries are stored private and found.
    #[cfg(unix)]
    #[test]
    fn the_folder_and_its_entries_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = TempDir::new("objcache");
        let cache = ObjectCache::open(&tmp.path().join("a").join("tgc")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(cache.dir()), 0o700);
        assert_eq!(cache.lookup("k", "so").unwrap(), None);
        let built = cache.partial("k", "so");
        std::fs::write(&built, b"lib").unwrap();
        std::fs::set_permissions(&built, std::fs::Permissions::from_mode(0o666)).unwrap();
        let stored = cache.store(&built, "k", "so").unwrap();
        assert_eq!(cache.lookup("k", "so").unwrap(), Some(stored.clone()));
        assert_eq!(mode(&stored), 0o700);
        assert!(!built.exists());
    }

    /// A folder or an entry others can write is refused, and so is a link.
    #[cfg(unix)]
    #[test]
    fn what_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = TempDir::new("objcache-open");
        let dir = tmp.path().join("tgc");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = ObjectCache::open(&dir).unwrap_err().to_string();
        assert!(e.contains("can be written by others") && e.contains("777"), "{e}");

        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let cache = ObjectCache::open(&dir).unwrap();
        let entry = cache.path("k", "so");
        std::fs::write(&entry, b"lib").unwrap();
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o620)).unwrap();
        let e = cache.lookup("k", "so").unwrap_err().to_string();
        assert!(e.contains("can be written by others"), "{e}");

        let victim = tmp.path().join("victim.so");
        std::fs::write(&victim, b"lib").unwrap();
        std::os::unix::fs::symlink(&victim, cache.path("l", "so")).unwrap();
        let e = cache.lookup("l", "so").unwrap_err().to_string();
        assert!(e.contains("not a plain file"), "{e}");

        let file = tmp.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let e = ObjectCache::open(&file).unwrap_err().to_string();
        assert!(e.contains("is not a folder"), "{e}");
    }

    /// A folder of another user is refused (only root can make one here).
    #[cfg(unix)]
    #[test]
    fn a_folder_of_another_user_is_refused() {
        // SAFETY: `geteuid` has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let tmp = TempDir::new("objcache-owner");
        let dir = tmp.path().join("tgc");
        ObjectCache::open(&dir).unwrap();
        let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
        let e = ObjectCache::open(&dir).unwrap_err().to_string();
        assert!(e.contains("belongs to user 65534"), "{e}");
    }
}
