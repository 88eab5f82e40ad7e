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

    /// [`StoreError::DiskFull`] unless `needed` more bytes fit, after deleting every
    /// deal's spare run files ([`super::spares`]) if they did not fit beside them.
    pub(crate) fn ensure_space(&self, needed: u64) -> Result<()> {
        let mut available = self.available()?;
        if needed > available && self.remove_spares() > 0 {
            available = self.available()?;
        }
        if needed > available {
            return Err(StoreError::DiskFull { needed, available });
        }
        Ok(())
    }

    /// Deletes the spare run files of every deal ([`super::spares`]); returns the
    /// bytes freed. Failures are logged.
    fn remove_spares(&self) -> u64 {
        let Ok(entries) = std::fs::read_dir(self.deals_dir()) else { return 0 };
        entries.flatten().filter(|e| e.path().is_dir()).map(|e| super::spares::remove_over(&e.path(), 0)).fold(0u64, u64::saturating_add)
    }
}
