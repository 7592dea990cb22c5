//! Uprobes defined through tracefs (`uprobe_events`) instead of the
//! `uprobe` PMU, for one reason: their fetch arguments.  The kernel copies
//! what they name (a register, bytes two pointers away) into each record
//! at the hit, so pgdbg need not be woken to read the backend's memory
//! before the backend reuses it (`perf probe -x postgres 'f arg'` works the
//! same way).
//!
//! A definition is a line in `uprobe_events`; it places nothing in the
//! backend by itself: the kernel writes its int3 only while a perf event
//! opened on it (per thread) is open, and takes it out when that event is
//! closed.  pgdbg removes its definitions once their events are closed;
//! those of a pgdbg that was killed are removed by its keeper (keeper.rs),
//! or else by the next pgdbg (group `pgdbg_<pid>_<start time>` of a
//! process that is gone).

use super::pmu::PERF_TYPE_TRACEPOINT;
use super::uprobe_events::{append, remove_where};
use super::{Attr, Event, FLAG_DISABLED, FLAG_EXCLUDE_HV, FLAG_USE_CLOCKID, SAMPLE_TIME, Wakeup};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

const SAMPLE_RAW: u64 = 1 << 10;

/// Where tracefs is mounted, mounting it on /sys/kernel/tracing (where
/// systemd mounts it) when it is nowhere; the reason when it cannot be
/// had.  The second value says whether pgdbg mounted it now.
pub fn root() -> Result<(PathBuf, bool), String> {
    for d in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(d).join("uprobe_events").exists() {
            return Ok((PathBuf::from(d), false));
        }
    }
    let d = "/sys/kernel/tracing";
    if !Path::new(d).is_dir() {
        return Err(format!("tracefs is not mounted and {d} does not exist"));
    }
    let src = c"tracefs";
    let dst = c"/sys/kernel/tracing";
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            src.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(format!(
            "tracefs is not mounted and mounting it on {d} failed ({}): mount it (mount -t tracefs nodev {d}) or run pgdbg as root",
            std::io::Error::last_os_error()
        ));
    }
    if Path::new(d).join("uprobe_events").exists() {
        Ok((PathBuf::from(d), true))
    } else {
        Err("this kernel has no uprobe trace events (CONFIG_UPROBE_EVENTS)".into())
    }
}

/// A tracepoint's id and record fields (`events/SYSTEM/NAME/` in tracefs,
/// mounted when it is not); the reason, in words, when they cannot be read.
pub fn tracepoint(system: &str, name: &str) -> Result<(u64, HashMap<String, Field>), String> {
    let find = || {
        ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .iter()
            .map(|d| Path::new(d).join("events").join(system).join(name))
            .find(|e| e.join("format").exists())
    };
    let dir = match find() {
        Some(d) => d,
        None => {
            // mounts tracefs where it is missing (its error says why not)
            let root = root();
            find().ok_or_else(|| match root {
                Err(e) => e,
                Ok(_) => format!("this kernel has no {system}:{name} tracepoint"),
            })?
        }
    };
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f)).map_err(|e| {
            format!(
                "cannot read {} ({e}): run pgdbg as root",
                dir.join(f).display()
            )
        })
    };
    let id = read("id")?
        .trim()
        .parse::<u64>()
        .map_err(|e| format!("{}: {e}", dir.join("id").display()))?;
    Ok((id, parse_format(&read("format")?)))
}

/// One field of a trace event's record (from its `format` file).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
}

/// The fields of a `format` file, by name.
pub fn parse_format(text: &str) -> HashMap<String, Field> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut decl = None;
        let mut offset = None;
        let mut size = None;
        for part in rest.split(';') {
            let part = part.trim();
            if let Some(v) = part.strip_prefix("offset:") {
                offset = v.parse().ok();
            } else if let Some(v) = part.strip_prefix("size:") {
                size = v.parse().ok();
            } else if decl.is_none() && !part.is_empty() && !part.contains(':') {
                decl = Some(part.to_string());
            }
        }
        let (Some(decl), Some(offset), Some(size)) = (decl, offset, size) else {
            continue;
        };
        let Some(name) = decl.split_whitespace().last() else {
            continue;
        };
        let name = name.split('[').next().unwrap_or(name).to_string();
        out.insert(name, Field { offset, size });
    }
    out
}

/// The bytes of a field (a number, an array) of a raw record.
pub fn field_bytes<'a>(raw: &'a [u8], f: &Field) -> Option<&'a [u8]> {
    raw.get(f.offset..f.offset + f.size)
}

/// A u64 (or u32) field of a raw record.
pub fn field_u64(raw: &[u8], f: &Field) -> Option<u64> {
    let b = field_bytes(raw, f)?;
    Some(match f.size {
        8 => u64::from_le_bytes(b.try_into().ok()?),
        4 => u32::from_le_bytes(b.try_into().ok()?) as u64,
        _ => return None,
    })
}

