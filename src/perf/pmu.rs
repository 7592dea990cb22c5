//! The kernel's types of perf events that place a uprobe: the `uprobe`
//! PMU's (read from sysfs) and tracepoints (tracefs-defined uprobes).
//! Below `uprobe.rs`, `tracefs.rs` and `keeper.rs`, which all ask.

/// The `type` of events on a tracepoint (a tracefs definition's id).
pub(crate) const PERF_TYPE_TRACEPOINT: u32 = 2;

/// The uprobe PMU's directory in sysfs.
pub(super) const PMU: &str = "/sys/bus/event_source/devices/uprobe";

/// Where pgdbg runs, nothing is mounted at /sys (a container made
/// without it): the uprobe PMU's type, which the kernel gives only there,
/// cannot be read, whether or not the kernel has the PMU.
#[derive(Debug, thiserror::Error)]
#[error(
    "{PMU}/type cannot be read: no sysfs is mounted at /sys here (a container made without \
     it); mount it (mount -t sysfs -o ro sysfs /sys; container runtimes mount it by default)"
)]
pub struct NoSysfs;

/// The uprobe PMU's type (its `type` file; ENOENT when unreadable as a
/// number, ENOENT carrying [`NoSysfs`] when no sysfs is mounted).
pub fn pmu_type() -> std::io::Result<u32> {
    std::fs::read_to_string(format!("{PMU}/type"))
        .map_err(|e| {
            // a mounted sysfs always has /sys/bus
            if e.kind() == std::io::ErrorKind::NotFound
                && !std::path::Path::new("/sys/bus").exists()
            {
                std::io::Error::new(std::io::ErrorKind::NotFound, NoSysfs)
            } else {
                e
            }
        })?
        .trim()
        .parse()
        .map_err(|_| std::io::Error::from_raw_os_error(libc::ENOENT))
}

/// The [`NoSysfs`] that `err` carries, if any.
pub fn no_sysfs(err: &std::io::Error) -> Option<&NoSysfs> {
    err.get_ref()?.downcast_ref::<NoSysfs>()
}
