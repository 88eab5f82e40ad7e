//! Disk space: usage of the store's folder and the check an operation makes before
//! it allocates (quota and file-system free space).

use super::error::{Result, StoreError};
use super::Store;
use std::io::ErrorKind;
use std::path::Path;

/// Sum of the lengths of all files under `dir` (recursively). Files that vanish while
/// it walks (a concurrent garbage collection) count as 0.
pub(crate) fn usage(dir: &Path) -> Result<u64> {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(StoreError::io("list", &d, 0, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io("list", &d, 0, e))?;
            match entry.path().symlink_metadata() {
                Ok(m) if m.is_dir() => stack.push(entry.path()),
                Ok(m) => total = total.saturating_add(m.len()),
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("stat", &entry.path(), 0, e)),
            }
        }
    }
    Ok(total)
}

impl Store {
    /// Bytes still available: the lesser of the quota left and the file system's free
    /// space.
    pub(crate) fn available(&self) -> Result<u64> {
        let fs_free = fs2::available_space(&self.dir).unwrap_or(u64::MAX);
        let quota_left = match self.config.quota_bytes {
            Some(q) => q.saturating_sub(usage(&self.dir)?),
            None => u64::MAX,
        };
        Ok(fs_free.min(quota_left))
    }

    /// [`StoreError::DiskFull`] unless `needed` more bytes fit.
    pub(crate) fn ensure_space(&self, needed: u64) -> Result<()> {
        let available = self.available()?;
        if needed > available {
            return Err(StoreError::DiskFull { needed, available });
        }
        Ok(())
    }
}
