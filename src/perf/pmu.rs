//! The kernel's types of perf events that place a uprobe: the `uprobe`
//! PMU's (read from sysfs) and tracepoints (tracefs-defined uprobes).
//! Below `uprobe.rs`, `tracefs.rs` and `keeper.rs`, which all ask.

/// The `type` of events on a tracepoint (a tracefs definition's id).
pub(crate) const PERF_TYPE_TRACEPOINT: u32 = 2;

/// The uprobe PMU's directory in sysfs.
pub(super) const PMU: &str = "/sys/bus/event_source/devices/uprobe";

/// The uprobe PMU's type (its `type` file; ENOENT when unreadable as a
/// number).
pub fn pmu_type() -> std::io::Result<u32> {
    std::fs::read_to_string(format!("{PMU}/type"))?
        .trim()
        .parse()
        .map_err(|_| std::io::Error::from_raw_os_error(libc::ENOENT))
}
