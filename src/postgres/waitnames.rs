//! Names of wait-event values without asking the backend (it runs on,
//! never stopped: `profile --off-cpu`), as pg_stat_activity shows them,
//! in this order:
//!
//! 1. the names the backend itself gave an earlier pgdbg command (the
//!    per-build cache of [`WaitNames`]);
//! 2. `Lock` and `LWLock`: PostgreSQL's own name arrays read from the
//!    backend's memory (`LockTagTypeNames`, and `IndividualLWLockNames`
//!    / `BuiltinTrancheNames` for the built-in tranches; a tranche an
//!    extension registered is not named);
//! 3. the other classes: the debug info's wait-event enums give the class
//!    (the enum the value belongs to) and the enumerator.  Since
//!    PostgreSQL 17 the name pg_stat_activity shows is generated from the
//!    enumerator (`WAIT_EVENT_DATA_FILE_READ` is `DataFileRead`: every
//!    underscore-separated word capitalized); before 17 the names were
//!    written by hand, the same way except for [`HAND_WRITTEN`] (checked
//!    against every value of a 15 build as that backend names them; 13, 14
//!    and 16 enumerators 15 lacks are named the 17 way).
//!
//! A value none of these names is shown by its number.

use super::waits::WaitNames;
use crate::debuginfo::DebugInfo;
use crate::debuginfo::types::{Type, TypeSource, strip};

/// Before PostgreSQL 17: the names that are not the enumerator's words
/// capitalized (enumerator without `WAIT_EVENT_`, name).
pub const HAND_WRITTEN: &[(&str, &str)] = &[
    ("AUTOVACUUM_MAIN", "AutoVacuumMain"),
    ("BGWRITER_HIBERNATE", "BgWriterHibernate"),
    ("BGWRITER_MAIN", "BgWriterMain"),
    ("SYSLOGGER_MAIN", "SysLoggerMain"),
    ("GSS_OPEN_SERVER", "GSSOpenServer"),
    ("LIBPQWALRECEIVER_CONNECT", "LibPQWalReceiverConnect"),
    ("LIBPQWALRECEIVER_RECEIVE", "LibPQWalReceiverReceive"),
    ("SSL_OPEN_SERVER", "SSLOpenServer"),
    ("WAL_SENDER_WAIT_WAL", "WalSenderWaitForWAL"),
    ("BGWORKER_SHUTDOWN", "BgWorkerShutdown"),
    ("BGWORKER_STARTUP", "BgWorkerStartup"),
    ("BUFFER_IO", "BufferIO"),
    ("MQ_INTERNAL", "MessageQueueInternal"),
    ("MQ_PUT_MESSAGE", "MessageQueuePutMessage"),
    ("MQ_RECEIVE", "MessageQueueReceive"),
    ("MQ_SEND", "MessageQueueSend"),
    ("PROCARRAY_GROUP_UPDATE", "ProcArrayGroupUpdate"),
    ("BASEBACKUP_READ", "BaseBackupRead"),
    ("BASEBACKUP_SYNC", "BaseBackupSync"),
    ("BASEBACKUP_WRITE", "BaseBackupWrite"),
    ("BUFFILE_READ", "BufFileRead"),
    ("BUFFILE_WRITE", "BufFileWrite"),
    ("BUFFILE_TRUNCATE", "BufFileTruncate"),
    ("DSM_FILL_ZERO_WRITE", "DSMFillZeroWrite"),
    ("LOCK_FILE_ADDTODATADIR_READ", "LockFileAddToDataDirRead"),
    ("LOCK_FILE_ADDTODATADIR_SYNC", "LockFileAddToDataDirSync"),
    ("LOCK_FILE_ADDTODATADIR_WRITE", "LockFileAddToDataDirWrite"),
    (
        "LOCK_FILE_RECHECKDATADIR_READ",
        "LockFileReCheckDataDirRead",
    ),
    ("SLRU_FLUSH_SYNC", "SLRUFlushSync"),
    ("SLRU_READ", "SLRURead"),
    ("SLRU_SYNC", "SLRUSync"),
    ("SLRU_WRITE", "SLRUWrite"),
    (
        "WALSENDER_TIMELINE_HISTORY_READ",
        "WALSenderTimelineHistoryRead",
    ),
    ("WAL_BOOTSTRAP_SYNC", "WALBootstrapSync"),
    ("WAL_BOOTSTRAP_WRITE", "WALBootstrapWrite"),
    ("WAL_COPY_READ", "WALCopyRead"),
    ("WAL_COPY_SYNC", "WALCopySync"),
    ("WAL_COPY_WRITE", "WALCopyWrite"),
    ("WAL_INIT_SYNC", "WALInitSync"),
    ("WAL_INIT_WRITE", "WALInitWrite"),
    ("WAL_READ", "WALRead"),
    ("WAL_SYNC", "WALSync"),
    ("WAL_SYNC_METHOD_ASSIGN", "WALSyncMethodAssign"),
    ("WAL_WRITE", "WALWrite"),
];

/// `WAIT_EVENT_DATA_FILE_READ` -> `DataFileRead` (17+ generates its names
/// so; before 17 with [`HAND_WRITTEN`]'s exceptions).
pub fn enumerator_name(enumerator: &str, generated: bool) -> String {
    let words = enumerator.strip_prefix("WAIT_EVENT_").unwrap_or(enumerator);
    if !generated && let Some((_, n)) = HAND_WRITTEN.iter().find(|(e, _)| *e == words) {
        return (*n).to_string();
    }
    words
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + &c.as_str().to_ascii_lowercase(),
                None => String::new(),
            }
        })
        .collect()
}