/// A definition in `uprobe_events`, removed when dropped (drop it after
/// its events are closed: the kernel refuses to remove one in use).
pub struct Definition {
    root: PathBuf,
    group: String,
    name: String,
    pub id: u64,
    pub fields: HashMap<String, Field>,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The start time (clock ticks since boot) of process `pid` (a number in
/// a group's name).
fn start_time(pid: &str) -> Option<u64> {
    crate::inferior::procfs::start_time(pid.parse().ok()?)
}

/// This pgdbg's group of definitions: `pgdbg_<pid>_<start time>`, so that
/// a reused pid is another group.
fn own_group() -> String {
    format!(
        "pgdbg_{}_{}",
        std::process::id(),
        crate::inferior::procfs::start_time(std::process::id() as i32).unwrap_or(0)
    )
}

/// Remove the definitions left by pgdbgs that are gone (killed before they
/// or their keeper could remove them).  Best effort.
fn remove_stale(root: &Path) {
    let own = own_group();
    // pgdbg_<pid>_<start time>: stale when that process is gone (the
    // kernel refuses to remove a definition still in use)
    remove_where(root, |pid, started| {
        format!("pgdbg_{pid}_{started}") != own
            && start_time(pid).map(|t| t.to_string()) != Some(started.to_string())
    });
}

/// Why a [`Definition`] could not be made, in words: the advice to run
/// as root only where the kernel refused the write.
pub fn define_error(root: &Path, e: &std::io::Error) -> String {
    let advice = if e.kind() == std::io::ErrorKind::PermissionDenied {
        ": run pgdbg as root"
    } else {
        ""
    };
    format!(
        "cannot define a uprobe in {}/uprobe_events ({e}){advice}",
        root.display()
    )
}

impl Definition {
    /// Define a uprobe at `offset` in `path` with the fetch arguments
    /// `args` (uprobe_events syntax, e.g. `qd=%di:u64 text=+0(%dx):u64[32]`).
    pub fn new(root: &Path, path: &Path, offset: u64, args: &str) -> std::io::Result<Definition> {
        let p = path.to_string_lossy();
        if p.chars().any(char::is_whitespace) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{p}: a path with blanks cannot be named in uprobe_events"),
            ));
        }
        if NEXT.load(Ordering::Relaxed) == 0 {
            remove_stale(root);
        }
        let group = own_group();
        let name = format!("m{}", NEXT.fetch_add(1, Ordering::Relaxed));
        append(root, &format!("p:{group}/{name} {p}:{offset:#x} {args}"))?;
        let mut d = Definition {
            root: root.to_path_buf(),
            group,
            name,
            id: 0,
            fields: HashMap::new(),
        };
        let dir = root.join("events").join(&d.group).join(&d.name);
        d.id = std::fs::read_to_string(dir.join("id"))?
            .trim()
            .parse()
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        d.fields = parse_format(&std::fs::read_to_string(dir.join("format"))?);
        Ok(d)
    }

    /// A perf event on thread `tid` sampling every hit (time and the raw
    /// record), its reader woken as `wakeup` says; not enabled yet.
    pub fn open(&self, tid: i32, wakeup: Wakeup, pages: usize) -> std::io::Result<Event> {
        let attr = Attr {
            kind: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<Attr>() as u32,
            config: self.id,
            period_or_freq: 1,
            sample_type: SAMPLE_TIME | SAMPLE_RAW,
            flags: FLAG_DISABLED | FLAG_EXCLUDE_HV | FLAG_USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            ..Attr::default()
        }
        .wakeup(wakeup);
        Event::open(&attr, tid, pages)
    }
}

impl Drop for Definition {
    fn drop(&mut self) {
        // after the events made from it: their close runs in the
        // background (keeper.rs), and the kernel refuses to remove a
        // definition still in use, which would be left behind; queued
        // behind them, it goes once they are closed
        let ev = format!("{}/{}", self.group, self.name);
        super::keeper::queue_closing(super::keeper::Closing::Definition(self.root.clone(), ev));
    }
}

/// A record of an event made by [`Definition::open`]: its time and raw
/// bytes.
pub fn parse_record(b: &[u8]) -> Option<(u64, &[u8])> {
    let time = u64::from_le_bytes(b.get(0..8)?.try_into().ok()?);
    let size = u32::from_le_bytes(b.get(8..12)?.try_into().ok()?) as usize;
    Some((time, b.get(12..12 + size)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORMAT: &str = "name: m0
ID: 1234
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:u64 qd;\toffset:16;\tsize:8;\tsigned:0;
\tfield:u64 text[32];\toffset:24;\tsize:256;\tsigned:0;

print fmt: \"(%lx) qd=0x%Lx\", REC->__probe_ip, REC->qd
";

    #[test]
    fn format_fields_and_a_record() {
        let f = parse_format(FORMAT);
        assert_eq!(
            f["qd"],
            Field {
                offset: 16,
                size: 8
            }
        );
        assert_eq!(
            f["text"],
            Field {
                offset: 24,
                size: 256
            }
        );
        assert_eq!(f["common_pid"].offset, 4);
        // a raw record: header, ip, qd, then the text's words
        let mut raw = vec![0u8; 24 + 256];
        raw[16..24].copy_from_slice(&0xdead_beefu64.to_le_bytes());
        raw[24..33].copy_from_slice(b"select 1\0");
        assert_eq!(field_u64(&raw, &f["qd"]), Some(0xdead_beef));
        assert_eq!(&field_bytes(&raw, &f["text"]).unwrap()[..8], b"select 1");
        // a sample record: time, size, raw
        let mut rec = 77u64.to_le_bytes().to_vec();
        rec.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        rec.extend_from_slice(&raw);
        let (t, r) = parse_record(&rec).unwrap();
        assert_eq!((t, r.len()), (77, raw.len()));
        // a field past the record is not read
        assert_eq!(field_bytes(&raw[..100], &f["text"]), None);
    }
}
