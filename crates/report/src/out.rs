//! Where outputs go: every file and directory plumb writes a result into is made here, new,
//! never through a symbolic link and never over something that was there. Checks run before
//! the work does (a missing directory is found before a ten-minute sweep, not after), and a
//! file is reserved up front and removed again when the work does not finish.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// An output problem, named after the flag that gave the path.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {}: {message}", path.display())]
pub struct OutError {
    pub flag: String,
    pub path: PathBuf,
    pub message: String,
}

fn fail(flag: &str, path: &Path, message: impl Into<String>) -> OutError {
    OutError {
        flag: flag.to_string(),
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Check that a new file can go at `path`: nothing there (not even a link), its directory
/// exists. Nothing is created.
pub fn check_new_file(flag: &str, path: &Path) -> Result<(), OutError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(fail(
                flag,
                path,
                "a symbolic link is there; plumb writes only new files and follows no links",
            ))
        }
        Ok(m) if m.is_dir() => {
            return Err(fail(flag, path, "a directory; give a file name"));
        }
        Ok(_) => {
            return Err(fail(
                flag,
                path,
                "exists; plumb does not overwrite files (remove it, or choose another name)",
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(flag, path, e.to_string())),
    }
    let parent = parent_of(path);
    match std::fs::metadata(parent) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(fail(
            flag,
            path,
            format!("{} is not a directory", parent.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(fail(
            flag,
            path,
            format!(
                "the directory {} does not exist (plumb does not create it)",
                parent.display()
            ),
        )),
        Err(e) => Err(fail(flag, path, format!("{}: {e}", parent.display()))),
    }
}

/// Create a new file (O_EXCL, O_NOFOLLOW): fails when anything is at `path`.
pub fn create_new(flag: &str, path: &Path) -> Result<File, OutError> {
    check_new_file(flag, path)?;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| fail(flag, path, e.to_string()))
}

/// Write a whole new file; a partial one is removed when writing fails.
pub fn write_new(flag: &str, path: &Path, bytes: &[u8]) -> Result<(), OutError> {
    let mut f = create_new(flag, path)?;
    if let Err(e) = f.write_all(bytes).and_then(|_| f.flush()) {
        drop(f);
        let _ = std::fs::remove_file(path);
        return Err(fail(flag, path, e.to_string()));
    }
    Ok(())
}

/// A new file reserved before the work that fills it: created empty now (so a bad path fails
/// at once), filled by [`Reserved::fill`], and removed if dropped unfilled.
#[derive(Debug)]
pub struct Reserved {
    flag: String,
    path: PathBuf,
    file: Option<File>,
}

impl Reserved {
    pub fn new(flag: &str, path: &Path) -> Result<Reserved, OutError> {
        let file = create_new(flag, path)?;
        Ok(Reserved {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            file: Some(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write the content; the file is kept.
    pub fn fill(mut self, bytes: &[u8]) -> Result<PathBuf, OutError> {
        let mut f = self.file.take().expect("filled once");
        match f.write_all(bytes).and_then(|_| f.flush()) {
            Ok(()) => Ok(self.path.clone()),
            Err(e) => {
                drop(f);
                let _ = std::fs::remove_file(&self.path);
                Err(fail(&self.flag, &self.path, e.to_string()))
            }
        }
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// An output directory: made new (its parent must exist), or an existing empty one that is
/// not a link. `created` says which, so a failed run removes only what it made.
#[derive(Debug, Clone)]
pub struct OutDir {
    pub path: PathBuf,
    pub created: bool,
}

/// Check that an output directory can be used, without creating it.
pub fn check_out_dir(flag: &str, path: &Path) -> Result<(), OutError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(fail(
            flag,
            path,
            "a symbolic link; give the real directory (plumb follows no links for its outputs)",
        )),
        Ok(m) if !m.is_dir() => Err(fail(flag, path, "exists and is not a directory")),
        Ok(_) => {
            let empty = std::fs::read_dir(path)
                .map_err(|e| fail(flag, path, e.to_string()))?
                .next()
                .is_none();
            if empty {
                Ok(())
            } else {
                Err(fail(
                    flag,
                    path,
                    "exists and is not empty; plumb never writes into a directory with files in it",
                ))
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let parent = parent_of(path);
            if parent.is_dir() {
                Ok(())
            } else {
                Err(fail(
                    flag,
                    path,
                    format!(
                        "the directory {} does not exist (plumb creates only the last one)",
                        parent.display()
                    ),
                ))
            }
        }
        Err(e) => Err(fail(flag, path, e.to_string())),
    }
}

/// Make (or take, when empty) the output directory.
pub fn out_dir(flag: &str, path: &Path) -> Result<OutDir, OutError> {
    check_out_dir(flag, path)?;
    match std::fs::DirBuilder::new().mode(0o755).create(path) {
        Ok(()) => Ok(OutDir {
            path: path.to_path_buf(),
            created: true,
        }),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            check_out_dir(flag, path)?;
            Ok(OutDir {
                path: path.to_path_buf(),
                created: false,
            })
        }
        Err(e) => Err(fail(flag, path, e.to_string())),
    }
}

impl OutDir {
    /// Remove what plumb wrote here: the named files, and the directory when plumb made it.
    pub fn remove(&self, files: &[&str]) {
        for f in files {
            let p = self.path.join(f);
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                let _ = std::fs::remove_file(&p);
            }
        }
        if self.created {
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_over_a_file_a_link_or_into_a_missing_directory() {
        let d = tempfile::tempdir().unwrap();
        let user = d.path().join("user.svg");
        std::fs::write(&user, "mine").unwrap();
        let e = write_new("--chart", &user, b"x").unwrap_err();
        assert!(e.to_string().starts_with("--chart "), "{e}");
        assert!(e.to_string().contains("exists"), "{e}");
        assert_eq!(std::fs::read_to_string(&user).unwrap(), "mine");

        let link = d.path().join("link.svg");
        std::os::unix::fs::symlink(&user, &link).unwrap();
        assert!(write_new("--chart", &link, b"x")
            .unwrap_err()
            .to_string()
            .contains("symbolic link"));
        // A dangling link is a link too.
        let dangling = d.path().join("dangling.svg");
        std::os::unix::fs::symlink(d.path().join("nowhere"), &dangling).unwrap();
        assert!(write_new("--chart", &dangling, b"x").is_err());
        assert!(!d.path().join("nowhere").exists());
        assert_eq!(std::fs::read_to_string(&user).unwrap(), "mine");

        let missing = d.path().join("no/such/dir/c.svg");
        assert!(check_new_file("--chart", &missing)
            .unwrap_err()
            .to_string()
            .contains("does not exist"));

        // A reserved file goes again when the work does not finish.
        let r = Reserved::new("--chart", &d.path().join("new.svg")).unwrap();
        assert!(d.path().join("new.svg").exists());
        drop(r);
        assert!(!d.path().join("new.svg").exists());
        let r = Reserved::new("--chart", &d.path().join("new.svg")).unwrap();
        r.fill(b"<svg/>").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("new.svg")).unwrap(),
            "<svg/>"
        );
    }

    #[test]
    fn output_directories_are_new_or_empty_and_never_links() {
        let d = tempfile::tempdir().unwrap();
        let full = d.path().join("full");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("keep"), "x").unwrap();
        assert!(out_dir("--out", &full).is_err());
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path().join("empty"), &link).unwrap();
        std::fs::create_dir(d.path().join("empty")).unwrap();
        assert!(out_dir("--out", &link)
            .unwrap_err()
            .to_string()
            .contains("symbolic link"));
        let o = out_dir("--out", &d.path().join("empty")).unwrap();
        assert!(!o.created);
        std::fs::write(o.path.join("index.html"), "x").unwrap();
        o.remove(&["index.html"]);
        assert!(d.path().join("empty").is_dir());
        let o = out_dir("--out", &d.path().join("new")).unwrap();
        assert!(o.created);
        o.remove(&[]);
        assert!(!d.path().join("new").exists());
        assert!(out_dir("--out", &d.path().join("a/b")).is_err());
        assert!(!d.path().join("a").exists());
    }
}