pub(crate) fn read_u64(pid: i32, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    crate::perf::watch::read_mem(pid, addr, &mut b).then(|| u64::from_le_bytes(b))
}

/// A NUL-terminated string of at most 64 bytes.
pub(crate) fn read_cstr(pid: i32, addr: u64) -> Option<String> {
    if addr == 0 {
        return None;
    }
    let mut out = Vec::new();
    for i in 0..64u64 {
        let mut b = [0u8; 1];
        if !crate::perf::watch::read_mem(pid, addr + i, &mut b) {
            return None;
        }
        if b[0] == 0 {
            return String::from_utf8(out).ok();
        }
        out.push(b[0]);
    }
    None
}

/// The entries of the global array of string pointers `name` (address in
/// the binary, element count from the debug info).
fn array_of(di: &DebugInfo, name: &str) -> Option<(u64, u64)> {
    let (addr, t) = di.global(name)?;
    let count = match &*strip(di, &t?) {
        Type::Array { count, .. } => count.unwrap_or(0),
        _ => 0,
    };
    Some((addr, count))
}

/// Entry `i` of the array of string pointers `name` in process `pid`.
fn array_entry(di: &DebugInfo, pid: i32, bias: u64, name: &str, i: u64) -> Option<String> {
    let (addr, count) = array_of(di, name)?;
    if i >= count {
        return None;
    }
    read_cstr(pid, read_u64(pid, addr + bias + 8 * i)?)
}

/// The address of the wait-event word of backend `pid` (the binary
/// loaded at `bias`): `*my_wait_event_info` (14+) or
/// `&MyProc->wait_event_info` (13), read from its memory.
pub fn word_address(di: &DebugInfo, pid: i32, bias: u64) -> Result<u64, String> {
    let (what, shape) = super::waitsites::word_shape(di).map_err(|e| format!("{e:#}"))?;
    let p = read_u64(pid, shape.pointer + bias)
        .ok_or_else(|| format!("{what}: the backend's memory cannot be read"))?;
    if p == 0 {
        return Err(format!(
            "{what}: the pointer is NULL (no wait events in this process)"
        ));
    }
    Ok(p.wrapping_add_signed(shape.offset))
}

/// The name of `info` by the debug info and the backend's memory (steps
/// 2 and 3 of the module's order), None when neither names it.
pub fn static_name(di: &DebugInfo, pid: i32, bias: u64, info: u32) -> Option<(String, String)> {
    let class = info >> 24;
    let low = (info & 0xffff) as u64;
    match class {
        // PG_WAIT_LWLOCK | tranche
        0x01 => {
            let name = match array_of(di, "IndividualLWLockNames") {
                Some((_, n)) if low < n => array_entry(di, pid, bias, "IndividualLWLockNames", low),
                Some((_, n)) => array_entry(di, pid, bias, "BuiltinTrancheNames", low - n),
                None => array_entry(di, pid, bias, "BuiltinTrancheNames", low),
            }?;
            return Some(("LWLock".into(), name));
        }
        // PG_WAIT_LOCK | lock tag type
        0x03 => {
            let name = array_entry(di, pid, bias, "LockTagTypeNames", low)?;
            return Some(("Lock".into(), name));
        }
        _ => {}
    }
    let generated = di.type_by_name("WaitEventBufferPin").is_some();
    for e in super::waits::CLASS_ENUMS {
        let Some(t) = di.type_by_name(e) else {
            continue;
        };
        let class_name = e.trim_start_matches("WaitEvent");
        if let Type::Enum { values, .. } = &*strip(di, &t)
            && let Some((n, _)) = values.iter().find(|(_, v)| *v as u32 == info)
        {
            return Some((class_name.into(), enumerator_name(n, generated)));
        }
    }
    // before 17: classes of one wait, no enum
    match info {
        0x0400_0000 => Some(("BufferPin".into(), "BufferPin".into())),
        0x0700_0000 => Some(("Extension".into(), "Extension".into())),
        _ => None,
    }
}

/// The names of `infos`: the cache's, then [`static_name`]'s.  Nothing is
/// asked of the backend and nothing is stored.
pub fn name_without_asking(
    di: &DebugInfo,
    pid: i32,
    bias: u64,
    infos: impl IntoIterator<Item = u32>,
) -> WaitNames {
    let mut names = WaitNames::load(&di.build_id);
    for info in infos {
        if info == 0 || names.map.contains_key(&info) {
            continue;
        }
        if let Some(n) = static_name(di, pid, bias, info) {
            names.map.insert(info, n);
        }
    }
    if names.failed.is_none() {
        names.failed = Some("neither the debug info nor the backend's name arrays name it".into());
    }
    names
}

#[cfg(test)]
mod tests {
    use super::enumerator_name;

    #[test]
    fn names_from_enumerators() {
        assert_eq!(enumerator_name("WAIT_EVENT_PG_SLEEP", true), "PgSleep");
        assert_eq!(
            enumerator_name("WAIT_EVENT_DATA_FILE_READ", false),
            "DataFileRead"
        );
        // 17+ generates, before 17 by hand
        assert_eq!(enumerator_name("WAIT_EVENT_WAL_WRITE", true), "WalWrite");
        assert_eq!(enumerator_name("WAIT_EVENT_WAL_WRITE", false), "WALWrite");
        assert_eq!(
            enumerator_name("WAIT_EVENT_BUFFILE_READ", true),
            "BuffileRead"
        );
        assert_eq!(
            enumerator_name("WAIT_EVENT_MQ_SEND", false),
            "MessageQueueSend"
        );
    }
}
